// Package h2frames appends HTTP/2 frames (RFC 9113 section 6) to a byte
// slice, for the connections that write their frames by hand: the gateway's
// HTTP/2 client (llm/h2client) and server (llm/h2server) batch many
// streams' frames into one buffer that goes to the socket in one write,
// where x/net's Framer would copy each frame into a buffer of its own
// first. Reading frames stays with x/net's Framer.
package h2frames

import (
	"encoding/binary"

	"golang.org/x/net/http2"
)

// HeaderLen is the length of a frame header.
const HeaderLen = 9

// AppendHeader appends the 9-byte header of a frame.
func AppendHeader(b []byte, length int, t http2.FrameType, flags http2.Flags, stream uint32) []byte {
	return append(b,
		byte(length>>16), byte(length>>8), byte(length),
		byte(t), byte(flags),
		byte(stream>>24)&0x7f, byte(stream>>16), byte(stream>>8), byte(stream))
}

// PutLength rewrites the length of the frame whose header starts at
// b[at:], once its payload has been appended.
func PutLength(b []byte, at, length int) {
	b[at], b[at+1], b[at+2] = byte(length>>16), byte(length>>8), byte(length)
}

// AppendWindowUpdate appends a WINDOW_UPDATE frame.
func AppendWindowUpdate(b []byte, stream uint32, incr uint32) []byte {
	b = AppendHeader(b, 4, http2.FrameWindowUpdate, 0, stream)
	return binary.BigEndian.AppendUint32(b, incr&0x7fffffff)
}

// AppendRSTStream appends an RST_STREAM frame.
func AppendRSTStream(b []byte, stream uint32, code http2.ErrCode) []byte {
	b = AppendHeader(b, 4, http2.FrameRSTStream, 0, stream)
	return binary.BigEndian.AppendUint32(b, uint32(code))
}

// AppendSettingsAck appends a SETTINGS frame acknowledging the peer's.
func AppendSettingsAck(b []byte) []byte {
	return AppendHeader(b, 0, http2.FrameSettings, http2.FlagSettingsAck, 0)
}

// AppendSettings appends a SETTINGS frame.
func AppendSettings(b []byte, s ...http2.Setting) []byte {
	b = AppendHeader(b, 6*len(s), http2.FrameSettings, 0, 0)
	for _, x := range s {
		b = binary.BigEndian.AppendUint16(b, uint16(x.ID))
		b = binary.BigEndian.AppendUint32(b, x.Val)
	}
	return b
}

// AppendPingAck appends the answer to a PING.
func AppendPingAck(b []byte, data [8]byte) []byte {
	b = AppendHeader(b, 8, http2.FramePing, http2.FlagPingAck, 0)
	return append(b, data[:]...)
}

// AppendGoAway appends a GOAWAY frame.
func AppendGoAway(b []byte, last uint32, code http2.ErrCode, debug string) []byte {
	b = AppendHeader(b, 8+len(debug), http2.FrameGoAway, 0, 0)
	b = binary.BigEndian.AppendUint32(b, last&0x7fffffff)
	b = binary.BigEndian.AppendUint32(b, uint32(code))
	return append(b, debug...)
}

// AppendHeaderBlock appends block as a HEADERS frame and as many
// CONTINUATION frames as maxFrame requires.
func AppendHeaderBlock(b []byte, stream uint32, block []byte, endStream bool, maxFrame int) []byte {
	first := true
	for {
		n := min(len(block), maxFrame)
		var flags http2.Flags
		if n == len(block) {
			flags |= http2.FlagHeadersEndHeaders // the same bit as CONTINUATION's
		}
		t := http2.FrameContinuation
		if first {
			t = http2.FrameHeaders
			if endStream {
				flags |= http2.FlagHeadersEndStream
			}
		}
		b = AppendHeader(b, n, t, flags, stream)
		b = append(b, block[:n]...)
		block = block[n:]
		first = false
		if len(block) == 0 {
			return b
		}
	}
}

// AppendData appends a DATA frame.
func AppendData(b []byte, stream uint32, p []byte, endStream bool) []byte {
	var flags http2.Flags
	if endStream {
		flags = http2.FlagDataEndStream
	}
	b = AppendHeader(b, len(p), http2.FrameData, flags, stream)
	return append(b, p...)
}
