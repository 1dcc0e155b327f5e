package chunk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"burnlab/shared/openai"
)

func TestScanFindsEveryTextWithItsStream(t *testing.T) {
	type want struct {
		text string
		key  Key
	}
	content := func(choice int) Key { return Key{Choice: choice, Tool: -1, Field: Content} }
	cases := []struct {
		payload string
		want    []want
	}{
		{`{"id":"c1","choices":[{"index":0,"delta":{"content":"Hello"}}]}`, []want{{`"Hello"`, content(0)}}},
		{`{"choices":[{"delta":{"content" : "a\"b"}}]}`, []want{{`"a\"b"`, content(0)}}},
		// A client joins a role, a tool's name and id, and any other string
		// of a choice but its "type", across chunks: each is a text.
		{`{"choices":[{"delta":{"role":"assistant"}}]}`, []want{{`"assistant"`, Key{0, -1, Role, 0}}}},
		{`{"choices":[{"delta":{"content":null}}]}`, nil},
		{`{"id":"\"content\":\"x","choices":[{"delta":{"content":"y"}}]}`, []want{{`"y"`, content(0)}}},
		// A key with an escaped quote ends in the bytes "content": a byte
		// search took its value for the content and forwarded the real one.
		{`{"a\"content":"x","choices":[{"delta":{"content":"y"}}]}`, []want{{`"y"`, content(0)}}},
		// An escaped key is the same key to a client.
		{`{"choices":[{"delta":{"con\u0074ent":"y"}}]}`, []want{{`"y"`, content(0)}}},
		// n > 1: the index names the choice, wherever it stands.
		{`{"choices":[{"delta":{"content":"a"},"index":1},{"index":0,"delta":{"content":"b"}}]}`,
			[]want{{`"a"`, content(1)}, {`"b"`, content(0)}}},
		{`{"choices":[{"delta":{"content":"a"}},{"delta":{"content":"b"}}]}`, []want{{`"a"`, content(0)}, {`"b"`, content(1)}}},
		{`{"choices":[{"index":2,"delta":{"refusal":"no","reasoning_content":"hm","reasoning":"r"}}]}`,
			[]want{{`"no"`, Key{2, -1, Refusal, 0}}, {`"hm"`, Key{2, -1, Reasoning, 0}}, {`"r"`, Key{2, -1, Reasoning, 0}}}},
		{`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"f","arguments":"{\"a\""}},` +
			`{"function":{"arguments":"1}"},"index":3}]}}]}`,
			[]want{{`"call_1"`, Key{0, 0, ID, 0}}, {`"f"`, Key{0, 0, Name, 0}}, {`"{\"a\""`, Key{0, 0, Arguments, 0}}, {`"1}"`, Key{0, 3, Arguments, 0}}}},
		{`{"choices":[{"index":0,"delta":{"function_call":{"arguments":"x"}}}]}`, []want{{`"x"`, Key{0, -1, Arguments, 0}}}},
		{`{"choices":[{"index":0,"text":"legacy"}]}`, []want{{`"legacy"`, Key{0, -1, Text, 0}}}},
		{`{"choices":[{"index":0,"delta":{"content":[{"type":"text","text":"part"}]}}]}`, []want{{`"part"`, Key{0, -1, Text, 0}}}},
		{` {"content":"outside"} `, []want{{`"outside"`, Key{-1, -1, Content, 0}}}},
		{`{"content":"héllo, 世界 🙂"}`, []want{{`"héllo, 世界 🙂"`, Key{-1, -1, Content, 0}}}},
	}
	var sc Scanner
	for _, c := range cases {
		spans, err := sc.Scan([]byte(c.payload))
		if err != nil {
			t.Errorf("Scan(%s): %v", c.payload, err)
			continue
		}
		var got []want
		for _, sp := range spans {
			got = append(got, want{c.payload[sp.Start:sp.End], sp.Key})
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("Scan(%s)\n got %v\nwant %v", c.payload, got, c.want)
		}
	}
}

func TestScanRefusesWhatIsNotAnOrdinaryChunk(t *testing.T) {
	var sc Scanner
	for payload, want := range map[string]error{
		`{"choices":[{"delta":{"content":"unterminated`:                                  openai.ErrBadString,
		"{\"content\":\"raw\ncontrol\"}":                                                 openai.ErrBadString,
		`{"content":"bad \x escape"}`:                                                    openai.ErrBadString,
		"{\"content\":\"cut \xe4\xb8\"}":                                                 ErrBadUTF8,
		"{\"k\xff\":1}":                                                                  ErrBadUTF8,
		"{\"a\":1}\xff":                                                                  ErrSyntax,
		`{"choices":[{"index":-1,"delta":{"content":"x"}}]}`:                             ErrBadIndex,
		`{"choices":[{"index":1.5,"delta":{"content":"x"}}]}`:                            ErrBadIndex,
		`{"choices":[{"index":99999999999,"delta":{"content":"x"}}]}`:                    ErrBadIndex,
		`{"choices":[{"index":"0","delta":{"content":"x"}}]}`:                            ErrBadIndex,
		`{"choices":[{"index":tru,"delta":{"content":"x"}}]}`:                            ErrSyntax,
		`{"choices":[{"index":0,"logprobs":{"content":[{"token":"x","bytes":[120]}]}}]}`: ErrUnredactable,
		`{"choices":[{"index":0,"delta":{"audio":{"transcript":"x"}}}]}`:                 ErrUnredactable,
		// A number where the schema has a string: a client that joins
		// text += delta.content shows it, and no redactor reads it.
		`{"choices":[{"index":0,"delta":{"content":4111111111111111}}]}`: ErrNotString,
		`{"content":-4155550199}`: ErrNotString,
		`{"choices":[{"delta":{"tool_calls":[{"function":{"name":4155550199}}]}}]}`:   ErrNotString,
		`{"choices":[{"delta":{"role":true}}]}`:                                       ErrNotString,
		`{"choices":[{"delta":{"content":["kim@exa"]}}]}`:                             ErrNotString,
		`{"choices":[{"delta":{"content":[{"type":"text","text":"a"},4155550199]}}]}`: ErrNotString,
		`{"choices":[{"delta":{"tool_calls":[{"function":{"name":["kim@exa"]}}]}}]}`:  ErrNotString,
		`{"choices":[{"delta":{"refusal":{"text":"x"}}}]}`:                            ErrNotString,
		`{"a":1}{"b":2}`: ErrSyntax,
		`{"a":tru}`:      ErrSyntax,
		`{"a":01}`:       ErrSyntax,
		`{"a":[1,]}`:     ErrSyntax,
		``:               ErrSyntax,
		strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1):             ErrTooDeep,
		`{"choices":[` + strings.Repeat(`{"text":"x"},`, MaxSpans) + `{"text":"x"}]}`: ErrTooMany,
	} {
		if _, err := sc.Scan([]byte(payload)); !errors.Is(err, want) {
			t.Errorf("Scan(%.60s) = %v, want %v", payload, err, want)
		}
	}
}

// shapes are chunks as providers send them, to arm the scanner's shortcut.
var shapes = [][]byte{
	[]byte(`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi"}}]}`),
	[]byte(`{"choices":[{"delta":{"content":"a"},"index":1}]}`),
	[]byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]}}]}`),
	[]byte(`{"content":"x"}`),
}

// The shortcut takes a chunk in the last one's shape without a walk, and
// only then: same bytes around exactly one JSON string.
func TestScanShortcutTakesOnlyTheSameShape(t *testing.T) {
	var sc Scanner
	sc.Scan([]byte(`{"choices":[{"index":3,"delta":{"content":"first"}}]}`))
	for payload, want := range map[string]string{
		`{"choices":[{"index":3,"delta":{"content":"second \"quoted\""}}]}`: `[{42 61 {3 -1 0 0} true}]`,
		`{"choices":[{"index":3,"delta":{"content":""}}]}`:                  `[{42 44 {3 -1 0 0} false}]`,
		// The same bytes around more than one string: a walk finds both.
		`{"choices":[{"index":3,"delta":{"content":"a","refusal":"b"}}]}`:    `[{42 45 {3 -1 0 0} false} {56 59 {3 -1 1 0} false}]`,
		`{"choices":[{"index":3,"delta":{"content":"a"},"x":{"text":"b"}}]}`: `[{42 45 {3 -1 0 0} false} {59 62 {3 -1 4 0} false}]`,
		`{"choices":[{"index":3,"delta":{"content":null}}]}`:                 `[]`,
	} {
		var fresh Scanner
		want2, _ := fresh.Scan([]byte(payload))
		got, err := sc.Scan([]byte(payload))
		if err != nil || fmt.Sprint(got) != want || fmt.Sprint(want2) != want {
			t.Errorf("Scan(%s) = %v %v (fresh: %v), want %s", payload, got, err, want2, want)
		}
		sc.Scan([]byte(`{"choices":[{"index":3,"delta":{"content":"first"}}]}`))
	}
	if _, err := sc.Scan([]byte("{\"choices\":[{\"index\":3,\"delta\":{\"content\":\"bad \xff\"}}]}")); !errors.Is(err, ErrBadUTF8) {
		t.Errorf("the shortcut let invalid UTF-8 through: %v", err)
	}
	// Its bytes between head and tail must be one whole string.
	sc.Scan([]byte(`{"choices":[{"index":3,"delta":{"content":"first"}}]}`))
	if sp, err := sc.Scan([]byte(`{"choices":[{"index":3,"delta":{"content":"open}}]}`)); err == nil {
		t.Errorf("the shortcut took an unterminated string: %v", sp)
	}
	if _, err := sc.Scan([]byte(`{"choices":[{"index":3,"delta":{"content":"bad \x"}}]}`)); err == nil {
		t.Error("the shortcut let an invalid escape through")
	}
}

// FuzzScan holds the scanner to encoding/json: it accepts exactly the valid
// documents (within its limits), and each span it reports is a JSON string
// that decodes.
func FuzzScan(f *testing.F) {
	for _, seed := range []string{
		`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi bob@example.com"}}]}`,
		`{"choices":[{"delta":{"content":"a"},"index":1},{"index":0,"delta":{"refusal":"b"}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{\"to\":\"x@y.io\"}"}}]}}]}`,
		`{"a\"content":"x","choices":[{"delta":{"con\u0074ent":"y"}}]}`,
		`{"choices":[{"delta":{"content":"\ud83d\ude42 \u00e9"}}],"usage":{"total_tokens":1e3}}`,
		`[1,-0.5e+2,true,false,null,{}]`, `"just a string"`, `{"choices":null}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		var sc Scanner
		spans, err := sc.Scan(payload)
		// A scanner that has seen other chunks (its shape shortcut armed)
		// must answer exactly as a fresh one, and so must a second look at
		// the same payload.
		for _, prev := range append(shapes, payload) {
			var warm Scanner
			warm.Scan(prev)
			again, err2 := warm.Scan(payload)
			if fmt.Sprint(again, err2) != fmt.Sprint(spans, err) {
				t.Fatalf("after %q, Scan(%q) = %v %v; a fresh scanner says %v %v", prev, payload, again, err2, spans, err)
			}
		}
		valid := json.Valid(payload)
		switch {
		case errors.Is(err, ErrTooDeep) || errors.Is(err, ErrTooMany) || errors.Is(err, ErrTooManyStrings) ||
			errors.Is(err, ErrBadIndex) || errors.Is(err, ErrUnredactable) || errors.Is(err, ErrNotString):
			return // limits of an ordinary chunk, not JSON's
		case errors.Is(err, ErrBadUTF8):
			// encoding/json takes invalid UTF-8 in a string for U+FFFD;
			// the gateway repairs it so, and the repair must scan as JSON
			// did.
			if utf8.Valid(payload) {
				t.Fatalf("Scan(%q) called valid UTF-8 invalid", payload)
			}
			repaired := bytes.ToValidUTF8(payload, []byte("\uFFFD"))
			if _, err := sc.Scan(repaired); (err == nil) != valid && !errors.Is(err, ErrTooDeep) && !errors.Is(err, ErrTooMany) &&
				!errors.Is(err, ErrTooManyStrings) && !errors.Is(err, ErrBadIndex) && !errors.Is(err, ErrUnredactable) &&
				!errors.Is(err, ErrNotString) {
				t.Fatalf("repaired %q: Scan says %v, json.Valid of the original %v", repaired, err, valid)
			}
			return
		case err == nil && !valid:
			t.Fatalf("Scan accepted invalid JSON %q", payload)
		case err != nil && valid:
			t.Fatalf("Scan refused valid JSON %q: %v", payload, err)
		}
		for _, sp := range spans {
			var s string
			if err := json.Unmarshal(payload[sp.Start:sp.End], &s); err != nil {
				t.Fatalf("span %q of %q is not a JSON string: %v", payload[sp.Start:sp.End], payload, err)
			}
			if _, err := openai.AppendUnquote(nil, payload[sp.Start:sp.End]); err != nil {
				t.Fatalf("span %q does not unquote: %v", payload[sp.Start:sp.End], err)
			}
		}
		// Every string a client reads, keys included, is a text or one of
		// the others: none is left out of redaction.
		if err == nil {
			if got, want := textsAndOthers(t, payload, spans, sc.Others()), jsonStrings(t, payload); got != want {
				t.Fatalf("Scan(%q): texts and others %s; encoding/json's strings %s", payload, got, want)
			}
		}
	})
}

// textsAndOthers lists the strings that spans and others bound, in document
// order, decoded.
func textsAndOthers(t *testing.T, payload []byte, spans, others []Span) string {
	all := append(slices.Clone(spans), others...)
	slices.SortFunc(all, func(a, b Span) int { return a.Start - b.Start })
	var out []string
	for _, sp := range all {
		var s string
		if err := json.Unmarshal(payload[sp.Start:sp.End], &s); err != nil {
			t.Fatalf("%q: %v", payload[sp.Start:sp.End], err)
		}
		out = append(out, s)
	}
	return fmt.Sprintf("%q", out)
}

// jsonStrings lists every string token of payload, keys included, as
// encoding/json reads them.
func jsonStrings(t *testing.T, payload []byte) string {
	dec := json.NewDecoder(bytes.NewReader(payload))
	var out []string
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		if s, ok := tok.(string); ok {
			out = append(out, s)
		}
	}
	return fmt.Sprintf("%q", out)
}
