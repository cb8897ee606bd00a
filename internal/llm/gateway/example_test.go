package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/straitgw/strait/internal/llm/gateway"
	"github.com/straitgw/strait/internal/llm/translate"
)

// Start a gateway in process, in front of a provider, and call it as a
// client (or an SDK pointed at its address) would.
func Example() {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hi!"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`)
	}))
	defer provider.Close()

	g, err := gateway.New(gateway.Options{
		Providers: []gateway.Provider{{Name: "openai", Dialect: translate.OpenAI, BaseURL: provider.URL, APIKey: "sk-provider"}},
		Routes:    []gateway.Route{{Match: "gpt-*", Provider: "openai"}},
		Keys:      []gateway.Key{{Name: "example", SHA256: gateway.HashKey("gateway-key")}},
	})
	if err != nil {
		panic(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go g.Serve(ln, gateway.Listener{}) // HTTP/1.1 and h2c
	defer g.Shutdown(context.Background())

	req, _ := http.NewRequest("POST", "http://"+ln.Addr().String()+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o","messages":[{"role":"user","content":"Hello"}]}`))
	req.Header.Set("Authorization", "Bearer gateway-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, strings.Contains(string(body), `"content":"Hi!"`), resp.Header.Get(gateway.OverheadHeader) != "")
	// Output: 200 true true
}
