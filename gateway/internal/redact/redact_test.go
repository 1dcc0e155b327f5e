package redact

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func all(pieces ...string) (string, [NumKinds]int) {
	var r Redactor
	var out []byte
	for _, p := range pieces {
		out = r.Redact(out, []byte(p))
	}
	out = r.Flush(out)
	return string(out), r.Counts()
}

func TestRedactsEachKind(t *testing.T) {
	cases := []struct{ in, want string }{
		{"mail bob.smith+lab@example.co.uk now", "mail [REDACTED:EMAIL] now"},
		{"call +1 (555) 123-4567 today", "call [REDACTED:PHONE] today"},
		{"call 555.123.4567.", "call [REDACTED:PHONE]."},
		{"card 4111 1111 1111 1111 ok", "card [REDACTED:CARD] ok"},
		{"card 4111-1111-1111-1111", "card [REDACTED:CARD]"},
		{"key sk-proj_AbC123dEf456GhI789jKl0 used", "key [REDACTED:API_KEY] used"},
		// Not PII: a failed Luhn check of 16 digits is too long for a phone.
		{"order 4111 1111 1111 1112 shipped", "order 4111 1111 1111 1112 shipped"},
		{"in 2024 we had 300 users", "in 2024 we had 300 users"},
		{"ask-me-anything sk-short", "ask-me-anything sk-short"},
		{"not an address: bob@localhost or a@b.c", "not an address: bob@localhost or a@b.c"},
		{"call 555 or 123@x.io", "call 555 or [REDACTED:EMAIL]"},
		{"id 4567abc@x.io", "id [REDACTED:EMAIL]"},
		{"", ""},
	}
	for _, c := range cases {
		if got, _ := all(c.in); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
		if got, _ := Text([]byte(c.in)); string(got) != c.want {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestCountsByKind(t *testing.T) {
	_, n := all("a@example.com b@example.org, 555-123-4567, 4111111111111111, sk-aaaaaaaaaaaaaaaaaaaaaaaa")
	want := [NumKinds]int{Email: 2, Phone: 1, Card: 1, APIKey: 1}
	if n != want {
		t.Fatalf("counts = %v, want %v", n, want)
	}
}

// A token stream splits text anywhere; every split must redact exactly as
// the whole text does.
func TestEverySplitMatchesWholeText(t *testing.T) {
	texts := []string{
		"Reach me at jane.doe@mail.example.com or +44 20 7946 0958, card 5500 0000 0000 0004, key sk-live_0123456789abcdefghij.",
		"(555) 123-4567 then x@y.io",
		"tokens: 1 2 3 done sk-",
	}
	for _, text := range texts {
		whole, _ := all(text)
		for i := 0; i <= len(text); i++ {
			for j := i; j <= len(text); j += 7 {
				if got, _ := all(text[:i], text[i:j], text[j:]); got != whole {
					t.Fatalf("split at %d,%d: %q\nwhole:          %q", i, j, got, whole)
				}
			}
		}
	}
}

func TestHoldsOnlyWhatCouldStillMatch(t *testing.T) {
	var r Redactor
	out := r.Redact(nil, []byte("Hello, my address is bob"))
	if string(out) != "Hello, my address is " {
		t.Fatalf("released %q", out)
	}
	out = r.Redact(out[:0], []byte("@example.com. Thanks "))
	if string(out) != "bob@example.com. Thanks "[:0]+"[REDACTED:EMAIL]. Thanks " {
		t.Fatalf("released %q", out)
	}
	if r.Pending() {
		t.Fatal("text ending in a space still held")
	}
}

func TestHoldIsBounded(t *testing.T) {
	var r Redactor
	long := strings.Repeat("a", MaxHold+10)
	out := r.Redact(nil, []byte(long))
	if len(out) != len(long) || r.Pending() {
		t.Fatalf("held %d bytes of a %d-byte run", len(long)-len(out), len(long))
	}
}

var planted = []string{
	"jane.doe@example.com", "+1 (555) 123-4567", "4111 1111 1111 1111",
	"sk-proj_AbC123dEf456GhI789jKl0",
}

func FuzzRedactor(f *testing.F) {
	f.Add("mail a@b.co and 4111 1111 1111 1111", "x", 5)
	f.Add("+1 (555) 123-4567 sk-abcdefghijklmnopqrstuvwxyz", "(555", 11)
	f.Add("\xff\xfe@@..--  ((", "sk-", 1)
	f.Fuzz(func(t *testing.T, head, tail string, cut int) {
		if len(head)+len(tail) > 2*MaxHold {
			return // the bound releases long runs early, by design
		}
		if cut < 0 {
			cut = -cut
		}
		pii := planted[cut%len(planted)]
		if strings.Contains(head+tail, pii) {
			return // glued to its neighbours it may read as something else
		}
		text := head + ", " + pii + ", " + tail
		whole, counts := all(text)
		if strings.Contains(whole, pii) {
			t.Fatalf("%q survived: %q", pii, whole)
		}
		cut %= len(text) + 1
		split, splitCounts := all(text[:cut], text[cut:])
		if split != whole || counts != splitCounts {
			t.Fatalf("split at %d: %q %v\nwhole: %q %v", cut, split, splitCounts, whole, counts)
		}
	})
}

// BenchmarkRedactToken is the redactor's cost on the common event: one
// ordinary token, the previous one held back and released.
func BenchmarkRedactToken(b *testing.B) {
	toks := [][]byte{[]byte(" the"), []byte(" gateway"), []byte(" streams"), []byte(" tok123"), []byte(","), []byte(" and")}
	var r Redactor
	var dst []byte
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		dst = r.Redact(dst[:0], toks[i%len(toks)])
		i++
	}
}

// A digit is any Unicode decimal digit: Python's int() and libphonenumber
// read full-width and other scripts' digits as digits, so a client may too.
func TestDigitsOfEveryScriptAreDigits(t *testing.T) {
	cases := []struct{ in, want string }{
		{"call ４１５ ５５５ ０１２３ now", "call [REDACTED:PHONE] now"},
		{"call ٤١٥٥٥٥٠١٢٣ now", "call [REDACTED:PHONE] now"},           // Arabic-Indic
		{"call ४१५-५५५-०१२३ now", "call [REDACTED:PHONE] now"},         // Devanagari
		{"card ４１１１ 1111 １１１１ 1111 ok", "card [REDACTED:CARD] ok"},     // mixed, Luhn-checked
		{"card ４１１１ 1111 １１１１ 1112 ok", "card ４１１１ 1111 １１１１ 1112 ok"}, // fails Luhn, and too long for a phone
		{"𝟒𝟏𝟓𝟓𝟓𝟓𝟎𝟏𝟐𝟑", "[REDACTED:PHONE]"},                             // mathematical bold
		{"order ４２ of 世界 🙂, é", "order ４２ of 世界 🙂, é"},
	}
	for _, c := range cases {
		if got, _ := all(c.in); got != c.want {
			t.Errorf("%q: got %q, want %q", c.in, got, c.want)
		}
		if got, _ := Text([]byte(c.in)); string(got) != c.want {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.want)
		}
		// Split between any two characters, as a stream's chunks are.
		runes := []rune(c.in)
		for i := range runes {
			if got, _ := all(string(runes[:i]), string(runes[i:])); got != c.want {
				t.Errorf("%q split at rune %d: got %q", c.in, i, got)
			}
		}
	}
}

// A multi-byte character's continuation bytes are held with a number's run
// only as part of a whole digit: a held tail never starts inside one.
func TestAHeldTailNeverSplitsACharacter(t *testing.T) {
	for _, text := range []string{"café", "写了 ４", "x ١٢", "end 🙂", "é٣"} {
		var r Redactor
		out := r.Redact(nil, []byte(text))
		if held := len(text) - len(out); held > 0 && !utf8.RuneStart(text[len(out)]) {
			t.Errorf("%q: released %q, holding from inside a character", text, out)
		}
	}
}

func TestDigitValues(t *testing.T) {
	for r, want := range map[rune]byte{'７': '7', '٣': '3', '७': '7', '𝟗': '9', '𝟘': '0', '٠': '0', '9': '9'} {
		if d, size := digitAt([]byte(string(r)), 0); d != want || size != utf8.RuneLen(r) {
			t.Errorf("digitAt(%q) = %q, %d; want %q", r, d, size, want)
		}
	}
	for _, r := range "a+(é世🙂" {
		if _, size := digitAt([]byte(string(r)), 0); size != 0 {
			t.Errorf("%q read as a digit", r)
		}
	}
}

func TestJoinedSpansTellsAMatchAcrossPieces(t *testing.T) {
	for _, c := range []struct {
		pieces []string
		spans  int // the piece that completes a match, -1 for none
	}{
		{[]string{"ask kim@exa", "mple.com now"}, 1},
		{[]string{"call 415", "555 0199"}, 1},
		{[]string{"sk-abcdefghij", "klmnopqrstuvwxyz"}, 1},
		{[]string{"assistant", ""}, -1},
		{[]string{"get_weather", "_for_city"}, -1},
		{[]string{"kim@example.com", " then"}, -1}, // whole in one piece: Text redacts it
		{[]string{strings.Repeat("x ", MaxHold), "kim@exa", "mple.com"}, 2},
	} {
		var j Joined
		got := -1
		for i, p := range c.pieces {
			if j.Spans([]byte(p)) {
				got = i
				break
			}
		}
		if got != c.spans || len(j.tail) > MaxHold {
			t.Errorf("%q: spans at piece %d, want %d (tail %d bytes)", c.pieces, got, c.spans, len(j.tail))
		}
	}
}

// RedactPlain is Redact for a plain text, and for any other leaves the
// redactor as it was: fed the same pieces, one redactor through
// RedactPlain (Redact where it refuses) and one through Redact release
// the same bytes after every piece.
func FuzzRedactPlain(f *testing.F) {
	f.Add(" the| gateway| mail| bob|@example.com| ok", 0)
	f.Add(" call| 555| 123| 4567|\"|\\n| caf\u00e9| \u0664\u0661\u0665|\x01", 1)
	f.Add(" key| sk-|abcdefghij|klmnopqrst|u done| \x7f", 2)
	f.Add(" mail| bob|\"x| caf\u00e9|.org", 0) // refused while a word is held
	f.Fuzz(func(t *testing.T, text string, flush int) {
		var plainR, r Redactor
		for i, piece := range strings.Split(text, "|") {
			p := []byte(piece)
			want := r.Redact(nil, p)
			got, ok := plainR.RedactPlain([]byte("kept"), p)
			if ok != isPlainText(p) {
				t.Fatalf("piece %d %q: plain = %v", i, piece, ok)
			}
			if !ok {
				if string(got) != "kept" {
					t.Fatalf("piece %d %q: refused, but appended %q", i, piece, got[4:])
				}
				got = append(got, plainR.Redact(nil, p)...)
			}
			if string(got[4:]) != string(want) {
				t.Fatalf("piece %d %q: RedactPlain released %q, Redact %q", i, piece, got[4:], want)
			}
			if flush > 0 && i%flush == 0 && string(plainR.Flush(nil)) != string(r.Flush(nil)) {
				t.Fatalf("piece %d %q: the held tails differ", i, piece)
			}
		}
		if a, b := plainR.Flush(nil), r.Flush(nil); string(a) != string(b) || plainR.Counts() != r.Counts() {
			t.Fatalf("end: %q %v, want %q %v", a, plainR.Counts(), b, r.Counts())
		}
	})
}

// isPlainText is RedactPlain's word for plain, spelled out: bytes from
// space to DEL, but a quote or a backslash.
func isPlainText(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
