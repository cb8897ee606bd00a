package gateway

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"testing"
)

// TestUpstreamRequestMatchesNewRequest: the request built from a URL
// parsed once is the one http.NewRequestWithContext builds, field by
// field, with the same body both times it is read.
func TestUpstreamRequestMatchesNewRequest(t *testing.T) {
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "v")
	h := http.Header{"Content-Type": {"application/json"}}
	for _, raw := range []string{"http://127.0.0.1:28100/v1/chat/completions", "https://api.example.com:/v1/messages", "http://[::1]:8080/base/v1/messages/count_tokens?x=1"} {
		for _, body := range []string{`{"model":"m"}`, ""} {
			u, err := url.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			got := newUpstreamRequest(ctx, u, h, []byte(body))
			want, err := http.NewRequestWithContext(ctx, http.MethodPost, raw, io.NopCloser(stringsReader(body)))
			if err != nil {
				t.Fatal(err)
			}
			want.ContentLength = int64(len(body))
			if body == "" {
				want.Body = http.NoBody
			}
			want.Header = h
			if got.URL == u {
				t.Error("the request shares the provider's URL; a transport could change it")
			}
			if got.Method != want.Method || got.URL.String() != want.URL.String() || got.Host != want.Host ||
				got.Proto != want.Proto || got.ProtoMajor != want.ProtoMajor || got.ProtoMinor != want.ProtoMinor ||
				got.ContentLength != want.ContentLength || !reflect.DeepEqual(got.Header, want.Header) ||
				got.Context().Value(key{}) != "v" {
				t.Errorf("%s: got %+v, want %+v", raw, got, want)
			}
			if (body == "") != (got.Body == http.NoBody) {
				t.Errorf("%s %q: body %T", raw, body, got.Body)
			}
			for i := range 2 {
				rc := got.Body
				if i == 1 {
					if rc, err = got.GetBody(); err != nil {
						t.Fatal(err)
					}
				}
				b, err := io.ReadAll(rc)
				if err != nil || string(b) != body {
					t.Errorf("%s: read %d: %q, %v; want %q", raw, i, b, err, body)
				}
			}
		}
	}
}

type stringReader struct{ s string }

func stringsReader(s string) io.Reader { return &stringReader{s} }

func (r *stringReader) Read(p []byte) (int, error) {
	if r.s == "" {
		return 0, io.EOF
	}
	n := copy(p, r.s)
	r.s = r.s[n:]
	return n, nil
}
