package translate

import "github.com/straitgw/strait/internal/llm/jsonscan"

// UsageOf reads a usage object of dialect d into Usage's terms (input
// counts cached prompt tokens too) without encoding/json, which costs more
// than the rest of a relayed request together. It reports false for
// anything but plain whole numbers, leaving those to the decoder
// (ResponseUsage), whose errors and edge cases stay the reference.
func UsageOf(d Dialect, usage []byte) (Usage, bool) {
	var u Usage
	ok := true
	num := func(v []byte, dst *int) {
		n, good := jsonscan.WholeNumber(v)
		*dst, ok = n, ok && good
	}
	err := jsonscan.Members(usage, func(k, v []byte) bool {
		if d == OpenAI {
			switch string(k) {
			case "prompt_tokens":
				num(v, &u.Input)
			case "completion_tokens":
				num(v, &u.Output)
			case "prompt_tokens_details":
				if string(v) != "null" {
					ok = ok && jsonscan.Members(v, func(k, v []byte) bool {
						if string(k) == "cached_tokens" {
							num(v, &u.CacheRead)
						}
						return ok
					}) == nil
				}
			}
			return ok
		}
		switch string(k) {
		case "input_tokens":
			num(v, &u.Input)
		case "output_tokens":
			num(v, &u.Output)
		case "cache_read_input_tokens":
			num(v, &u.CacheRead)
		case "cache_creation_input_tokens":
			num(v, &u.CacheWrite)
		}
		return ok
	})
	if err != nil || !ok {
		return Usage{}, false
	}
	if d == Anthropic {
		u.Input += u.CacheRead + u.CacheWrite
	}
	return u, true
}
