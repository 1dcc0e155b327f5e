package openai

import (
	"encoding/json"
	"testing"
)

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
