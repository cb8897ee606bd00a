package h2frames

import (
	"bytes"
	"testing"

	"golang.org/x/net/http2"
)

// Every frame written here reads back, through x/net's Framer, as the frame
// meant.
func TestFramesReadBackWithXNetsFramer(t *testing.T) {
	var b []byte
	b = AppendSettings(b, http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 100}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	b = AppendSettingsAck(b)
	b = AppendWindowUpdate(b, 3, 12345)
	b = AppendPingAck(b, [8]byte{1, 2, 3, 4, 5, 6, 7, 8})
	block := bytes.Repeat([]byte{0x82}, 40) // 40 indexed ":method: GET" fields
	b = AppendHeaderBlock(b, 5, block, true, 16)
	b = AppendData(b, 5, []byte("body"), true)
	b = AppendRSTStream(b, 7, http2.ErrCodeCancel)
	b = AppendGoAway(b, 7, http2.ErrCodeEnhanceYourCalm, "calm")
	// A frame whose length is set after its payload.
	at := len(b)
	b = AppendHeader(b, 0, http2.FrameData, 0, 9)
	b = append(b, "later"...)
	PutLength(b, at, len(b)-at-HeaderLen)

	fr := http2.NewFramer(nil, bytes.NewReader(b))
	fr.ReadMetaHeaders = nil
	next := func() http2.Frame {
		t.Helper()
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	if f, ok := next().(*http2.SettingsFrame); !ok || f.IsAck() || f.NumSettings() != 2 || f.Setting(1).Val != 1<<20 {
		t.Errorf("SETTINGS: %v", f)
	}
	if f, ok := next().(*http2.SettingsFrame); !ok || !f.IsAck() {
		t.Errorf("SETTINGS ACK: %v", f)
	}
	if f, ok := next().(*http2.WindowUpdateFrame); !ok || f.StreamID != 3 || f.Increment != 12345 {
		t.Errorf("WINDOW_UPDATE: %v", f)
	}
	if f, ok := next().(*http2.PingFrame); !ok || !f.IsAck() || f.Data != [8]byte{1, 2, 3, 4, 5, 6, 7, 8} {
		t.Errorf("PING ACK: %v", f)
	}
	h, ok := next().(*http2.HeadersFrame)
	if !ok || h.StreamID != 5 || !h.StreamEnded() || h.HeadersEnded() {
		t.Fatalf("HEADERS: %v, want stream 5, END_STREAM, continued", h)
	}
	got := append([]byte(nil), h.HeaderBlockFragment()...)
	for {
		c, ok := next().(*http2.ContinuationFrame)
		if !ok {
			t.Fatalf("want CONTINUATION frames until END_HEADERS, got %T", c)
		}
		got = append(got, c.HeaderBlockFragment()...)
		if c.HeadersEnded() {
			break
		}
	}
	if !bytes.Equal(got, block) {
		t.Errorf("header block read back %x, want %x", got, block)
	}
	if f, ok := next().(*http2.DataFrame); !ok || f.StreamID != 5 || !f.StreamEnded() || string(f.Data()) != "body" {
		t.Errorf("DATA: %v", f)
	}
	if f, ok := next().(*http2.RSTStreamFrame); !ok || f.StreamID != 7 || f.ErrCode != http2.ErrCodeCancel {
		t.Errorf("RST_STREAM: %v", f)
	}
	if f, ok := next().(*http2.GoAwayFrame); !ok || f.LastStreamID != 7 || f.ErrCode != http2.ErrCodeEnhanceYourCalm || string(f.DebugData()) != "calm" {
		t.Errorf("GOAWAY: %v", f)
	}
	if f, ok := next().(*http2.DataFrame); !ok || f.StreamID != 9 || string(f.Data()) != "later" {
		t.Errorf("DATA with its length put after: %v", f)
	}
}
