package llmsdk_test

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	"github.com/straitgw/strait/internal/llm/gateway"
	"github.com/straitgw/strait/internal/llm/translate"
)

const imageQuestion = "What colour is this picture?"

// pngBase64 returns a real PNG of side by side pixels, in base64: one
// colour, or noise (which does not compress) when noisy is set.
func pngBase64(t *testing.T, side int, noisy bool) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 11))
	img := image.NewRGBA(image.Rect(0, 0, side, side))
	for x := range side {
		for y := range side {
			c := color.RGBA{R: 200, G: 30, B: 40, A: 255}
			if noisy {
				c.R, c.G, c.B = uint8(rng.UintN(256)), uint8(rng.UintN(256)), uint8(rng.UintN(256))
			}
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

// TestImages sends an image from each SDK, the way each documents it (an
// image_url part holding a data: URI from the OpenAI SDK, a base64 image
// block from the Anthropic SDK), and checks that the provider got the same
// bytes and media type in its own dialect's form, in the order the client
// put text and image. The large image makes a body of over 1 MiB, sent
// over h2c on both hops, where it crosses HTTP/2 flow-control windows.
func TestImages(t *testing.T) {
	t.Parallel()
	sizes := []struct {
		name   string
		data   string
		cp, pp proto
	}{
		{"small", pngBase64(t, 2, false), h2c, h1},
		{"large", pngBase64(t, 560, true), h2c, h2c},
	}
	if n := len(sizes[1].data); n <= 1<<20 {
		t.Fatalf("the large image is %d bytes of base64, want over 1 MiB", n)
	}
	for _, pr := range pairs {
		for _, size := range sizes {
			t.Run(subtestName(pr, size.name), func(t *testing.T) {
				t.Parallel()
				testImage(t, pr, size.data, size.cp, size.pp)
			})
		}
	}
}

// testImage sends one image from the client dialect's SDK and checks what
// the provider got.
func testImage(t *testing.T, pr pair, data string, cp, pp proto) {
	t.Helper()
	want := []inlineImage{{mediaType: "image/png", data: data}}
	ctx := testContext(t)
	sp := startScripted(t)
	up := upstream(pr.provider, sp.url, pp)
	gw := startGateway(t, []gateway.Provider{up}, routeAll(up))
	hc, rec := newClient(t, cp)
	client := newSDK(gw, gatewayKey, hc)
	const reply = "It is red."
	sp.push(answer{text: reply, stop: "end_turn", usage: usage{input: 90, output: 4}})

	var wantKinds []string
	if pr.client == translate.OpenAI {
		params := openai.ChatCompletionNewParams{
			Model: "sdk-vision-model",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
				openai.TextContentPart(imageQuestion),
				openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "data:image/png;base64," + data}),
			})},
		}
		resp := openAITurn(t, ctx, client.openai, params, false)
		if got := resp.Choices[0].Message.Content; got != reply {
			t.Errorf("the SDK got %q, want %q", got, reply)
		}
		wantKinds = []string{"text", "image"}
	} else {
		params := anthropic.MessageNewParams{
			Model:     "sdk-vision-model",
			MaxTokens: 256,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(
				anthropic.NewImageBlockBase64("image/png", data),
				anthropic.NewTextBlock(imageQuestion),
			)},
		}
		msg := anthropicTurn(t, ctx, client.anthropic, params, false)
		if len(msg.Content) != 1 || msg.Content[0].Text != reply {
			t.Errorf("the SDK got %+v, want %q", msg.Content, reply)
		}
		wantKinds = []string{"image", "text"}
	}
	rec.check(t, cp)

	last := sp.last(t)
	if last.proto != pp.wire() {
		t.Errorf("the gateway spoke %s to the provider, want %s", last.proto, pp.wire())
	}
	r := parseReceived(t, pr.provider, last.body)
	if len(r.messages) != 1 || r.messages[0].role != "user" {
		t.Fatalf("the provider got %+v, want one user message: %s", r.messages, last.describe())
	}
	m := r.messages[0]
	if !slices.Equal(m.images, want) {
		t.Errorf("the provider got images %.120v, want the client's PNG (%d base64 bytes) as image/png", m.images, len(data))
	}
	if m.text != imageQuestion || !slices.Equal(m.kinds, wantKinds) {
		t.Errorf("the provider got parts %v with text %q, want %v with %q", m.kinds, m.text, wantKinds, imageQuestion)
	}
}
