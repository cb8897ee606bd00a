package translate

import "encoding/json"

// The hand decoders of the request and response types, one per struct,
// each reading its fields as its tags name them (handdecode.go).

var oaRequestInFields = []string{"messages", "max_tokens", "max_completion_tokens", "temperature", "top_p",
	"stop", "stream", "n", "tools", "tool_choice", "parallel_tool_calls", "user", "functions",
	"function_call", "stream_options"}

func (d *handDecoder) oaRequestIn(r *oaRequestIn) bool {
	var seen uint32
	return d.object(func(key []byte) bool {
		switch string(key) {
		case "messages":
			return once(&seen, 0) && d.oaMessages(&r.Messages)
		case "max_tokens":
			return once(&seen, 1) && d.intPtr(&r.MaxTokens)
		case "max_completion_tokens":
			return once(&seen, 2) && d.intPtr(&r.MaxCompletionTokens)
		case "temperature":
			return once(&seen, 3) && d.floatPtr(&r.Temperature)
		case "top_p":
			return once(&seen, 4) && d.floatPtr(&r.TopP)
		case "stop":
			return once(&seen, 5) && d.stop(&r.Stop)
		case "stream":
			return once(&seen, 6) && d.boolInto(&r.Stream)
		case "n":
			return once(&seen, 7) && d.intPtr(&r.N)
		case "tools":
			return once(&seen, 8) && d.oaTools(&r.Tools)
		case "tool_choice":
			return once(&seen, 9) && d.raw(&r.ToolChoice)
		case "parallel_tool_calls":
			return once(&seen, 10) && d.boolPtr(&r.ParallelToolCalls)
		case "user":
			return once(&seen, 11) && d.stringInto(&r.User)
		case "functions":
			return once(&seen, 12) && d.raw(&r.Functions)
		case "function_call":
			return once(&seen, 13) && d.raw(&r.FunctionCall)
		case "stream_options":
			if !once(&seen, 14) {
				return false
			}
			if d.null() {
				r.StreamOptions = nil
				return true
			}
			r.StreamOptions = &struct {
				IncludeUsage bool `json:"include_usage"`
			}{}
			return d.object(func(key []byte) bool {
				if string(key) == "include_usage" {
					return d.boolInto(&r.StreamOptions.IncludeUsage)
				}
				return d.unknown(key, includeUsageField)
			})
		}
		return d.topLevelOther(key, oaRequestInFields)
	})
}

var includeUsageField = []string{"include_usage"}

// stop reads OpenAI's stop, a string or an array of strings, as
// stopField.UnmarshalJSON does.
func (d *handDecoder) stop(s *stopField) bool {
	switch d.peek() {
	case 'n':
		*s = nil
		return d.null()
	case '"':
		one, ok := d.str()
		*s = stopField{one}
		return ok
	}
	var many []string
	if !d.strings(&many) || many == nil {
		return false
	}
	*s = many
	return true
}

// strings reads an array of strings, or null (nil), into p.
func (d *handDecoder) strings(p *[]string) bool {
	if d.null() {
		*p = nil
		return true
	}
	ss := make([]string, 0, 4)
	ok := d.array(func() bool {
		ss = append(ss, "")
		return d.stringInto(&ss[len(ss)-1])
	})
	*p = ss
	return ok
}

func (d *handDecoder) oaMessages(p *[]oaMessage) bool {
	if d.null() {
		*p = nil
		return true
	}
	ms := make([]oaMessage, 0, 4)
	ok := d.array(func() bool {
		ms = append(ms, oaMessage{})
		return d.null() || d.oaMessage(&ms[len(ms)-1])
	})
	*p = ms
	return ok
}

var oaMessageFields = []string{"role", "content", "name", "tool_calls", "tool_call_id",
	"reasoning_content", "refusal", "function_call", "audio"}

func (d *handDecoder) oaMessage(m *oaMessage) bool {
	var seen uint32
	return d.object(func(key []byte) bool {
		switch string(key) {
		case "role":
			return once(&seen, 0) && d.stringInto(&m.Role)
		case "content":
			return once(&seen, 1) && d.raw(&m.Content)
		case "name":
			return once(&seen, 2) && d.stringInto(&m.Name)
		case "tool_calls":
			return once(&seen, 3) && d.oaToolCalls(&m.ToolCalls)
		case "tool_call_id":
			return once(&seen, 4) && d.stringInto(&m.ToolCallID)
		case "reasoning_content":
			return once(&seen, 5) && d.raw(&m.ReasoningContent)
		case "refusal":
			return once(&seen, 6) && d.raw(&m.Refusal)
		case "function_call":
			return once(&seen, 7) && d.raw(&m.FunctionCall)
		case "audio":
			return once(&seen, 8) && d.raw(&m.Audio)
		}
		return d.unknown(key, oaMessageFields)
	})
}

func (d *handDecoder) oaToolCalls(p *[]oaToolCall) bool {
	if d.null() {
		*p = nil
		return true
	}
	var calls []oaToolCall
	ok := d.array(func() bool {
		calls = append(calls, oaToolCall{})
		return d.null() || d.oaToolCall(&calls[len(calls)-1])
	})
	if calls == nil {
		calls = []oaToolCall{}
	}
	*p = calls
	return ok
}

var (
	oaToolCallFields = []string{"id", "type", "function"}
	oaFunctionFields = []string{"name", "arguments"}
)

func (d *handDecoder) oaToolCall(c *oaToolCall) bool {
	var seen uint32
	return d.object(func(key []byte) bool {
		switch string(key) {
		case "id":
			return once(&seen, 0) && d.stringInto(&c.ID)
		case "type":
			return once(&seen, 1) && d.stringInto(&c.Type)
		case "function":
			if !once(&seen, 2) {
				return false
			}
			if d.null() {
				return true
			}
			var fseen uint32
			return d.object(func(key []byte) bool {
				switch string(key) {
				case "name":
					return once(&fseen, 0) && d.stringInto(&c.Function.Name)
				case "arguments":
					return once(&fseen, 1) && d.raw(&c.Function.Arguments)
				}
				return d.unknown(key, oaFunctionFields)
			})
		}
		return d.unknown(key, oaToolCallFields)
	})
}

var (
	oaToolFields     = []string{"type", "function"}
	oaToolFuncFields = []string{"name", "description", "parameters", "strict"}
)

func (d *handDecoder) oaTools(p *[]oaTool) bool {
	if d.null() {
		*p = nil
		return true
	}
	var tools []oaTool
	ok := d.array(func() bool {
		tools = append(tools, oaTool{})
		t := &tools[len(tools)-1]
		if d.null() {
			return true
		}
		var seen uint32
		return d.object(func(key []byte) bool {
			switch string(key) {
			case "type":
				return once(&seen, 0) && d.stringInto(&t.Type)
			case "function":
				if !once(&seen, 1) {
					return false
				}
				if d.null() {
					t.Function = nil
					return true
				}
				t.Function = &struct {
					Name        string          `json:"name"`
					Description string          `json:"description"`
					Parameters  json.RawMessage `json:"parameters"`
					Strict      json.RawMessage `json:"strict"`
				}{}
				fn := t.Function
				var fseen uint32
				return d.object(func(key []byte) bool {
					switch string(key) {
					case "name":
						return once(&fseen, 0) && d.stringInto(&fn.Name)
					case "description":
						return once(&fseen, 1) && d.stringInto(&fn.Description)
					case "parameters":
						return once(&fseen, 2) && d.raw(&fn.Parameters)
					case "strict":
						return once(&fseen, 3) && d.raw(&fn.Strict)
					}
					return d.unknown(key, oaToolFuncFields)
				})
			}
			return d.unknown(key, oaToolFields)
		})
	})
	if tools == nil {
		tools = []oaTool{}
	}
	*p = tools
	return ok
}

var (
	oaPartFields     = []string{"type", "text", "refusal", "image_url", "file"}
	oaImageURLFields = []string{"url", "detail"}
	oaFileFields     = []string{"file_data", "file_id", "filename"}
)

func (d *handDecoder) oaParts(p *[]oaPart) bool {
	if d.null() {
		*p = nil
		return true
	}
	parts := make([]oaPart, 0, 4)
	ok := d.array(func() bool {
		parts = append(parts, oaPart{})
		if d.null() {
			return true
		}
		return d.oaPart(&parts[len(parts)-1])
	})
	*p = parts
	return ok
}

func (d *handDecoder) oaPart(pt *oaPart) bool {
	var seen uint32
	return d.object(func(key []byte) bool {
		switch string(key) {
		case "type":
			return once(&seen, 0) && d.stringInto(&pt.Type)
		case "text":
			return once(&seen, 1) && d.stringInto(&pt.Text)
		case "refusal":
			return once(&seen, 2) && d.stringInto(&pt.Refusal)
		case "image_url":
			if !once(&seen, 3) {
				return false
			}
			if d.null() {
				pt.ImageURL = nil
				return true
			}
			pt.ImageURL = &struct {
				URL    string `json:"url"`
				Detail string `json:"detail"`
			}{}
			u := pt.ImageURL
			var useen uint32
			return d.object(func(key []byte) bool {
				switch string(key) {
				case "url":
					return once(&useen, 0) && d.stringInto(&u.URL)
				case "detail":
					return once(&useen, 1) && d.stringInto(&u.Detail)
				}
				return d.unknown(key, oaImageURLFields)
			})
		case "file":
			if !once(&seen, 4) {
				return false
			}
			if d.null() {
				pt.File = nil
				return true
			}
			pt.File = &struct {
				FileData string `json:"file_data"`
				FileID   string `json:"file_id"`
				Filename string `json:"filename"`
			}{}
			f := pt.File
			var fseen uint32
			return d.object(func(key []byte) bool {
				switch string(key) {
				case "file_data":
					return once(&fseen, 0) && d.stringInto(&f.FileData)
				case "file_id":
					return once(&fseen, 1) && d.stringInto(&f.FileID)
				case "filename":
					return once(&fseen, 2) && d.stringInto(&f.Filename)
				}
				return d.unknown(key, oaFileFields)
			})
		}
		return d.unknown(key, oaPartFields)
	})
}

var anRequestInFields = []string{"messages", "system", "max_tokens", "temperature", "top_p",
	"stop_sequences", "stream", "tools", "tool_choice", "metadata"}

func (d *handDecoder) anRequestIn(r *anRequestIn) bool {
	var seen uint32
	return d.object(func(key []byte) bool {
		switch string(key) {
		case "messages":
			if !once(&seen, 0) {
				return false
			}
			if d.null() {
				r.Messages = nil
				return true
			}
			ms := make([]anMessageIn, 0, 8)
			ok := d.array(func() bool {
				ms = append(ms, anMessageIn{})
				m := &ms[len(ms)-1]
				if d.null() {
					return true
				}
				var mseen uint32
				return d.object(func(key []byte) bool {
					switch string(key) {
					case "role":
						return once(&mseen, 0) && d.stringInto(&m.Role)
					case "content":
						return once(&mseen, 1) && d.raw(&m.Content)
					}
					return d.unknown(key, anMessageInFields)
				})
			})
			r.Messages = ms
			return ok
		case "system":
			return once(&seen, 1) && d.raw(&r.System)
		case "max_tokens":
			return once(&seen, 2) && d.intPtr(&r.MaxTokens)
		case "temperature":
			return once(&seen, 3) && d.floatPtr(&r.Temperature)
		case "top_p":
			return once(&seen, 4) && d.floatPtr(&r.TopP)
		case "stop_sequences":
			return once(&seen, 5) && d.strings(&r.StopSequences)
		case "stream":
			return once(&seen, 6) && d.boolInto(&r.Stream)
		case "tools":
			return once(&seen, 7) && d.anTools(&r.Tools)
		case "tool_choice":
			return once(&seen, 8) && d.raw(&r.ToolChoice)
		case "metadata":
			return once(&seen, 9) && d.rawMap(&r.Metadata)
		}
		return d.topLevelOther(key, anRequestInFields)
	})
}

var (
	anMessageInFields = []string{"role", "content"}
	anToolInFields    = []string{"type", "name", "description", "input_schema", "cache_control"}
)

// rawMap reads an object of any values, or null (nil), into p. Its keys
// must be plain (plainKey) and each once.
func (d *handDecoder) rawMap(p *map[string]json.RawMessage) bool {
	if d.null() {
		*p = nil
		return true
	}
	m := make(map[string]json.RawMessage)
	*p = m
	return d.object(func(key []byte) bool {
		if _, dup := m[string(key)]; dup {
			return false
		}
		var v json.RawMessage
		if !d.raw(&v) {
			return false
		}
		m[string(key)] = v
		return true
	})
}

func (d *handDecoder) anTools(p *[]anToolIn) bool {
	if d.null() {
		*p = nil
		return true
	}
	var tools []anToolIn
	ok := d.array(func() bool {
		tools = append(tools, anToolIn{})
		t := &tools[len(tools)-1]
		if d.null() {
			return true
		}
		var seen uint32
		return d.object(func(key []byte) bool {
			switch string(key) {
			case "type":
				return once(&seen, 0) && d.stringInto(&t.Type)
			case "name":
				return once(&seen, 1) && d.stringInto(&t.Name)
			case "description":
				return once(&seen, 2) && d.stringInto(&t.Description)
			case "input_schema":
				return once(&seen, 3) && d.raw(&t.InputSchema)
			case "cache_control":
				return once(&seen, 4) && d.raw(&t.CacheControl)
			}
			return d.unknown(key, anToolInFields)
		})
	})
	if tools == nil {
		tools = []anToolIn{}
	}
	*p = tools
	return ok
}

var (
	anBlockInFields = []string{"type", "text", "source", "title", "id", "name", "input", "tool_use_id",
		"content", "is_error", "cache_control", "citations"}
	anSourceFields = []string{"type", "media_type", "data", "url", "content"}
)

func (d *handDecoder) anBlocks(p *[]anBlockIn) bool {
	if d.null() {
		*p = nil
		return true
	}
	blocks := make([]anBlockIn, 0, 4)
	ok := d.array(func() bool {
		blocks = append(blocks, anBlockIn{})
		if d.null() {
			return true
		}
		return d.anBlock(&blocks[len(blocks)-1])
	})
	*p = blocks
	return ok
}

func (d *handDecoder) anBlock(b *anBlockIn) bool {
	var seen uint32
	return d.object(func(key []byte) bool {
		switch string(key) {
		case "type":
			return once(&seen, 0) && d.stringInto(&b.Type)
		case "text":
			return once(&seen, 1) && d.stringInto(&b.Text)
		case "source":
			if !once(&seen, 2) {
				return false
			}
			if d.null() {
				b.Source = nil
				return true
			}
			b.Source = &struct {
				Type      string          `json:"type"`
				MediaType string          `json:"media_type"`
				Data      string          `json:"data"`
				URL       string          `json:"url"`
				Content   json.RawMessage `json:"content"`
			}{}
			s := b.Source
			var sseen uint32
			return d.object(func(key []byte) bool {
				switch string(key) {
				case "type":
					return once(&sseen, 0) && d.stringInto(&s.Type)
				case "media_type":
					return once(&sseen, 1) && d.stringInto(&s.MediaType)
				case "data":
					return once(&sseen, 2) && d.stringInto(&s.Data)
				case "url":
					return once(&sseen, 3) && d.stringInto(&s.URL)
				case "content":
					return once(&sseen, 4) && d.raw(&s.Content)
				}
				return d.unknown(key, anSourceFields)
			})
		case "title":
			return once(&seen, 3) && d.stringInto(&b.Title)
		case "id":
			return once(&seen, 4) && d.stringInto(&b.ID)
		case "name":
			return once(&seen, 5) && d.stringInto(&b.Name)
		case "input":
			return once(&seen, 6) && d.raw(&b.Input)
		case "tool_use_id":
			return once(&seen, 7) && d.stringInto(&b.ToolUseID)
		case "content":
			return once(&seen, 8) && d.raw(&b.Content)
		case "is_error":
			return once(&seen, 9) && d.boolInto(&b.IsError)
		case "cache_control":
			return once(&seen, 10) && d.raw(&b.CacheControl)
		case "citations":
			return once(&seen, 11) && d.raw(&b.Citations)
		}
		return d.unknown(key, anBlockInFields)
	})
}

var (
	anResponseFields  = []string{"id", "model", "content", "stop_reason", "usage"}
	anRespBlockFields = []string{"type", "text", "id", "name", "input", "thinking"}
	anUsageFields     = []string{"input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"}
)

func (d *handDecoder) anResponse(r *anResponse) bool {
	var seen uint32
	return d.object(func(key []byte) bool {
		switch string(key) {
		case "id":
			return once(&seen, 0) && d.stringInto(&r.ID)
		case "model":
			return once(&seen, 1) && d.stringInto(&r.Model)
		case "content":
			if !once(&seen, 2) {
				return false
			}
			if d.null() {
				r.Content = nil
				return true
			}
			blocks := make([]anRespBlock, 0, 4)
			ok := d.array(func() bool {
				blocks = append(blocks, anRespBlock{})
				b := &blocks[len(blocks)-1]
				if d.null() {
					return true
				}
				var bseen uint32
				return d.object(func(key []byte) bool {
					switch string(key) {
					case "type":
						return once(&bseen, 0) && d.stringInto(&b.Type)
					case "text":
						return once(&bseen, 1) && d.stringInto(&b.Text)
					case "id":
						return once(&bseen, 2) && d.stringInto(&b.ID)
					case "name":
						return once(&bseen, 3) && d.stringInto(&b.Name)
					case "input":
						return once(&bseen, 4) && d.raw(&b.Input)
					case "thinking":
						return once(&bseen, 5) && d.stringInto(&b.Thinking)
					}
					return d.unknown(key, anRespBlockFields)
				})
			})
			r.Content = blocks
			return ok
		case "stop_reason":
			return once(&seen, 3) && d.stringInto(&r.StopReason)
		case "usage":
			if !once(&seen, 4) {
				return false
			}
			if d.null() {
				r.Usage = nil
				return true
			}
			u := &anUsage{}
			r.Usage = u
			var useen uint32
			return d.object(func(key []byte) bool {
				switch string(key) {
				case "input_tokens":
					return once(&useen, 0) && d.intInto(&u.InputTokens)
				case "output_tokens":
					return once(&useen, 1) && d.intInto(&u.OutputTokens)
				case "cache_creation_input_tokens":
					return once(&useen, 2) && d.intInto(&u.CacheCreationInputTokens)
				case "cache_read_input_tokens":
					return once(&useen, 3) && d.intInto(&u.CacheReadInputTokens)
				}
				return d.unknown(key, anUsageFields)
			})
		}
		return d.unknown(key, anResponseFields)
	})
}

var (
	oaResponseFields = []string{"id", "model", "choices", "usage"}
	oaChoiceFields   = []string{"message", "finish_reason"}
	oaRespMsgFields  = []string{"content", "reasoning_content", "reasoning", "refusal", "tool_calls"}
	oaUsageFields    = []string{"prompt_tokens", "completion_tokens", "prompt_tokens_details"}
	cachedTokensFld  = []string{"cached_tokens"}
)

func (d *handDecoder) oaResponse(r *oaResponse) bool {
	var seen uint32
	return d.object(func(key []byte) bool {
		switch string(key) {
		case "id":
			return once(&seen, 0) && d.stringInto(&r.ID)
		case "model":
			return once(&seen, 1) && d.stringInto(&r.Model)
		case "choices":
			if !once(&seen, 2) {
				return false
			}
			if d.null() {
				r.Choices = nil
				return true
			}
			choices := make([]oaChoice, 0, 1)
			ok := d.array(func() bool {
				choices = append(choices, oaChoice{})
				if d.null() {
					return true
				}
				return d.oaChoice(&choices[len(choices)-1])
			})
			r.Choices = choices
			return ok
		case "usage":
			if !once(&seen, 3) {
				return false
			}
			if d.null() {
				r.Usage = nil
				return true
			}
			u := &oaUsage{}
			r.Usage = u
			var useen uint32
			return d.object(func(key []byte) bool {
				switch string(key) {
				case "prompt_tokens":
					return once(&useen, 0) && d.intInto(&u.PromptTokens)
				case "completion_tokens":
					return once(&useen, 1) && d.intInto(&u.CompletionTokens)
				case "prompt_tokens_details":
					if !once(&useen, 2) {
						return false
					}
					if d.null() {
						u.PromptTokensDetails = nil
						return true
					}
					u.PromptTokensDetails = &struct {
						CachedTokens int `json:"cached_tokens"`
					}{}
					det := u.PromptTokensDetails
					var dseen uint32
					return d.object(func(key []byte) bool {
						if string(key) == "cached_tokens" {
							return once(&dseen, 0) && d.intInto(&det.CachedTokens)
						}
						return d.unknown(key, cachedTokensFld)
					})
				}
				return d.unknown(key, oaUsageFields)
			})
		}
		return d.unknown(key, oaResponseFields)
	})
}

func (d *handDecoder) oaChoice(c *oaChoice) bool {
	var seen uint32
	return d.object(func(key []byte) bool {
		switch string(key) {
		case "message":
			if !once(&seen, 0) {
				return false
			}
			if d.null() {
				return true
			}
			m := &c.Message
			var mseen uint32
			return d.object(func(key []byte) bool {
				switch string(key) {
				case "content":
					return once(&mseen, 0) && d.stringPtr(&m.Content)
				case "reasoning_content":
					return once(&mseen, 1) && d.stringInto(&m.ReasoningContent)
				case "reasoning":
					return once(&mseen, 2) && d.stringInto(&m.Reasoning)
				case "refusal":
					return once(&mseen, 3) && d.stringPtr(&m.Refusal)
				case "tool_calls":
					return once(&mseen, 4) && d.oaToolCalls(&m.ToolCalls)
				}
				return d.unknown(key, oaRespMsgFields)
			})
		case "finish_reason":
			return once(&seen, 1) && d.stringInto(&c.FinishReason)
		}
		return d.unknown(key, oaChoiceFields)
	})
}

// stringPtr reads a string, or null (nil), into p.
func (d *handDecoder) stringPtr(p **string) bool {
	if d.null() {
		*p = nil
		return true
	}
	s, ok := d.str()
	if !ok {
		return false
	}
	*p = &s
	return true
}
