package encryption

// varintLen is the size of v as a zigzag varint.
func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	return uvarintLen(u)
}

func uvarintLen(u uint64) int {
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// bytesFieldLen is the size of a varint-length-prefixed field of n bytes.
func bytesFieldLen(n int) int { return varintLen(int64(n)) + n }
