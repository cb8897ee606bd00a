package vault

import (
	"crypto/cipher"
	"crypto/subtle"
	"encoding/binary"
)

// AES Key Wrap (RFC 3394, the index-based form of section 2.2). It turns an n-block key (n >= 2 blocks of 8
// bytes) into n+1 blocks: no nonce, because the data wrapped is itself a random key, and a 64-bit integrity
// check in the first block. That is 8 bytes of overhead against GCM's 28, and the wrapped DEK travels in every
// record.

// kwIV is the default initial value of RFC 3394 section 2.2.3.1.
var kwIV = [8]byte{0xA6, 0xA6, 0xA6, 0xA6, 0xA6, 0xA6, 0xA6, 0xA6}

// kwWrap appends the wrapping of plain (a multiple of 8 bytes, at least 16) under block to dst.
func kwWrap(dst []byte, block cipher.Block, plain []byte) []byte {
	n := len(plain) / 8
	start := len(dst)
	dst = append(dst, kwIV[:]...)
	dst = append(dst, plain...)
	out := dst[start:] // out[0:8] is A, out[8i:8i+8] is R[i]
	var b [16]byte
	for j := range 6 {
		for i := 1; i <= n; i++ {
			copy(b[:8], out[:8])
			copy(b[8:], out[8*i:8*i+8])
			block.Encrypt(b[:], b[:])
			t := uint64(n*j + i)
			binary.BigEndian.PutUint64(out[:8], binary.BigEndian.Uint64(b[:8])^t)
			copy(out[8*i:], b[8:])
		}
	}
	return dst
}

// kwUnwrap appends the key wrapped in wrapped (a multiple of 8 bytes, at least 24) under block to dst, and
// reports whether the integrity check passed. On failure dst is returned unchanged.
func kwUnwrap(dst []byte, block cipher.Block, wrapped []byte) ([]byte, bool) {
	n := len(wrapped)/8 - 1
	var a, b [16]byte
	copy(a[:8], wrapped[:8])
	start := len(dst)
	dst = append(dst, wrapped[8:]...)
	r := dst[start:] // r[8(i-1):8i] is R[i]
	for j := 5; j >= 0; j-- {
		for i := n; i >= 1; i-- {
			t := uint64(n*j + i)
			binary.BigEndian.PutUint64(b[:8], binary.BigEndian.Uint64(a[:8])^t)
			copy(b[8:], r[8*(i-1):8*i])
			block.Decrypt(b[:], b[:])
			copy(a[:8], b[:8])
			copy(r[8*(i-1):], b[8:])
		}
	}
	if subtle.ConstantTimeCompare(a[:8], kwIV[:]) != 1 {
		clear(r)
		return dst[:start], false
	}
	return dst, true
}
