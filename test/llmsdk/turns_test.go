package llmsdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
)

// maxEvents bounds the events a test reads from one stream.
const maxEvents = 10000

// openAITurn sends params with the OpenAI SDK and returns the completion:
// the JSON answer or, when stream is set, the stream as the SDK's own
// accumulator puts it together (with the usage chunk asked for).
func openAITurn(t *testing.T, ctx context.Context, c openai.Client, params openai.ChatCompletionNewParams, stream bool) openai.ChatCompletion {
	t.Helper()
	if !stream {
		resp, err := c.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatalf("OpenAI SDK, JSON: %s", describeErr(err))
		}
		return *resp
	}
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	s := c.Chat.Completions.NewStreaming(ctx, params)
	defer s.Close()
	var acc openai.ChatCompletionAccumulator
	n := 0
	for ; n < maxEvents && s.Next(); n++ {
		if !acc.AddChunk(s.Current()) {
			t.Fatalf("the OpenAI SDK's accumulator rejected chunk %d: %s", n, s.Current().RawJSON())
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("OpenAI SDK, stream after %d chunks: %s", n, describeErr(err))
	}
	if n == maxEvents {
		t.Fatalf("the stream did not end within %d chunks", maxEvents)
	}
	if len(acc.Choices) == 0 {
		t.Fatalf("the OpenAI SDK accumulated no choice from %d chunks", n)
	}
	return acc.ChatCompletion
}

// anthropicTurn sends params with the Anthropic SDK and returns the
// message: the JSON answer or, when stream is set, the stream as the SDK's
// Message.Accumulate puts it together.
func anthropicTurn(t *testing.T, ctx context.Context, c anthropic.Client, params anthropic.MessageNewParams, stream bool) anthropic.Message {
	t.Helper()
	if !stream {
		msg, err := c.Messages.New(ctx, params)
		if err != nil {
			t.Fatalf("Anthropic SDK, JSON: %s", describeErr(err))
		}
		return *msg
	}
	s := c.Messages.NewStreaming(ctx, params)
	defer s.Close()
	var acc anthropic.Message
	n := 0
	for ; n < maxEvents && s.Next(); n++ {
		ev := s.Current()
		if err := acc.Accumulate(ev); err != nil {
			t.Fatalf("the Anthropic SDK cannot accumulate event %d (%s): %v", n, ev.Type, err)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("Anthropic SDK, stream after %d events: %s", n, describeErr(err))
	}
	if n == maxEvents {
		t.Fatalf("the stream did not end within %d events", maxEvents)
	}
	return acc
}

// describeErr adds to an SDK error what its Error method leaves out: the
// OpenAI SDK's error text has the status only.
func describeErr(err error) string {
	if oerr, ok := errors.AsType[*openai.Error](err); ok {
		return oerr.Error() + " " + oerr.RawJSON()
	}
	return err.Error()
}

func mode(stream bool) string {
	if stream {
		return "stream"
	}
	return "json"
}

// The tools the tests offer, with the same schemas in both dialects.
const (
	weatherSchema = `{"type":"object","properties":{"location":{"type":"string","minLength":3},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location","unit"]}`
	timeSchema    = `{"type":"object","properties":{"timezone":{"type":"string"}},"required":["timezone"]}`
)

func openAITool(t *testing.T, name, schema string) openai.ChatCompletionToolUnionParam {
	t.Helper()
	var params shared.FunctionParameters
	if err := json.Unmarshal([]byte(schema), &params); err != nil {
		t.Fatal(err)
	}
	return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: name, Parameters: params})
}

func anthropicTool(t *testing.T, name, schema string) anthropic.ToolUnionParam {
	t.Helper()
	var s struct {
		Properties map[string]any `json:"properties"`
		Required   []string       `json:"required"`
	}
	if err := json.Unmarshal([]byte(schema), &s); err != nil {
		t.Fatal(err)
	}
	return anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{Properties: s.Properties, Required: s.Required}, name)
}
