package h2frames

import (
	"bytes"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// The fuzz input is a sequence of header blocks, each after its length:
// one byte, or 0xff and then two bytes big-endian. A length past the end
// of the input is cut to what is left.

// joinFuzzBlocks writes blocks as a fuzz input.
func joinFuzzBlocks(blocks ...[]byte) []byte {
	var in []byte
	for _, b := range blocks {
		if len(b) < 0xff {
			in = append(in, byte(len(b)))
		} else {
			in = append(in, 0xff, byte(len(b)>>8), byte(len(b)))
		}
		in = append(in, b...)
	}
	return in
}

// splitFuzzBlocks reads the blocks of a fuzz input.
func splitFuzzBlocks(in []byte) [][]byte {
	var blocks [][]byte
	for len(in) > 0 {
		n := int(in[0])
		in = in[1:]
		if n == 0xff {
			if len(in) < 2 {
				break
			}
			n = int(in[0])<<8 | int(in[1])
			in = in[2:]
		}
		n = min(n, len(in))
		blocks = append(blocks, in[:n:n])
		in = in[n:]
	}
	return blocks
}

// fuzzVarint reads an integer with an n-bit prefix, as x/net's decoder
// reads it; it is the test's own, to find where a block's
// representations begin.
func fuzzVarint(n uint, p []byte) (uint64, []byte, bool) {
	if len(p) == 0 {
		return 0, nil, false
	}
	mask := uint64(1)<<n - 1
	i := uint64(p[0]) & mask
	if i < mask {
		return i, p[1:], true
	}
	p = p[1:]
	for m := uint(0); len(p) > 0 && m < 63; m += 7 {
		b := p[0]
		p = p[1:]
		i += uint64(b&0x7f) << m
		if b&0x80 == 0 {
			return i, p, true
		}
	}
	return 0, nil, false
}

// fuzzSkipString skips a string literal.
func fuzzSkipString(p []byte) ([]byte, bool) {
	n, p, ok := fuzzVarint(7, p)
	if !ok || n > uint64(len(p)) {
		return nil, false
	}
	return p[n:], true
}

// representation is where one representation of a block begins, and
// whether it is a dynamic table size update.
type representation struct {
	off    int
	update bool
	size   uint64 // the update's size
}

// representations splits a block into its representations, reading
// lengths only (no index is looked up, no string decoded).
func representations(p []byte) ([]representation, bool) {
	var reps []representation
	for off := 0; off < len(p); {
		q := p[off:]
		b := q[0]
		r := representation{off: off}
		var ok bool
		switch {
		case b&0x80 != 0:
			_, q, ok = fuzzVarint(7, q)
		case b&0xe0 == 0x20:
			r.update = true
			r.size, q, ok = fuzzVarint(5, q)
		default:
			n := uint(4)
			if b&0xc0 == 0x40 {
				n = 6
			}
			var i uint64
			i, q, ok = fuzzVarint(n, q)
			if ok && i == 0 {
				q, ok = fuzzSkipString(q)
			}
			if ok {
				q, ok = fuzzSkipString(q)
			}
		}
		if !ok {
			return nil, false
		}
		reps = append(reps, r)
		off = len(p) - len(q)
	}
	return reps, true
}

// refStep is a block as x/net's decoder was given it: after a call of
// SetMaxDynamicTableSize(preMax) if preMax >= 0.
type refStep struct {
	preMax int64
	block  []byte
}

func newRefDecoder(t *testing.T, history []refStep) *hpack.Decoder {
	ref := hpack.NewDecoder(4096, nil)
	ref.SetMaxStringLength(1 << 20)
	for _, s := range history {
		if s.preMax >= 0 {
			ref.SetMaxDynamicTableSize(uint32(s.preMax))
		}
		if _, err := ref.DecodeFull(s.block); err != nil {
			t.Fatalf("replaying %x on x/net's decoder: %v", s.block, err)
		}
	}
	return ref
}

func newOurDecoder(t *testing.T, history [][]byte) *HeaderDecoder {
	d := NewHeaderDecoder(4096, 1<<20)
	for _, b := range history {
		if err := d.Decode(b, func(hpack.HeaderField) {}); err != nil {
			t.Fatalf("replaying %x on our decoder: %v", b, err)
		}
	}
	return d
}

// lateUpdateOnEmptyTable reports whether the divergence of block, which
// x/net's decoder accepts and ours rejects, is the one documented: a
// size update after a field, while x/net's table is empty. x/net's
// decoder tolerates it; RFC 7541 section 4.2 puts updates at the start
// of a block only. history replays the blocks before on both decoders.
func lateUpdateOnEmptyTable(t *testing.T, refHist []refStep, ourHist [][]byte, block []byte) bool {
	reps, ok := representations(block)
	if !ok {
		return false
	}
	k := -1
	field := false
	for i, r := range reps {
		if !r.update {
			field = true
		} else if field {
			k = i
			break
		}
	}
	if k < 0 {
		return false
	}
	prefix := block[:reps[k].off]
	// Ours decodes everything before the update, as x/net's does.
	var got []hpack.HeaderField
	if err := newOurDecoder(t, ourHist).Decode(prefix, func(f hpack.HeaderField) { got = append(got, f) }); err != nil {
		return false
	}
	ref := newRefDecoder(t, refHist)
	var want []hpack.HeaderField
	ref.SetEmitFunc(func(f hpack.HeaderField) { want = append(want, f) })
	if _, err := ref.Write(prefix); err != nil || !slices.Equal(got, want) {
		return false
	}
	// x/net's table is empty: its index 62 does not resolve.
	_, err := ref.Write([]byte{0x80 | 62})
	return err != nil
}

// leadingUpdates is the run of size updates a block begins with when
// there are two or more, as RFC 7541 section 4.2 allows ("the smallest
// maximum table size that occurs in that interval MUST be signaled",
// then the final one). x/net's decoder rejects the second of them if its
// table is not empty after the first. It returns the smallest size, and
// the block with the run replaced by its last update, which x/net's
// decoder takes after SetMaxDynamicTableSize(smallest): the same table,
// without the rejection.
func leadingUpdates(block []byte) (smallest uint64, rewritten []byte, ok bool) {
	reps, ok := representations(block)
	if !ok {
		return 0, nil, false
	}
	n := 0
	for n < len(reps) && reps[n].update {
		n++
	}
	if n < 2 {
		return 0, nil, false
	}
	smallest = reps[0].size
	for _, r := range reps[:n] {
		smallest = min(smallest, r.size)
	}
	return smallest, block[reps[n-1].off:], true
}

// FuzzHeaderDecoder decodes a sequence of blocks on one HeaderDecoder
// and on one of x/net's decoders, and checks that they agree.
func FuzzHeaderDecoder(f *testing.F) {
	for _, in := range fuzzSeeds(f) {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		blocks := splitFuzzBlocks(in)
		ours := NewHeaderDecoder(4096, 1<<20)
		ref := newRefDecoder(t, nil)
		var refHist []refStep
		var ourHist [][]byte
		for i, block := range blocks {
			// Our decoder's strings must not alias the block.
			buf := bytes.Clone(block)
			var got []hpack.HeaderField
			err := ours.Decode(buf, func(f hpack.HeaderField) { got = append(got, f) })
			for j := range buf {
				buf[j] ^= 0xff
			}
			want, refErr := ref.DecodeFull(block)
			step := refStep{-1, block}

			if err != nil && !errors.Is(err, ErrHeaderBlock) && !errors.Is(err, ErrHeaderString) {
				t.Fatalf("block %d %x: error %v is neither ErrHeaderBlock nor ErrHeaderString", i, block, err)
			}
			switch {
			case err != nil && refErr != nil:
				return // the connection ends
			case err != nil:
				if errors.Is(err, ErrHeaderBlock) && lateUpdateOnEmptyTable(t, refHist, ourHist, block) {
					return // documented divergence; our connection ends
				}
				t.Fatalf("block %d %x (after %x): ours fails (%v), x/net's decodes %q", i, block, ourHist, err, want)
			case refErr != nil:
				smallest, rewritten, ok := leadingUpdates(block)
				if !ok {
					t.Fatalf("block %d %x (after %x): x/net's fails (%v), ours decodes %q", i, block, ourHist, refErr, got)
				}
				// x/net's decoder rejects two leading updates; decode the
				// block as their effect on a decoder that takes it.
				step = refStep{int64(smallest), rewritten}
				ref = newRefDecoder(t, refHist)
				ref.SetMaxDynamicTableSize(uint32(smallest))
				if want, refErr = ref.DecodeFull(rewritten); refErr != nil {
					t.Fatalf("block %d %x (after %x): x/net's fails (%v) with its leading updates as one, ours decodes %q",
						i, block, ourHist, refErr, got)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("block %d %x (after %x):\nours  %+v\nx/net %+v", i, block, ourHist, got, want)
			}
			refHist = append(refHist, step)
			ourHist = append(ourHist, block)
		}
	})
}

// fuzzSeeds are the seed inputs: valid sequences from x/net's encoder
// and by hand, the RFC's examples, size updates, and broken blocks.
func fuzzSeeds(tb testing.TB) [][]byte {
	var seeds [][]byte
	add := func(blocks ...[]byte) { seeds = append(seeds, joinFuzzBlocks(blocks...)) }
	h := func(s string) []byte {
		b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}

	// x/net's encoder: indexing, Huffman where shorter, sensitive
	// fields never indexed, size updates (one, and the smallest and the
	// final one when the size changed twice between blocks).
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	encode := func(fields ...hpack.HeaderField) []byte {
		buf.Reset()
		for _, f := range fields {
			if err := enc.WriteField(f); err != nil {
				tb.Fatal(err)
			}
		}
		return bytes.Clone(buf.Bytes())
	}
	request := []hpack.HeaderField{
		hf(":method", "POST"), hf(":scheme", "https"), hf(":authority", "api.anthropic.com"),
		hf(":path", "/v1/messages"), hf("content-type", "application/json"),
		hf("anthropic-version", "2023-06-01"), {Name: "x-api-key", Value: "sk-ant-secret", Sensitive: true},
		hf("user-agent", "Anthropic/Go 2.15.0"), hf("accept", "*/*"),
	}
	r1 := encode(request...)
	r2 := encode(request...)
	r3 := encode(append(request[:len(request):len(request)], hf("x-stainless-retry-count", "1"))...)
	add(r1, r2, r3)
	// strings Huffman does not shorten are raw
	rawish := []hpack.HeaderField{hf("x-bin", "{|}~^`\\"), hf("x-tilde", "~~~~~~~~"), {Name: "x-raw", Value: "\x00\x01\xfe\xff", Sensitive: true}}
	add(encode(rawish...), encode(rawish...))
	enc.SetMaxDynamicTableSize(256)
	s1 := encode(request...)
	enc.SetMaxDynamicTableSize(64)
	enc.SetMaxDynamicTableSize(4096)
	s2 := encode(request...)
	enc.SetMaxDynamicTableSize(0)
	s3 := encode(request...)
	add(r1, s1, s2, s3)

	// By hand: raw-string literals of every kind.
	var raw []byte
	raw = AppendStatus(raw, 200)
	raw = AppendField(raw, "content-type", "text/event-stream", false)
	raw = AppendField(raw, "x-request-id", "req_0123", false)
	raw = AppendField(raw, "set-cookie", "a=b", true)
	raw = AppendField(raw, "x-custom", strings.Repeat("v", 300), false)
	indexed := appendString(appendString([]byte{0x40}, "x-custom"), "v")
	indexed = appendString(append(indexed, 0x40|58), "curl/8.5.0")
	begun := (&HeaderEncoder{}).Begin(nil) // a size update to 0
	add(indexed, raw, append([]byte{0xbe, 0xbf}, raw...), indexed, append(begun, raw...), indexed)

	// RFC 7541 Appendix C.
	add(h("828684410f7777772e6578616d706c652e636f6d"), h("828684be58086e6f2d6361636865"),
		h("828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565"))
	add(h("828684418cf1e3c2e5f23a6ba0ab90f4ff"), h("828684be5886a8eb10649cbf"),
		h("828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf"))
	add(h("3fe101 4803333032580770726976617465611d4d6f6e2c203231204f637420323031332032303a31333a323120474d54"+
		"6e1768747470733a2f2f7777772e6578616d706c652e636f6d"),
		h("4803333037c1c0bf"),
		h("88c1611d4d6f6e2c203231204f637420323031332032303a31333a323220474d54c05a04677a69707738666f6f3d4153444a"+
			"4b48514b425a584f5157454f50495541585157454f49553b206d61782d6167653d333630303b2076657273696f6e3d31"))
	add(h("3fe101 488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29ad171863c78f0b"+
		"97c8e9ae82ae43d3"),
		h("4883640effc1c0bf"),
		h("88c16196d07abe941054d444a8200595040b8166e084a62d1bffc05a839bd9ab77ad94e7821dd7f2e6c7b335dfdfcd5b3960"+
			"d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b1063d5007"))

	// Size updates.
	add(h("20 3fe11f 82"), h("3f45 4001610162 be"))                                 // two leading updates, empty table
	add(h("4001610162"), h("3f03 3fe11f be"))                                       // two leading updates, the first keeps the entry
	add(h("82 20"))                                                                 // a late update on an empty table
	add(h("82 3fe11f 00016101 62 3f45"), h("82"))                                   // late updates on an empty table
	add(h("4001610162"), h("82 20"))                                                // a late update, table not empty
	add(h("3f e21f"), h("3fe11f 3fe21f"))                                           // over the limit
	add(h("4001610162 4001630164"), h("20 3fe11f 4001650166 be"), h("be"), h("bf")) // empties, refills

	// Broken blocks.
	add(h("80"))
	add(h("82 be"))
	add(h("ff"))
	add(h("ffffffffffffffffffff01"))
	add(h("00 05 6162"))
	add(h("04 84ffffffff"))
	add(h("04 81ff"))
	add(h("04 8100"))
	add(h("4001610162"), h("0f 30 0161"))
	return seeds
}
