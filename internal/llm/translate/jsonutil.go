package translate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"

	fastjson "github.com/go-json-experiment/json/v1"

	"github.com/straitgw/strait/internal/llm/jsonscan"
)

// unmarshal is json.Unmarshal, made about twice as fast for the bodies a
// translation reads (BenchmarkRequest*, BenchmarkResponse*): it decodes
// with the encoding/json v1 semantics of github.com/go-json-experiment/json
// (the v2 engine, which validates while it decodes instead of scanning each
// nested document twice). Its errors are not encoding/json's, and
// explainDecode reads those (type, field, offset) to tell the client what
// is wrong where; so on failure the value is zeroed and decoded again with
// encoding/json, whose error is returned. Invalid input is the rare case;
// FuzzFastDecode checks that the two agree. Before either, the types
// translation reads most are tried by hand (decodeByHand), which gives up
// on anything unusual; v must then be a zero value.
func unmarshal(data []byte, v any) error {
	if decodeByHand(data, v) {
		return nil
	}
	if fastjson.Unmarshal(data, v) == nil {
		return nil
	}
	reflect.ValueOf(v).Elem().SetZero()
	return json.Unmarshal(data, v)
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

func itoa(n int) string { return strconv.Itoa(n) }

func appendStringOrNull(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return jsonscan.AppendString(b, s)
}

func appendInt(b []byte, n int) []byte { return strconv.AppendInt(b, int64(n), 10) }

// isNull reports whether raw is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// compactJSON appends raw without insignificant whitespace; raw must be
// valid JSON (if it is not, it is appended as it is).
func compactJSON(b []byte, raw []byte) []byte {
	if !hasSpaceOutsideStrings(raw) {
		return append(b, raw...)
	}
	out, err := appendCompact(b, raw)
	if err != nil {
		return append(b, raw...)
	}
	return out
}

// forEachKey calls fn with each top-level key of obj, a valid JSON object,
// and whether its value is null. Keys are passed raw (escapes are rare in
// field names and left as they are).
func forEachKey(obj []byte, fn func(key []byte, null bool)) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return
	}
	i++
	for {
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] != '"' {
			return // '}' or malformed
		}
		end := skipString(obj, i)
		key := obj[i+1 : max(end-1, i+1)]
		i = skipSpace(obj, end)
		if i >= len(obj) || obj[i] != ':' {
			return
		}
		i = skipSpace(obj, i+1)
		valEnd := skipValue(obj, i)
		fn(key, string(obj[i:valEnd]) == "null")
		i = skipSpace(obj, valEnd)
		if i >= len(obj) || obj[i] != ',' {
			return
		}
		i++
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] == '"'.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the index after the value starting at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
		i++
	}
	return i
}
