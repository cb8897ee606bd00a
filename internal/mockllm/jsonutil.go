package mockllm

import "unicode/utf8"

// Answers are built by appending to byte slices rather than by encoding
// structs: the static parts are constants or rendered once at New, and a
// request only appends its numbers, IDs and model name.

const hexDigits = "0123456789abcdef"

// plainJSON reports whether s can go between JSON quotes as it is.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// stringLen returns the length in bytes of the UTF-8 text that the JSON
// string literal lit (quotes included, already validated by the decoder)
// decodes to, without decoding it.
func stringLen(lit []byte) int {
	if len(lit) < 2 {
		return 0
	}
	lit = lit[1 : len(lit)-1]
	n := 0
	for i := 0; i < len(lit); i++ {
		if lit[i] != '\\' {
			n++
			continue
		}
		i++
		if i >= len(lit) {
			break
		}
		if lit[i] != 'u' {
			n++ // \" \\ \/ \b \f \n \r \t
			continue
		}
		r := hex4(lit[i+1:])
		i += 4
		if r >= 0xd800 && r < 0xdc00 && i+6 < len(lit) && lit[i+1] == '\\' && lit[i+2] == 'u' {
			if lo := hex4(lit[i+3:]); lo >= 0xdc00 && lo < 0xe000 {
				n += 4 // a surrogate pair is one 4-byte rune
				i += 6
				continue
			}
		}
		if r >= 0xd800 && r < 0xe000 {
			n += 3 // a lone surrogate decodes to U+FFFD
			continue
		}
		n += utf8.RuneLen(rune(r))
	}
	return n
}

// hex4 decodes the four hex digits at the start of b (validated JSON).
func hex4(b []byte) int {
	v := 0
	for i := 0; i < 4 && i < len(b); i++ {
		c := b[i]
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		}
		v = v<<4 | int(c)
	}
	return v
}

// appendHex appends v as exactly width lowercase hex digits.
func appendHex(b []byte, v uint64, width int) []byte {
	for i := width - 1; i >= 0; i-- {
		b = append(b, hexDigits[(v>>(4*uint(i)))&0xf])
	}
	return b
}
