package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"

	"github.com/straitgw/strait/internal/llm/jsonscan"
)

// The translated request is written by hand, field by field, in the order
// and with the omissions its struct's tags give, instead of by
// encoding/json's reflection, which cost about a quarter of a request's
// translation. The output is byte for byte what json.Marshal (without HTML
// escaping) wrote; TestRequestEncoderMatchesMarshal and
// FuzzRequestEncoder compare the two.

// requestBufs hold the translated requests being written: a request is
// written into one, then copied out at its exact size, so a translation
// allocates its output once instead of growing it by doubling.
var requestBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// maxPooledRequest bounds the buffers kept, so that one huge request does
// not pin its buffer.
const maxPooledRequest = 64 << 10

// writeRequest writes r with appendR into a pooled buffer and returns a
// copy of the bytes.
func writeRequest[R any](r *R, appendR func([]byte, *R) ([]byte, error)) ([]byte, error) {
	bp := requestBufs.Get().(*[]byte)
	b, err := appendR((*bp)[:0], r)
	if err != nil {
		requestBufs.Put(bp)
		return nil, err
	}
	out := bytes.Clone(b)
	if cap(b) <= maxPooledRequest {
		*bp = b[:0]
		requestBufs.Put(bp)
	}
	return out, nil
}

// appendOARequest appends r as JSON.
func appendOARequest(b []byte, r *oaRequest) ([]byte, error) {
	var err error
	b = append(b, `{"model":`...)
	b = jsonscan.AppendString(b, r.Model)
	b = append(b, `,"messages":`...)
	if r.Messages == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range r.Messages {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendOAMessage(b, &r.Messages[i]); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	if r.MaxCompletionTokens != 0 {
		b = append(b, `,"max_completion_tokens":`...)
		b = appendInt(b, r.MaxCompletionTokens)
	}
	if r.Temperature != nil {
		b = append(b, `,"temperature":`...)
		if b, err = appendFloat(b, *r.Temperature); err != nil {
			return nil, err
		}
	}
	if r.TopP != nil {
		b = append(b, `,"top_p":`...)
		if b, err = appendFloat(b, *r.TopP); err != nil {
			return nil, err
		}
	}
	if len(r.Stop) > 0 {
		b = append(b, `,"stop":`...)
		b = appendStrings(b, r.Stop)
	}
	if r.Stream {
		b = append(b, `,"stream":true`...)
	}
	if r.StreamOptions != nil {
		b = append(b, `,"stream_options":{"include_usage":`...)
		b = strconv.AppendBool(b, r.StreamOptions.IncludeUsage)
		b = append(b, '}')
	}
	if len(r.Tools) > 0 {
		b = append(b, `,"tools":[`...)
		for i := range r.Tools {
			tool := &r.Tools[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"type":`...)
			b = jsonscan.AppendString(b, tool.Type)
			b = append(b, `,"function":{"name":`...)
			b = jsonscan.AppendString(b, tool.Function.Name)
			if tool.Function.Description != "" {
				b = append(b, `,"description":`...)
				b = jsonscan.AppendString(b, tool.Function.Description)
			}
			b = append(b, `,"parameters":`...)
			if b, err = appendRaw(b, tool.Function.Parameters); err != nil {
				return nil, err
			}
			b = append(b, "}}"...)
		}
		b = append(b, ']')
	}
	if len(r.ToolChoice) > 0 {
		b = append(b, `,"tool_choice":`...)
		if b, err = appendRaw(b, r.ToolChoice); err != nil {
			return nil, err
		}
	}
	if r.ParallelToolCalls != nil {
		b = append(b, `,"parallel_tool_calls":`...)
		b = strconv.AppendBool(b, *r.ParallelToolCalls)
	}
	if r.User != "" {
		b = append(b, `,"user":`...)
		b = jsonscan.AppendString(b, r.User)
	}
	return append(b, '}'), nil
}

func appendOAMessage(b []byte, m *oaMessageOut) ([]byte, error) {
	var err error
	b = append(b, `{"role":`...)
	b = jsonscan.AppendString(b, m.Role)
	b = append(b, `,"content":`...)
	switch c := m.Content.(type) {
	case nil:
		b = append(b, "null"...)
	case string:
		b = jsonscan.AppendString(b, c)
	case []oaPartOut:
		b = appendOAParts(b, c)
	default:
		if b, err = appendReflect(b, c); err != nil {
			return nil, err
		}
	}
	if len(m.ToolCalls) > 0 {
		b = append(b, `,"tool_calls":[`...)
		for i := range m.ToolCalls {
			tc := &m.ToolCalls[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = jsonscan.AppendString(b, tc.ID)
			b = append(b, `,"type":`...)
			b = jsonscan.AppendString(b, tc.Type)
			b = append(b, `,"function":{"name":`...)
			b = jsonscan.AppendString(b, tc.Function.Name)
			b = append(b, `,"arguments":`...)
			b = jsonscan.AppendString(b, tc.Function.Arguments)
			b = append(b, "}}"...)
		}
		b = append(b, ']')
	}
	if m.ToolCallID != "" {
		b = append(b, `,"tool_call_id":`...)
		b = jsonscan.AppendString(b, m.ToolCallID)
	}
	return append(b, '}'), nil
}

func appendOAParts(b []byte, parts []oaPartOut) []byte {
	if parts == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i := range parts {
		p := &parts[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":`...)
		b = jsonscan.AppendString(b, p.Type)
		if p.Text != nil {
			b = append(b, `,"text":`...)
			b = jsonscan.AppendString(b, *p.Text)
		}
		if p.ImageURL != nil {
			b = append(b, `,"image_url":{"url":`...)
			b = jsonscan.AppendString(b, p.ImageURL.URL)
			b = append(b, '}')
		}
		if p.File != nil {
			b = append(b, `,"file":{"file_data":`...)
			b = jsonscan.AppendString(b, p.File.FileData)
			b = append(b, `,"filename":`...)
			b = jsonscan.AppendString(b, p.File.Filename)
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendANRequest appends r as JSON.
func appendANRequest(b []byte, r *anRequest) ([]byte, error) {
	var err error
	b = append(b, `{"model":`...)
	b = jsonscan.AppendString(b, r.Model)
	if r.System != nil {
		b = append(b, `,"system":`...)
		if b, err = appendANContent(b, r.System); err != nil {
			return nil, err
		}
	}
	b = append(b, `,"messages":`...)
	if r.Messages == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range r.Messages {
			m := &r.Messages[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"role":`...)
			b = jsonscan.AppendString(b, m.Role)
			b = append(b, `,"content":`...)
			if b, err = appendANContent(b, m.Content); err != nil {
				return nil, err
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"max_tokens":`...)
	b = appendInt(b, r.MaxTokens)
	if r.Temperature != nil {
		b = append(b, `,"temperature":`...)
		if b, err = appendFloat(b, *r.Temperature); err != nil {
			return nil, err
		}
	}
	if r.TopP != nil {
		b = append(b, `,"top_p":`...)
		if b, err = appendFloat(b, *r.TopP); err != nil {
			return nil, err
		}
	}
	if len(r.StopSequences) > 0 {
		b = append(b, `,"stop_sequences":`...)
		b = appendStrings(b, r.StopSequences)
	}
	if r.Stream {
		b = append(b, `,"stream":true`...)
	}
	if len(r.Tools) > 0 {
		b = append(b, `,"tools":[`...)
		for i := range r.Tools {
			tool := &r.Tools[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"name":`...)
			b = jsonscan.AppendString(b, tool.Name)
			if tool.Description != "" {
				b = append(b, `,"description":`...)
				b = jsonscan.AppendString(b, tool.Description)
			}
			b = append(b, `,"input_schema":`...)
			if b, err = appendRaw(b, tool.InputSchema); err != nil {
				return nil, err
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(r.ToolChoice) > 0 {
		b = append(b, `,"tool_choice":`...)
		if b, err = appendRaw(b, r.ToolChoice); err != nil {
			return nil, err
		}
	}
	if r.Metadata != nil {
		b = append(b, `,"metadata":{"user_id":`...)
		b = jsonscan.AppendString(b, r.Metadata.UserID)
		b = append(b, '}')
	}
	return append(b, '}'), nil
}

// appendANContent appends Anthropic content: a string or blocks.
func appendANContent(b []byte, content any) ([]byte, error) {
	switch c := content.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return jsonscan.AppendString(b, c), nil
	case []anBlock:
		return appendANBlocks(b, c)
	}
	return appendReflect(b, content)
}

func appendANBlocks(b []byte, blocks []anBlock) ([]byte, error) {
	if blocks == nil {
		return append(b, "null"...), nil
	}
	var err error
	b = append(b, '[')
	for i := range blocks {
		k := &blocks[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":`...)
		b = jsonscan.AppendString(b, k.Type)
		if k.Text != nil {
			b = append(b, `,"text":`...)
			b = jsonscan.AppendString(b, *k.Text)
		}
		if s := k.Source; s != nil {
			b = append(b, `,"source":{"type":`...)
			b = jsonscan.AppendString(b, s.Type)
			if s.MediaType != "" {
				b = append(b, `,"media_type":`...)
				b = jsonscan.AppendString(b, s.MediaType)
			}
			if s.Data != "" {
				b = append(b, `,"data":`...)
				b = jsonscan.AppendString(b, s.Data)
			}
			if s.URL != "" {
				b = append(b, `,"url":`...)
				b = jsonscan.AppendString(b, s.URL)
			}
			b = append(b, '}')
		}
		if k.Title != "" {
			b = append(b, `,"title":`...)
			b = jsonscan.AppendString(b, k.Title)
		}
		if k.ID != "" {
			b = append(b, `,"id":`...)
			b = jsonscan.AppendString(b, k.ID)
		}
		if k.Name != "" {
			b = append(b, `,"name":`...)
			b = jsonscan.AppendString(b, k.Name)
		}
		if len(k.Input) > 0 {
			b = append(b, `,"input":`...)
			if b, err = appendRaw(b, k.Input); err != nil {
				return nil, err
			}
		}
		if k.ToolUseID != "" {
			b = append(b, `,"tool_use_id":`...)
			b = jsonscan.AppendString(b, k.ToolUseID)
		}
		if k.Content != nil {
			b = append(b, `,"content":`...)
			if b, err = appendANContent(b, k.Content); err != nil {
				return nil, err
			}
		}
		b = append(b, '}')
	}
	return append(b, ']'), nil
}

// appendReflect is reached with content of a type the writers above do
// not know, which only a change to this package can bring.
func appendReflect(_ []byte, v any) ([]byte, error) {
	return nil, fmt.Errorf("translate: no JSON writer for content of type %T", v)
}

func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonscan.AppendString(b, s)
	}
	return append(b, ']')
}

// appendFloat appends f as encoding/json writes a float64: the shortest
// decimal that reads back as f, in exponent form only below 1e-6 or from
// 1e21, with a one-digit negative exponent not padded ("1e-7").
func appendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, &json.UnsupportedValueError{Str: strconv.FormatFloat(f, 'g', -1, 64)}
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

// appendRaw appends raw, a JSON value, as encoding/json writes a
// json.RawMessage: "null" if nil, else without insignificant whitespace.
// raw must be valid JSON, as every raw value of a request is: one a
// decoder checked, or one this package wrote. (encoding/json checked it
// again; an empty one, which it refused, is still an error.)
func appendRaw(b []byte, raw json.RawMessage) ([]byte, error) {
	switch {
	case raw == nil:
		return append(b, "null"...), nil
	case len(raw) == 0:
		return nil, errors.New("translate: an empty raw JSON value to write")
	case !hasSpaceOutsideStrings(raw):
		return append(b, raw...), nil
	}
	return appendCompactSpace(b, raw), nil
}

// hasSpaceOutsideStrings reports whether raw has a whitespace byte that
// is not inside a string.
func hasSpaceOutsideStrings(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case ' ', '\t', '\n', '\r':
			return true
		case '"':
			i = skipString(raw, i) - 1
		}
	}
	return false
}

// appendCompact appends raw without insignificant whitespace, or fails if
// it is not valid JSON, as json.Compact does.
func appendCompact(b []byte, raw []byte) ([]byte, error) {
	if !json.Valid(raw) {
		return nil, errors.New("translate: a raw JSON value to write is not valid JSON")
	}
	return appendCompactSpace(b, raw), nil
}

// appendCompactSpace appends raw, valid JSON, without insignificant
// whitespace.
func appendCompactSpace(b []byte, raw []byte) []byte {
	start := 0
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case ' ', '\t', '\n', '\r':
			b = append(b, raw[start:i]...)
			start = i + 1
		case '"':
			i = skipString(raw, i) - 1
		}
	}
	return append(b, raw[start:]...)
}
