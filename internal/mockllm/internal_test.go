package mockllm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/straitgw/strait/internal/llm/jsonscan"
)

// validate checks v against schema for the keywords toolArguments
// supports, independently of it, and returns every violation.
func validate(root, schema any, v any, at string) []string {
	s, ok := schema.(map[string]any)
	if !ok {
		return nil // true, {} and the like
	}
	if ref, ok := s["$ref"].(string); ok {
		target := root
		for tok := range strings.SplitSeq(strings.TrimPrefix(strings.TrimPrefix(ref, "#"), "/"), "/") {
			if tok != "" {
				target = target.(map[string]any)[tok]
			}
		}
		return validate(root, target, v, at)
	}
	var errs []string
	fail := func(f string, args ...any) { errs = append(errs, at+": "+fmt.Sprintf(f, args...)) }
	if c, ok := s["const"]; ok && fmt.Sprint(c) != fmt.Sprint(v) {
		fail("%v is not the const %v", v, c)
	}
	if e, ok := s["enum"].([]any); ok {
		found := false
		for _, x := range e {
			found = found || fmt.Sprint(x) == fmt.Sprint(v)
		}
		if !found {
			fail("%v is not in the enum %v", v, e)
		}
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		if branches, ok := s[key].([]any); ok {
			n := 0
			for _, b := range branches {
				if len(validate(root, b, v, at)) == 0 {
					n++
				}
			}
			if n == 0 || (key == "oneOf" && n > 1) {
				fail("%v matches %d branches of %s", v, n, key)
			}
		}
	}
	if all, ok := s["allOf"].([]any); ok {
		for _, b := range all {
			errs = append(errs, validate(root, b, v, at)...)
		}
	}
	if t, ok := s["type"]; ok {
		types := []any{t}
		if list, ok := t.([]any); ok {
			types = list
		}
		match := false
		for _, tt := range types {
			switch tt {
			case "object":
				_, m := v.(map[string]any)
				match = match || m
			case "array":
				_, m := v.([]any)
				match = match || m
			case "string":
				_, m := v.(string)
				match = match || m
			case "number":
				_, m := v.(float64)
				match = match || m
			case "integer":
				f, m := v.(float64)
				match = match || (m && f == math.Trunc(f))
			case "boolean":
				_, m := v.(bool)
				match = match || m
			case "null":
				match = match || v == nil
			}
		}
		if !match {
			fail("%v (%T) is not of type %v", v, v, t)
		}
	}
	num := func(k string) (float64, bool) { f, ok := s[k].(float64); return f, ok }
	switch v := v.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		required, _ := s["required"].([]any)
		for _, r := range required {
			if _, ok := v[r.(string)]; !ok {
				fail("required %q missing", r)
			}
		}
		for k, pv := range v {
			if ps, ok := props[k]; ok {
				errs = append(errs, validate(root, ps, pv, at+"."+k)...)
			} else if s["additionalProperties"] == false {
				fail("unexpected property %q", k)
			}
		}
		if mp, ok := num("maxProperties"); ok && float64(len(v)) > mp {
			fail("%d properties, max %v", len(v), mp)
		}
	case []any:
		if m, ok := num("minItems"); ok && float64(len(v)) < m {
			fail("%d items, min %v", len(v), m)
		}
		if m, ok := num("maxItems"); ok && float64(len(v)) > m {
			fail("%d items, max %v", len(v), m)
		}
		if s["uniqueItems"] == true {
			seen := map[string]bool{}
			for _, x := range v {
				k := fmt.Sprint(x)
				if seen[k] {
					fail("duplicate item %v", x)
				}
				seen[k] = true
			}
		}
		for i, x := range v {
			if prefix, ok := s["prefixItems"].([]any); ok && i < len(prefix) {
				errs = append(errs, validate(root, prefix[i], x, fmt.Sprintf("%s[%d]", at, i))...)
			} else if items, ok := s["items"]; ok {
				errs = append(errs, validate(root, items, x, fmt.Sprintf("%s[%d]", at, i))...)
			}
		}
	case string:
		n := float64(utf8.RuneCountInString(v))
		if m, ok := num("minLength"); ok && n < m {
			fail("%q shorter than %v", v, m)
		}
		if m, ok := num("maxLength"); ok && n > m {
			fail("%q longer than %v", v, m)
		}
		formats := map[string]string{
			"date-time": `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$`, "date": `^\d{4}-\d\d-\d\d$`,
			"email": `^[^@\s]+@[^@\s]+\.[a-z]+$`, "uri": `^https?://`, "uuid": `^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`,
			"ipv4": `^\d+\.\d+\.\d+\.\d+$`,
		}
		if f, ok := s["format"].(string); ok && formats[f] != "" && !regexp.MustCompile(formats[f]).MatchString(v) {
			fail("%q is not a %s", v, f)
		}
	case float64:
		if m, ok := num("minimum"); ok && (v < m || (s["exclusiveMinimum"] == true && v == m)) {
			fail("%v below the minimum %v", v, m)
		}
		if m, ok := num("maximum"); ok && (v > m || (s["exclusiveMaximum"] == true && v == m)) {
			fail("%v above the maximum %v", v, m)
		}
		if m, ok := num("exclusiveMinimum"); ok && v <= m {
			fail("%v not above %v", v, m)
		}
		if m, ok := num("exclusiveMaximum"); ok && v >= m {
			fail("%v not below %v", v, m)
		}
		if m, ok := num("multipleOf"); ok && math.Abs(math.Remainder(v, m)) > 1e-9 {
			fail("%v not a multiple of %v", v, m)
		}
	}
	return errs
}

func TestToolArgumentsSatisfySchemas(t *testing.T) {
	schemas := []string{
		weatherSchemaInternal,
		`{}`,
		`{"type":"object"}`,
		`{"type":"object","properties":{}}`,
		`{"properties":{"q":{"type":"string"}},"required":["q"]}`,
		`{"type":"object","properties":{"n":{"type":"integer","minimum":10,"maximum":20,"multipleOf":3}},"required":["n"]}`,
		`{"type":"object","properties":{"x":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1}},"required":["x"]}`,
		`{"type":"object","properties":{"x":{"type":"number","minimum":5,"exclusiveMinimum":true}},"required":["x"]}`,
		`{"type":"object","properties":{"x":{"type":"integer","maximum":-3}},"required":["x"]}`,
		`{"type":"object","properties":{"x":{"type":"number","multipleOf":0.25,"minimum":1.1}},"required":["x"]}`,
		`{"type":"object","properties":{"s":{"type":"string","minLength":12,"maxLength":14},"t":{"type":"string","maxLength":2}},"required":["s","t"]}`,
		`{"type":"object","properties":{"when":{"type":"string","format":"date-time"},"day":{"type":"string","format":"date"},"mail":{"type":"string","format":"email"},"site":{"type":"string","format":"uri"},"id":{"type":"string","format":"uuid"},"ip":{"type":"string","format":"ipv4"}},"required":["when","day","mail","site","id","ip"]}`,
		`{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"},"minItems":3,"uniqueItems":true},"none":{"type":"array","maxItems":0},"pair":{"type":"array","prefixItems":[{"type":"integer"},{"type":"boolean"}],"minItems":2}},"required":["tags","none","pair"]}`,
		`{"type":"object","properties":{"ids":{"type":"array","items":{"type":"integer","minimum":1},"minItems":4,"uniqueItems":true}},"required":["ids"]}`,
		`{"type":"object","properties":{"opt":{"type":["null","string"]},"flag":{"type":"boolean"},"nothing":{"type":"null"},"c":{"const":"fixed"}},"required":["opt","flag","nothing","c"]}`,
		`{"type":"object","properties":{"mode":{"anyOf":[{"type":"null"},{"type":"integer","minimum":2}]},"shape":{"oneOf":[{"type":"string","enum":["circle"]},{"type":"number"}]}},"required":["mode","shape"]}`,
		`{"type":"object","allOf":[{"properties":{"a":{"type":"string"}},"required":["a"]},{"properties":{"b":{"type":"integer","minimum":3}},"required":["b"]}]}`,
		`{"type":"object","properties":{"addr":{"$ref":"#/$defs/address"},"old":{"$ref":"#/definitions/old"}},"required":["addr","old"],"$defs":{"address":{"type":"object","properties":{"city":{"type":"string"},"zip":{"type":"string","minLength":5}},"required":["city","zip"]}},"definitions":{"old":{"type":"integer","enum":[7,8]}}}`,
		`{"type":"object","properties":{"node":{"$ref":"#/$defs/node"}},"required":["node"],"$defs":{"node":{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["name"]}}}`,
		`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"},"c":{"type":"string"}},"required":["c"],"maxProperties":2,"additionalProperties":false}`,
		`{"type":"object","properties":{"text":{"type":"string","enum":["naïve \"quoted\" \\ line\nbreak"]}},"required":["text"]}`,
	}
	for _, schema := range schemas {
		args := toolArguments(json.RawMessage(schema))
		var v, sch any
		if err := json.Unmarshal([]byte(args), &v); err != nil {
			t.Errorf("schema %s: arguments %s are not JSON: %v", schema, args, err)
			continue
		}
		_ = json.Unmarshal([]byte(schema), &sch)
		if _, ok := v.(map[string]any); !ok {
			t.Errorf("schema %s: arguments %s are not an object", schema, args)
		}
		for _, e := range validate(sch, sch, v, "$") {
			t.Errorf("schema %s: arguments %s: %s", schema, args, e)
		}
	}
	// Properties come in the schema's order, required ones first.
	if got := toolArguments(json.RawMessage(weatherSchemaInternal)); !strings.HasPrefix(got, `{"location":`) || !strings.Contains(got, `"unit":"celsius"`) {
		t.Errorf("weather arguments %s", got)
	}
}

const weatherSchemaInternal = `{"type":"object","properties":{"location":{"type":"string","description":"City"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location"]}`

// The validator above must be able to fail, or the test proves nothing.
func TestValidatorFails(t *testing.T) {
	var sch any
	_ = json.Unmarshal([]byte(`{"type":"object","properties":{"n":{"type":"integer","minimum":3},"s":{"type":"string","enum":["a"]}},"required":["n","s","t"]}`), &sch)
	var v any
	_ = json.Unmarshal([]byte(`{"n":2.5,"s":"b"}`), &v)
	if errs := validate(sch, sch, v, "$"); len(errs) != 4 {
		t.Errorf("validator found %q, want 4 violations (t missing, n not integer, n below minimum, s not in enum)", errs)
	}
}

func TestRateLimitWindows(t *testing.T) {
	s := New(Options{RateLimitEvery: 10 * time.Second, RateLimitFor: 3 * time.Second})
	var offset atomic.Int64
	s.clock = func() time.Time { return s.start.Add(time.Duration(offset.Load())) }
	for _, tc := range []struct {
		at         time.Duration
		limited    bool
		retryAfter string
	}{
		{0, false, ""},
		{5 * time.Second, false, ""},
		{10 * time.Second, true, "3"},
		{11500 * time.Millisecond, true, "2"},
		{12900 * time.Millisecond, true, "1"},
		{13 * time.Second, false, ""},
		{19 * time.Second, false, ""},
		{21 * time.Second, true, "2"},
		{1000*time.Second + time.Millisecond, true, "3"},
	} {
		offset.Store(int64(tc.at))
		for _, d := range []Dialect{OpenAI, Anthropic} {
			body := `{"model":"m","messages":[{"role":"user","content":"x"}]}`
			path := "/v1/chat/completions"
			if d == Anthropic {
				body = `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`
				path = "/v1/messages"
			}
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
			want := http.StatusOK
			if tc.limited {
				want = http.StatusTooManyRequests
			}
			if rec.Code != want || rec.Header().Get("Retry-After") != tc.retryAfter {
				t.Errorf("%s at %v: %d retry-after %q, want %d %q", d, tc.at, rec.Code, rec.Header().Get("Retry-After"), want, tc.retryAfter)
			}
			if tc.limited {
				var m map[string]any
				_ = json.Unmarshal(rec.Body.Bytes(), &m)
				if d == Anthropic && fmt.Sprint(m["error"]) == "" || d == Anthropic && m["error"].(map[string]any)["type"] != "rate_limit_error" {
					t.Errorf("Anthropic 429 body %s", rec.Body)
				}
				if d == OpenAI && m["error"].(map[string]any)["code"] != "rate_limit_exceeded" {
					t.Errorf("OpenAI 429 body %s", rec.Body)
				}
			}
		}
	}
}

func TestLatencyJitterAndSpikes(t *testing.T) {
	s := New(Options{Latency: 100 * time.Millisecond, Jitter: 30 * time.Millisecond})
	lo, hi := time.Hour, time.Duration(0)
	for range 2000 {
		l := s.latency()
		lo, hi = min(lo, l), max(hi, l)
	}
	if lo < 70*time.Millisecond || hi > 130*time.Millisecond || hi-lo < 30*time.Millisecond {
		t.Errorf("jittered latency spans [%v, %v], want a spread inside [70ms, 130ms]", lo, hi)
	}
	s = New(Options{Latency: time.Second, SpikeRate: 1, Spike: 2 * time.Second})
	if l := s.latency(); l != 3*time.Second {
		t.Errorf("spiked latency %v, want 3s", l)
	}
	s = New(Options{Latency: 10 * time.Millisecond, Jitter: time.Second})
	for range 1000 {
		if l := s.latency(); l < 0 {
			t.Fatalf("negative latency %v", l)
		}
	}
}

func TestErrorRate(t *testing.T) {
	s := New(Options{ErrorRate: 0.5, ErrorKinds: []ErrorKind{"500", "429"}})
	kinds := map[ErrorKind]int{}
	faults := 0
	for range 1000 {
		if f, ok := s.pickFault("m"); ok {
			faults++
			kinds[f.kind]++
		}
	}
	// Binomial(1000, 0.5): 350..650 fails with probability below 1e-20.
	if faults < 350 || faults > 650 || kinds["500"] < 100 || kinds["429"] < 100 {
		t.Errorf("%d faults %v of 1000 at rate 0.5", faults, kinds)
	}
	if _, ok := New(Options{}).pickFault("m"); ok {
		t.Error("a fault at rate 0")
	}
}

func TestOptions(t *testing.T) {
	kinds, err := ParseErrorKinds(" 429, 500,529 ,overloaded,Timeout,midstream,cut,")
	if err != nil || len(kinds) != 7 || kinds[4] != KindTimeout {
		t.Errorf("ParseErrorKinds: %v %v", kinds, err)
	}
	if _, err := ParseErrorKinds("429,boom,200"); err == nil || !strings.Contains(err.Error(), `"boom"`) || !strings.Contains(err.Error(), `"200"`) {
		t.Errorf("ParseErrorKinds of bad kinds: %v", err)
	}
	bad := Options{Latency: -1, ErrorRate: 2, RateLimitEvery: time.Second, ErrorKinds: []ErrorKind{"x"}}
	err = bad.Validate()
	for _, want := range []string{"Latency", "ErrorRate", "RateLimitEvery and RateLimitFor", `"x"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want it to mention %s", err, want)
		}
	}
	if err := (&Options{}).Validate(); err != nil {
		t.Errorf("zero options: %v", err)
	}
}

// ResponseBytes sets the size of a non-streaming OpenAI text answer.
func TestResponseBytes(t *testing.T) {
	for _, size := range []int{0, 360, 2000, 10 * 1024} {
		s := New(Options{ResponseBytes: size})
		want := size
		if want == 0 {
			want = DefaultResponseBytes
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"`+strings.Repeat("x", 400)+`"}]}`)))
		if got := rec.Body.Len(); got < want-8 || got > want+8 {
			t.Errorf("ResponseBytes %d: body of %d bytes", size, got)
		}
	}
}

func TestJSONHelpers(t *testing.T) {
	for _, s := range []string{"", "plain", `quote " back \ slash`, "ctl \x00\x01\x1f\t\n\r", "naïve 日本 🎉", "sep \u2028\u2029", "bad \xff utf8"} {
		lit := jsonscan.AppendString(nil, s)
		var back string
		if err := json.Unmarshal(lit, &back); err != nil {
			t.Errorf("jsonscan.AppendString(%q) = %s: %v", s, lit, err)
			continue
		}
		if back != strings.ToValidUTF8(s, "\uFFFD") {
			t.Errorf("jsonscan.AppendString(%q) decodes to %q", s, back)
		}
		std, _ := json.Marshal(s)
		if n := stringLen(std); n != len(back) {
			t.Errorf("stringLen(%s) = %d, want %d", std, n, len(back))
		}
	}
	if n := stringLen([]byte(`"\ud83c\udf89 \ud800x \u00e9"`)); n != len("🎉 \uFFFDx é") {
		t.Errorf("stringLen with surrogates = %d", n)
	}
	if n := compactLen([]byte("{ \"a b\" : [1, 2],\n\t\"c\":\"x \\\" y\" }")); n != len(`{"a b":[1,2],"c":"x \" y"}`) {
		t.Errorf("compactLen = %d", n)
	}
}

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		s string
		n int
	}{{"abcdefghij", 3}, {"abc", 10}, {"", 4}, {"héllo wörld", 4}, {"🎉🎉", 3}, {"abcdef", 1}} {
		pieces := split(tc.s, tc.n)
		if strings.Join(pieces, "") != tc.s {
			t.Errorf("split(%q, %d) = %q loses text", tc.s, tc.n, pieces)
		}
		if want := min(tc.n, utf8.RuneCountInString(tc.s)); len(pieces) != want {
			t.Errorf("split(%q, %d) = %d pieces, want %d", tc.s, tc.n, len(pieces), want)
		}
		for _, p := range pieces {
			if p == "" || !utf8.ValidString(p) {
				t.Errorf("split(%q, %d) has piece %q", tc.s, tc.n, p)
			}
			if len(tc.s) >= 3*tc.n && (len(p) < len(tc.s)/tc.n-4 || len(p) > len(tc.s)/tc.n+4) {
				t.Errorf("split(%q, %d): uneven piece %q", tc.s, tc.n, p)
			}
		}
	}
}

// The same conversation counts the same input tokens in both dialects.
func TestInputTokensAgreeAcrossDialects(t *testing.T) {
	oa := `{"model":"m","messages":[
		{"role":"system","content":"Be brief."},
		{"role":"user","content":[{"type":"text","text":"Weather in Paris?"}]},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"21 \u00b0C"}]}`
	an := `{"model":"m","max_tokens":5,"system":[{"type":"text","text":"Be brief."}],"messages":[
		{"role":"user","content":"Weather in Paris?"},
		{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"get_weather","input":{"city":"Paris"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":[{"type":"text","text":"21 °C"}]}]}]}`
	ro, err := parseOpenAI([]byte(oa))
	if err != nil {
		t.Fatal(err)
	}
	ra, err := parseAnthropic([]byte(an), false)
	if err != nil {
		t.Fatal(err)
	}
	want := (len("Be brief.") + len("Weather in Paris?") + len("get_weather") + len(`{"city":"Paris"}`) + len("21 °C") + 3) / 4
	if ro.inputTokens != want || ra.inputTokens != want {
		t.Errorf("input tokens: OpenAI %d, Anthropic %d, want %d", ro.inputTokens, ra.inputTokens, want)
	}
	if ro.tool != nil || ra.tool != nil {
		t.Error("a tool call after a tool result")
	}
}

// The canned answer is whole words ending in a full stop, whatever its
// size: an answer reported complete must not end mid-word.
func TestTextIsWholeWordsEndingInAFullStop(t *testing.T) {
	words := map[string]bool{}
	for _, w := range strings.Fields(strings.Join(sentences, " ")) {
		words[strings.TrimRight(w, ".,")] = true
	}
	for size := 0; size <= 1200; size += 7 {
		text := New(Options{ResponseBytes: size}).Text()
		if !strings.HasSuffix(text, ".") {
			t.Errorf("ResponseBytes %d: text ends %q, want a full stop", size, text[max(0, len(text)-20):])
		}
		for _, w := range strings.Fields(text) {
			if !words[strings.TrimRight(w, ".,")] {
				t.Errorf("ResponseBytes %d: %q is not a whole word of the sentences (text %q)", size, w, text)
				break
			}
		}
	}
}

// parseShared answers the same body with the same parse, from many
// goroutines at once, and parses a different one afresh; a bad body is
// refused every time, never remembered.
func TestParseShared(t *testing.T) {
	s := New(Options{})
	a := []byte(`{"model":"m1","max_tokens":7,"stop":["x"],"messages":[{"role":"user","content":"hi"}]}`)
	b := []byte(`{"model":"m2","messages":[{"role":"user","content":"hello there"}]}`)
	want, err := parseRequest(OpenAI, a)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if got, err := s.parseShared(OpenAI, a); err != nil || !reflect.DeepEqual(got, want) {
					t.Errorf("parseShared: %+v %v, want %+v", got, err, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	if p := s.lastParsed.Load(); p == nil || !bytes.Equal(p.body, a) {
		t.Fatal("the body parsed is not kept")
	}
	if got, err := s.parseShared(OpenAI, b); err != nil || got.model != "m2" {
		t.Errorf("a different body: %+v %v", got, err)
	}
	if _, err := s.parseShared(Anthropic, b); err == nil {
		t.Error("the same body in the other dialect was not parsed as that dialect's (it lacks max_tokens)")
	}
	for range 2 {
		if _, err := s.parseShared(OpenAI, []byte(`{"model":"m"}`)); err == nil {
			t.Error("a request without messages was accepted")
		}
	}
}
