package chunk

import (
	"encoding/json"
	"testing"
)

func TestFindContent(t *testing.T) {
	cases := []struct {
		payload string
		want    string
		ok      bool
		bad     bool
	}{
		{`{"id":"c1","choices":[{"index":0,"delta":{"content":"Hello"}}]}`, `"Hello"`, true, false},
		{`{"choices":[{"delta":{"content" : "a\"b"}}]}`, `"a\"b"`, true, false},
		{`{"choices":[{"delta":{"role":"assistant"}}]}`, "", false, false},
		{`{"choices":[{"delta":{"content":null}}]}`, "", false, false},
		{`{"id":"\"content\":\"x","choices":[{"delta":{"content":"y"}}]}`, `"y"`, true, false},
		{`{"choices":[{"delta":{"content":"unterminated`, "", false, true},
		{"{\"content\":\"raw\ncontrol\"}", "", false, true},
	}
	for _, c := range cases {
		s, e, ok, err := FindContent([]byte(c.payload))
		if ok != c.ok || (err != nil) != c.bad {
			t.Errorf("FindContent(%q) ok=%v err=%v, want ok=%v bad=%v", c.payload, ok, err, c.ok, c.bad)
			continue
		}
		if ok && c.payload[s:e] != c.want {
			t.Errorf("FindContent(%q) = %q, want %q", c.payload, c.payload[s:e], c.want)
		}
	}
}

// The codec must agree with encoding/json on everything JSON can carry.
func TestQuoteRoundTripAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", "quote \" back \\ slash /", "tab\tnl\ncr\r\x01\x1f", "é 日本 🙂", "bad \xff utf8"} {
		q := AppendQuote(nil, []byte(s))
		var viaJSON string
		if err := json.Unmarshal(q, &viaJSON); err != nil {
			t.Fatalf("AppendQuote(%q) = %s: not JSON: %v", s, q, err)
		}
		got, err := AppendUnquote(nil, q)
		if err != nil || string(got) != viaJSON {
			t.Errorf("round trip of %q: got %q (%v), encoding/json reads %q", s, got, err, viaJSON)
		}
	}
	std, _ := json.Marshal("\u2028 🙂 \\u0041")
	got, err := AppendUnquote(nil, []byte(`"\u00e9\ud83d\ude42\u0041\/"`))
	if err != nil || string(got) != "é🙂A/" {
		t.Errorf("escapes decoded to %q (%v)", got, err)
	}
	if _, err := AppendUnquote(nil, std); err != nil {
		t.Errorf("AppendUnquote(%s): %v", std, err)
	}
	for _, bad := range []string{`"\x"`, `"\u12"`, `"abc`, `abc"`, `"\`} {
		if _, err := AppendUnquote(nil, []byte(bad)); err == nil {
			t.Errorf("AppendUnquote(%s) accepted a malformed string", bad)
		}
	}
}
