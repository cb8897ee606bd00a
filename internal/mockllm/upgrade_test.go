package mockllm_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2/hpack"

	"github.com/straitgw/strait/internal/mockllm"
)

// h2Frame is one HTTP/2 frame (RFC 9113 section 4.1).
type h2Frame struct {
	typ, flags byte
	stream     uint32
	payload    []byte
}

const (
	frameData     = 0x0
	frameHeaders  = 0x1
	frameSettings = 0x4
	frameGoAway   = 0x7
	flagEndStream = 0x1
	flagAck       = 0x1
	flagEndHeader = 0x4
)

func readFrame(r io.Reader) (h2Frame, error) {
	var h [9]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return h2Frame{}, err
	}
	f := h2Frame{typ: h[3], flags: h[4], stream: binary.BigEndian.Uint32(h[5:]) & 0x7fffffff}
	f.payload = make([]byte, int(h[0])<<16|int(h[1])<<8|int(h[2]))
	_, err := io.ReadFull(r, f.payload)
	return f, err
}

func writeFrame(w io.Writer, typ, flags byte, stream uint32, payload []byte) error {
	n := len(payload)
	h := []byte{byte(n >> 16), byte(n >> 8), byte(n), typ, flags, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(h[5:], stream)
	_, err := w.Write(append(h, payload...))
	return err
}

// h2Response collects the frames of one stream until END_STREAM,
// answering the server's SETTINGS on the way.
func h2Response(t *testing.T, conn net.Conn, r io.Reader, dec *hpack.Decoder, stream uint32) (status string, body []byte) {
	t.Helper()
	for range 1000 {
		f, err := readFrame(r)
		if err != nil {
			t.Fatalf("reading frames of stream %d: %v", stream, err)
		}
		switch {
		case f.typ == frameSettings && f.flags&flagAck == 0:
			if err := writeFrame(conn, frameSettings, flagAck, 0, nil); err != nil {
				t.Fatal(err)
			}
		case f.typ == frameGoAway:
			t.Fatalf("server sent GOAWAY: %x", f.payload)
		case f.stream != stream:
		case f.typ == frameHeaders:
			if f.flags&flagEndHeader == 0 {
				t.Fatal("HEADERS without END_HEADERS")
			}
			fields, err := dec.DecodeFull(f.payload)
			if err != nil {
				t.Fatalf("decoding the response headers: %v", err)
			}
			for _, hf := range fields {
				if hf.Name == ":status" {
					status = hf.Value
				}
			}
		case f.typ == frameData:
			body = append(body, f.payload...)
		}
		if f.stream == stream && f.flags&flagEndStream != 0 && (f.typ == frameData || f.typ == frameHeaders) {
			return status, body
		}
	}
	t.Fatal("no end of stream in 1000 frames")
	return "", nil
}

// An HTTP/1.1 request with "Upgrade: h2c" is answered over HTTP/2 as
// stream 1, and the connection then carries more HTTP/2 requests.
func TestH2CUpgrade(t *testing.T) {
	s, url := start(t, mockllm.Options{})
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(url, "http://"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))

	body := oaText
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"+
		"HTTP2-Settings: \r\nContent-Type: application/json\r\nAuthorization: Bearer upgraded\r\nContent-Length: %d\r\n\r\n%s",
		strings.TrimPrefix(url, "http://"), len(body), body)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Upgrade") != "h2c" {
		t.Fatalf("upgrade answered %s %v", resp.Status, resp.Header)
	}

	if _, err := io.WriteString(conn, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if err := writeFrame(conn, frameSettings, 0, 0, nil); err != nil {
		t.Fatal(err)
	}
	dec := hpack.NewDecoder(4096, nil)
	status, got := h2Response(t, conn, br, dec, 1)
	var m map[string]any
	if status != "200" || json.Unmarshal(got, &m) != nil || path(m, "choices", 0, "message", "content") != s.Text() {
		t.Fatalf("stream 1: status %q body %s", status, got)
	}
	last, _ := s.LastRequest()
	if last.Proto != "HTTP/2.0" || last.Header.Get("Authorization") != "Bearer upgraded" || string(last.Body) != body || last.Header.Get("X-Strait-Mock-Upgrade") != "" {
		t.Errorf("the upgraded request as served: %+v", last)
	}

	// Stream 3, with header compression that indexes: the server's table
	// must agree with ours.
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "127.0.0.1"}, {":path", "/v1/models"}, {"anthropic-version", "2023-06-01"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := writeFrame(conn, frameHeaders, flagEndHeader|flagEndStream, 3, hb.Bytes()); err != nil {
		t.Fatal(err)
	}
	status, got = h2Response(t, conn, br, dec, 3)
	if status != "200" || !bytes.Contains(got, []byte(`"has_more":false`)) {
		t.Fatalf("stream 3: status %q body %s", status, got)
	}
	if s.Requests() != 2 {
		t.Errorf("%d requests counted, want 2", s.Requests())
	}
}

// An upgrade the server cannot make, here for headers too big for one
// HTTP/2 frame, is answered over HTTP/1.1.
func TestH2CUpgradeFallsBack(t *testing.T) {
	_, url := start(t, mockllm.Options{})
	req, err := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(oaText))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Connection", "Upgrade, HTTP2-Settings")
	req.Header.Set("Upgrade", "h2c")
	req.Header.Set("HTTP2-Settings", "")
	req.Header.Set("X-Big", strings.Repeat("b", 40000))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	m := decode(t, resp, 200)
	if resp.Proto != "HTTP/1.1" || m["object"] != "chat.completion" {
		t.Errorf("%s %v", resp.Proto, m)
	}
}
