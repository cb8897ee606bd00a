package h2server

import (
	"encoding/binary"

	"golang.org/x/net/http2"
)

// Frames the server writes are appended by hand to a buffer that goes to
// the connection in one Write: x/net's Framer would copy each into a
// buffer of its own first.

const frameHeaderLen = 9

// appendFrameHeader appends the 9-byte header of a frame.
func appendFrameHeader(b []byte, length int, t http2.FrameType, flags http2.Flags, stream uint32) []byte {
	return append(b,
		byte(length>>16), byte(length>>8), byte(length),
		byte(t), byte(flags),
		byte(stream>>24)&0x7f, byte(stream>>16), byte(stream>>8), byte(stream))
}

func appendWindowUpdate(b []byte, stream uint32, incr uint32) []byte {
	b = appendFrameHeader(b, 4, http2.FrameWindowUpdate, 0, stream)
	return binary.BigEndian.AppendUint32(b, incr&0x7fffffff)
}

func appendRSTStream(b []byte, stream uint32, code http2.ErrCode) []byte {
	b = appendFrameHeader(b, 4, http2.FrameRSTStream, 0, stream)
	return binary.BigEndian.AppendUint32(b, uint32(code))
}

func appendSettingsAck(b []byte) []byte {
	return appendFrameHeader(b, 0, http2.FrameSettings, http2.FlagSettingsAck, 0)
}

func appendSettings(b []byte, s ...http2.Setting) []byte {
	b = appendFrameHeader(b, 6*len(s), http2.FrameSettings, 0, 0)
	for _, x := range s {
		b = binary.BigEndian.AppendUint16(b, uint16(x.ID))
		b = binary.BigEndian.AppendUint32(b, x.Val)
	}
	return b
}

func appendPingAck(b []byte, data [8]byte) []byte {
	b = appendFrameHeader(b, 8, http2.FramePing, http2.FlagPingAck, 0)
	return append(b, data[:]...)
}

func appendGoAway(b []byte, last uint32, code http2.ErrCode, debug string) []byte {
	b = appendFrameHeader(b, 8+len(debug), http2.FrameGoAway, 0, 0)
	b = binary.BigEndian.AppendUint32(b, last&0x7fffffff)
	b = binary.BigEndian.AppendUint32(b, uint32(code))
	return append(b, debug...)
}

// appendHeaderBlock appends block as a HEADERS frame and as many
// CONTINUATION frames as maxFrame requires.
func appendHeaderBlock(b []byte, stream uint32, block []byte, endStream bool, maxFrame int) []byte {
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
		b = appendFrameHeader(b, n, t, flags, stream)
		b = append(b, block[:n]...)
		block = block[n:]
		first = false
		if len(block) == 0 {
			return b
		}
	}
}

// appendData appends a DATA frame.
func appendData(b []byte, stream uint32, p []byte, endStream bool) []byte {
	var flags http2.Flags
	if endStream {
		flags = http2.FlagDataEndStream
	}
	b = appendFrameHeader(b, len(p), http2.FrameData, flags, stream)
	return append(b, p...)
}
