// Package redact removes PII from a token stream before it is forwarded:
// e-mail addresses, phone numbers, payment card numbers (Luhn-checked) and
// provider API keys (sk-…), also when one is split across events.
//
// Splits are handled by holding back the tail of the text seen so far that
// could still become part of a match — a trailing run of address-like or
// number-like characters — and prepending it to the next piece. The hold is
// bounded (MaxHold) and flushed at the end of the stream. The redactor scans
// bytes by hand rather than with regexps: it runs on every event of every
// stream, where the gateway's budget is about 2x a plain proxy.
//
// A digit is any Unicode decimal digit (general category Nd), not only
// ASCII's: Python's int() and libphonenumber read "４１５ ５５５ ０１２３"
// (full-width) as a phone number, so the redactor does too.
package redact

import (
	"bytes"
	"unicode"
	"unicode/utf8"

	"burnlab/gateway/internal/wordcopy"
)

// Kind is a class of PII.
type Kind int

// The kinds, in the order their counters are reported.
const (
	Email Kind = iota
	Phone
	Card
	APIKey
	NumKinds
)

var kindNames = [NumKinds]string{"email", "phone", "card", "api_key"}

var replacements = [NumKinds]string{
	"[REDACTED:EMAIL]", "[REDACTED:PHONE]", "[REDACTED:CARD]", "[REDACTED:API_KEY]",
}

// String is the kind's metric label value.
func (k Kind) String() string { return kindNames[k] }

// MaxHold bounds the held-back tail: nothing this long is an address, a
// number or a key the redactor recognises, so a longer run is released.
const MaxHold = 256

// Redactor redacts one stream. The zero value is ready to use.
type Redactor struct {
	pending []byte
	work    []byte
	matches []match
	prev    byte // last byte released, the left context of pending
	// plain says pending holds no byte a match needs (see starters).
	plain  bool
	counts [NumKinds]int
}

type match struct {
	start, end int
	kind       Kind
}

// Counts reports how many of each kind were redacted so far.
func (r *Redactor) Counts() [NumKinds]int { return r.counts }

// Redact appends to dst the redacted text that is safe to release once text
// follows what came before, and holds back the rest.
//
// What it appends is text's own bytes, in order, with matches replaced, and
// before them what it held: a held tail is ASCII letters, digits and the
// punctuation of addresses, numbers and keys, and whole decimal digits of
// other scripts (a match and the run after it), never a quote, a backslash
// or a control character, and it never splits a multi-byte character. Text that is its own JSON string content
// therefore redacts to its own JSON string content.
//
// It may write dst's spare capacity past what it appends (wordcopy.Append).
func (r *Redactor) Redact(dst, text []byte) []byte {
	if r.plain {
		if seen, h, n := runs(text); seen&clStarter == 0 && h > 0 && n > 0 {
			return r.releaseCommon(dst, text, h, n)
		}
	}
	return r.redact(dst, text)
}

// RedactPlain is Redact for a text its caller forwards only if it is plain:
// bytes from space to DEL but a quote or a backslash, the content of a
// JSON string as it stands. For any other text it appends nothing, changes
// nothing and reports false. The check rides on the scan Redact makes of
// the common token anyway, so a forwarding loop's fast path reads each
// token once, not once to check it and once to redact it.
func (r *Redactor) RedactPlain(dst, text []byte) ([]byte, bool) {
	if r.plain {
		seen, h, n := runs(text)
		switch {
		case seen&clNotPlain != 0:
			return dst, false
		case seen&clStarter == 0 && h > 0 && n > 0:
			return r.releaseCommon(dst, text, h, n), true
		}
	} else if !plain(text) {
		return dst, false
	}
	return r.redact(dst, text), true
}

// releaseCommon is Redact for the common token: no byte a match needs,
// here or held, so nothing matches, and the tail to hold starts inside
// text, after h and n, where its runs begin (runs). Those are the runs of
// pending+text, found without joining the two.
func (r *Redactor) releaseCommon(dst, text []byte, h, n int) []byte {
	h = min(h, numberFrom(text, n))
	if len(text)-h > MaxHold {
		h = len(text)
	}
	// h > 0, as n > 0. The last byte released is read from text, not from
	// dst: a load of a byte just stored waits on the store (store
	// forwarding), where text's was read already.
	r.prev = text[h-1]
	dst = wordcopy.Append(wordcopy.Append(dst, r.pending), text[:h])
	if tail := text[h:]; len(tail) <= cap(r.pending) {
		r.pending = wordcopy.Append(r.pending[:0], tail)
	} else {
		r.hold(tail)
	}
	return dst
}

// redact is Redact's general path.
func (r *Redactor) redact(dst, text []byte) []byte {
	r.work = append(append(r.work[:0], r.pending...), text...)
	w := r.work
	r.matches = scan(r.matches[:0], w, r.prev)
	h := holdStart(w)
	if len(w)-h > MaxHold {
		h = len(w)
	}
	for _, m := range r.matches {
		if m.start < h && m.end > h {
			h = m.start
		}
	}
	dst = r.release(dst, w[:h])
	r.hold(w[h:])
	r.plain = !mayStart(r.pending)
	r.letGo()
	return dst
}

// How large the work buffers may stay between calls: a long text's are let
// go, so a stream's many redactors (one a text stream) do not each keep the
// largest text they ever saw, nor its matches.
const (
	keepWork    = 4 << 10
	keepMatches = 64
)

func (r *Redactor) letGo() {
	if cap(r.work) > keepWork {
		r.work = nil
	}
	if cap(r.matches) > keepMatches {
		r.matches = nil
	}
}

// hold keeps tail as the pending text. Within its capacity only the
// length is stored, not a new slice: a pointer store costs a write barrier
// while the GC marks, and this runs for every token.
func (r *Redactor) hold(tail []byte) {
	if len(tail) > cap(r.pending) {
		r.pending = make([]byte, len(tail), max(2*len(tail), 32))
	}
	r.pending = r.pending[:len(tail)]
	copy(r.pending, tail)
}

// Flush appends the held tail, redacted, at the end of the stream.
func (r *Redactor) Flush(dst []byte) []byte {
	w := append(r.work[:0], r.pending...)
	r.work = w
	r.matches = scan(r.matches[:0], w, r.prev)
	dst = r.release(dst, w)
	r.pending, r.plain = r.pending[:0], true
	r.letGo()
	return dst
}

// Pending reports whether a tail is held back.
func (r *Redactor) Pending() bool { return len(r.pending) > 0 }

// release appends seg with every match inside it replaced; r.matches were
// found in the buffer seg starts.
func (r *Redactor) release(dst, seg []byte) []byte {
	at := 0
	for _, m := range r.matches {
		if m.end > len(seg) {
			break
		}
		dst = append(dst, seg[at:m.start]...)
		dst = append(dst, replacements[m.kind]...)
		r.counts[m.kind]++
		at = m.end
	}
	dst = append(dst, seg[at:]...)
	if len(seg) > 0 {
		r.prev = seg[len(seg)-1]
	}
	return dst
}

// Text redacts a complete text at once: no hold, no stream state. It
// returns text itself when there is nothing to redact.
func Text(text []byte) ([]byte, [NumKinds]int) {
	var r Redactor
	r.matches = scan(nil, text, 0)
	if len(r.matches) == 0 {
		return text, r.counts
	}
	out := r.release(make([]byte, 0, len(text)+32), text)
	return out, r.counts
}

// Byte classes, so each test the redactor makes on every byte of every
// token is one table load.
const (
	clAlnum    = 1 << iota
	clDigit    // 0-9
	clLocal    // an address's local part
	clDomain   // an address's domain
	clKey      // an API key after "sk-"
	clNumSep   // a separator inside a phone or card number
	clStarter  // a byte no match is without (starters)
	clHeldA    // of the run held back as a possible address or key
	clHeldN    // of the run held back as a possible number
	clNotPlain // a byte a plain text has not (RedactPlain)
)

var class = func() (t [256]uint16) {
	for c := range 256 {
		b := byte(c)
		alnum := '0' <= b && b <= '9' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z'
		set := func(bit uint16, on bool) {
			if on {
				t[c] |= bit
			}
		}
		set(clAlnum, alnum)
		set(clDigit, '0' <= b && b <= '9')
		set(clLocal, alnum || b == '.' || b == '_' || b == '%' || b == '+' || b == '-')
		set(clDomain, alnum || b == '.' || b == '-')
		set(clKey, alnum || b == '_' || b == '-')
		set(clNumSep, b == ' ' || b == '-' || b == '.' || b == '(' || b == ')')
		// Every address has an '@', every number a digit, every key "sk-".
		set(clStarter, '0' <= b && b <= '9' || b == '@' || b == '-')
		set(clHeldA, t[c]&clLocal != 0 || b == '@')
		set(clHeldN, t[c]&(clDigit|clNumSep) != 0 || b == '+')
		set(clNotPlain, b < 0x20 || b == '"' || b == '\\' || b >= utf8.RuneSelf)
		// Bytes of a multi-byte character may be of a digit: its
		// continuation bytes are held with a number's run (numberFrom
		// starts a number only at a whole character), and the first bytes
		// of every non-ASCII decimal digit start a match.
		set(clHeldN, b&0xC0 == 0x80)
	}
	for _, rt := range unicode.Nd.R16 {
		markDigitLeads(&t, rune(rt.Lo), rune(rt.Hi), rune(rt.Stride))
	}
	for _, rt := range unicode.Nd.R32 {
		markDigitLeads(&t, rune(rt.Lo), rune(rt.Hi), rune(rt.Stride))
	}
	return t
}()

// markDigitLeads marks the first byte of each non-ASCII digit in lo..hi.
func markDigitLeads(t *[256]uint16, lo, hi, stride rune) {
	var b [utf8.UTFMax]byte
	for r := max(lo, utf8.RuneSelf); r <= hi; r += stride {
		utf8.EncodeRune(b[:], r)
		t[b[0]] |= clStarter | clHeldN
	}
}

// digitAt reads the digit that starts at w[i]: its value, as an ASCII
// digit, and its length in bytes; size is 0 when none starts there.
// Unicode encodes each script's decimal digits as one run from 0 to 9,
// and every range of unicode.Nd starts at a zero, so a digit's value is
// its distance from its range's start, mod 10.
func digitAt(w []byte, i int) (digit byte, size int) {
	c := w[i]
	if c < utf8.RuneSelf {
		if isDigit(c) {
			return c, 1
		}
		return 0, 0
	}
	if class[c]&clStarter == 0 {
		return 0, 0
	}
	r, size := utf8.DecodeRune(w[i:])
	if !unicode.IsDigit(r) {
		return 0, 0
	}
	return "0123456789"[digitValue(r)], size
}

// digitValue is the value of a decimal digit r (unicode.IsDigit).
func digitValue(r rune) int {
	for _, rt := range unicode.Nd.R16 {
		if lo, hi := rune(rt.Lo), rune(rt.Hi); lo <= r && r <= hi {
			return int(r-lo) % 10
		}
	}
	for _, rt := range unicode.Nd.R32 {
		if lo, hi := int64(rt.Lo), int64(rt.Hi); lo <= int64(r) && int64(r) <= hi {
			return int((int64(r) - lo) % 10)
		}
	}
	return 0
}

func isAlnum(c byte) bool  { return class[c]&clAlnum != 0 }
func isDigit(c byte) bool  { return class[c]&clDigit != 0 }
func isLocal(c byte) bool  { return class[c]&clLocal != 0 }
func isDomain(c byte) bool { return class[c]&clDomain != 0 }
func isKey(c byte) bool    { return class[c]&clKey != 0 }
func isNumSep(c byte) bool { return class[c]&clNumSep != 0 }

// holdStart returns where the tail that could still grow into a match
// begins: the trailing run of address or key characters, or the trailing
// run of a phone or card number, whichever starts earlier.
func holdStart(w []byte) int {
	_, h, n := runs(w)
	return min(h, numberFrom(w, n))
}

// runs looks at w in one pass: which classes its bytes are of (seen; a
// byte of clStarter is one a match needs, see mayStart), and where its
// trailing runs begin — of address or key characters (h), and of number
// characters and separators (n). A run that reaches 0 may go on in what
// came before w.
func runs(w []byte) (seen uint16, h, n int) {
	for i, c := range w {
		k := class[c]
		seen |= k
		if k&clHeldA == 0 {
			h = i + 1
		}
		if k&clHeldN == 0 {
			n = i + 1
		}
	}
	return seen, h, n
}

// plain says w has no byte of clNotPlain (RedactPlain).
func plain(w []byte) bool {
	for _, c := range w {
		if class[c]&clNotPlain != 0 {
			return false
		}
	}
	return true
}

// numberFrom returns where a number may begin in the run from n: a run of
// separators alone starts none, and neither does a byte inside a
// character.
func numberFrom(w []byte, n int) int {
	for n < len(w) && !numberStart(w, n) {
		n++
	}
	return n
}

// numberStart says whether a number may start at w[i]: a digit, '+' or '('.
func numberStart(w []byte, i int) bool {
	if c := w[i]; c == '+' || c == '(' {
		return true
	}
	_, size := digitAt(w, i)
	return size > 0
}

// mayStart is the fast path of the common token, which holds no byte a
// match needs.
func mayStart(w []byte) bool {
	for _, c := range w {
		if class[c]&clStarter != 0 {
			return true
		}
	}
	return false
}

// scan appends the matches in w, in order and without overlaps. prev is the
// byte before w (0 at the start of the stream).
func scan(ms []match, w []byte, prev byte) []match {
	if !mayStart(w) {
		return ms
	}
	before := func(i int) byte {
		if i == 0 {
			return prev
		}
		return w[i-1]
	}
	for i := 0; i < len(w); {
		c := w[i]
		// Addresses first: their local part may start with digits or "sk-".
		if isLocal(c) {
			if s, e := emailAt(w, i, prev); e > 0 {
				ms = append(ms, match{s, e, Email})
				i = e
				continue
			}
		}
		if c == 's' && !isKey(before(i)) {
			if e := keyEnd(w, i); e > 0 {
				ms = append(ms, match{i, e, APIKey})
				i = e
				continue
			}
		}
		if numberStart(w, i) && !isAlnum(before(i)) {
			e, k, ok := numberRun(w, i)
			if ok {
				ms = append(ms, match{i, e, k})
				i = e
				continue
			}
			// Not a number, and never re-read in parts; but its last
			// digits may begin an address ("call 555 123@x.io").
			a := e
			for a > i && isLocal(w[a-1]) {
				a--
			}
			if a > i {
				if s, end := emailAt(w, a, prev); end > 0 {
					ms = append(ms, match{s, end, Email})
					i = end
					continue
				}
			}
			i = max(e, i+1)
			continue
		}
		i++
	}
	return ms
}

// keyEnd matches sk- followed by at least 20 key characters.
func keyEnd(w []byte, i int) int {
	if !bytes.HasPrefix(w[i:], []byte("sk-")) {
		return 0
	}
	e := i + 3
	for e < len(w) && isKey(w[e]) {
		e++
	}
	if e-i-3 < 20 {
		return 0
	}
	return e
}

// emailAt matches an address whose local part starts at i, if the run of
// local characters from i reaches an '@'. Only the run's first position
// can start one, so later positions of the same run return quickly.
func emailAt(w []byte, i int, prev byte) (int, int) {
	if i > 0 && isLocal(w[i-1]) || i == 0 && isLocal(prev) {
		return 0, 0
	}
	at := i
	for at < len(w) && isLocal(w[at]) {
		at++
	}
	if at >= len(w) || w[at] != '@' || at-i > 64 {
		return 0, 0
	}
	// A local part starts with a letter, digit or underscore, never with
	// punctuation: ".@x.io" is not an address.
	for i < at && !isAlnum(w[i]) && w[i] != '_' {
		i++
	}
	if i == at || at+1 < len(w) && !isAlnum(w[at+1]) {
		return 0, 0
	}
	e := at + 1
	for e < len(w) && isDomain(w[e]) {
		e++
	}
	for e > at+1 && (w[e-1] == '.' || w[e-1] == '-') {
		e--
	}
	dom := w[at+1 : e]
	dot := bytes.LastIndexByte(dom, '.')
	if dot <= 0 || len(dom)-dot-1 < 2 {
		return 0, 0
	}
	for _, c := range dom[dot+1:] {
		if isDigit(c) || c == '-' {
			return 0, 0
		}
	}
	return i, e
}

// numberRun reads the number that starts at i: digits with at most two
// separators in a row, so "+1 (555) 123-4567" is one. end is past its last
// digit; the run is judged whole (a phone of 10–15 digits, or a Luhn-valid
// card of 13–19), never in parts, so a long order number is not mistaken
// for a phone inside it. ok is false when it is neither.
func numberRun(w []byte, i int) (end int, kind Kind, ok bool) {
	digits, seps := 0, 0
	groupEnd, groupDigits := 0, 0 // the run up to its last separator
	var buf [19]byte
	j := i
	if w[j] == '+' {
		j++
	}
	for j < len(w) {
		if d, size := digitAt(w, j); size > 0 {
			if digits < len(buf) {
				buf[digits] = d
			}
			digits++
			seps = 0
			j += size
			end = j
			continue
		}
		if !isNumSep(w[j]) || seps == 2 {
			break
		}
		if seps == 0 {
			groupEnd, groupDigits = end, digits
		}
		seps++
		j++
	}
	if end == 0 {
		return i + 1, 0, false
	}
	if end < len(w) && (isAlnum(w[end]) || w[end] == '@' || w[end] == '_' || w[end] == '%') {
		// The last group is glued to a word or an address ("555 123 4567
		// 5a@x.io"): it belongs to that, not to the number.
		if groupEnd == 0 {
			return end, 0, false
		}
		end, digits = groupEnd, groupDigits
	}
	switch {
	case digits >= 13 && digits <= 19 && luhn(buf[:digits]):
		return end, Card, true
	case digits >= 10 && digits <= 15:
		return end, Phone, true
	}
	return end, 0, false
}

// luhn reports whether the digits pass the Luhn checksum every card number
// carries; it keeps order numbers and timestamps from being called cards.
func luhn(d []byte) bool {
	sum, double := 0, false
	for i := len(d) - 1; i >= 0; i-- {
		n := int(d[i] - '0')
		if double {
			n *= 2
			if n > 9 {
				n -= 9
			}
		}
		sum += n
		double = !double
	}
	return sum%10 == 0
}

// Joined is the redaction of a string a client joins across chunks but
// shows as a value, such as a tool call's name: each piece goes out whole,
// redacted on its own, never held back (a held-back name would reach the
// client empty, and late). What it keeps is the tail of what went out, at
// most MaxHold bytes, to tell when a piece completes PII that began in an
// earlier one, which no redaction of the piece alone can take back. The
// zero value is ready to use.
type Joined struct {
	tail []byte
}

// Spans says whether text, joined after what went before, completes a
// match that starts before it; if not, text is added to the tail.
func (j *Joined) Spans(text []byte) bool {
	joined := append(j.tail, text...)
	for _, m := range scan(nil, joined, 0) {
		if m.start < len(j.tail) && m.end > len(j.tail) {
			return true
		}
	}
	if len(joined) > MaxHold {
		joined = append(joined[:0], joined[len(joined)-MaxHold:]...)
	}
	j.tail = joined
	return false
}
