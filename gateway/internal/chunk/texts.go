// Package chunk finds the texts of an OpenAI chat-completion chunk without
// decoding the whole JSON document into values: encoding/json per event
// costs 13–27x a plain reverse proxy, while the gateway only needs the
// strings it counts and redacts.
package chunk

import (
	"bytes"
	"errors"
	"hash/maphash"
	"slices"
	"unicode/utf8"

	"burnlab/shared/openai"
)

// Field is a kind of text a client shows or acts on.
type Field uint8

// The fields that carry model text. Every string under one of these keys
// anywhere in a chunk is text: a client reads it, so it is redacted.
const (
	Content   Field = iota // choices[].delta.content (and message.content)
	Refusal                // choices[].delta.refusal
	Reasoning              // reasoning_content, reasoning
	Arguments              // tool_calls[].function.arguments, function_call.arguments
	Text                   // choices[].text (completions) and content parts' text

	// The strings of a choice that are no model text but that a client
	// joins across chunks all the same: the official SDKs' stream helpers
	// (openai-python's accumulate_delta) concatenate every string of a
	// delta but its "type", so an address split across two chunks' tool
	// name reads whole once joined.
	Role  // delta.role
	Name  // a tool call's function.name, function_call.name
	ID    // a tool call's id
	Other // any other string member of a choice; Key.Name tells them apart

	// finishReason marks a metadata span: the value of finish_reason.
	finishReason Field = 255
)

// Generated says whether f is model text, whose pieces are the tokens a
// stream is charged for; a role, a name or an id is not.
func (f Field) Generated() bool { return f <= Text }

var fieldKeys = [...]struct {
	key   string
	field Field
}{
	{"content", Content}, {"refusal", Refusal}, {"reasoning_content", Reasoning}, {"reasoning", Reasoning},
	{"arguments", Arguments}, {"text", Text},
}

// Key names one text stream of a response: which choice, which tool call
// (-1 for none) and which field. Its pieces arrive over many chunks, so
// redaction state is kept per Key.
type Key struct {
	Choice, Tool int
	Field        Field
	// Name tells the streams of Other apart: a hash of the member's key,
	// folded to lower case (keyHash); 0 for every other field.
	Name uint64
}

// Span is one text string of a chunk: the bounds of the quoted JSON string,
// quotes included, and the stream it belongs to. Escaped is false for a
// string with no backslash, whose text is its bytes between the quotes.
type Span struct {
	Start, End int
	Key        Key
	Escaped    bool
}

// Limits of what a chunk may hold; past them it is not an ordinary chunk
// and Scan refuses it. MaxStrings bounds the other strings (Others) an
// ordinary chunk has a dozen of.
const (
	MaxDepth   = 32
	MaxSpans   = 64
	MaxStrings = 1024
)

// Errors of Scan.
var (
	ErrSyntax  = errors.New("chunk: not a JSON document")
	ErrTooDeep = errors.New("chunk: nested deeper than MaxDepth")
	ErrTooMany = errors.New("chunk: more than MaxSpans text strings")
	// ErrTooManyStrings is a chunk with more than MaxStrings strings
	// besides its texts, each of which a client may read.
	ErrTooManyStrings = errors.New("chunk: more than MaxStrings strings besides its texts")
	ErrBadIndex       = errors.New("chunk: an index that is not a small non-negative integer")
	// ErrBadUTF8 is a string that is not UTF-8: a client would decode
	// U+FFFD for it, so the caller repairs the chunk and scans it again.
	ErrBadUTF8 = errors.New("chunk: invalid UTF-8 in a string")
	// ErrUnredactable is a choice carrying text in a form no redactor
	// reads: log probabilities (every token again, as strings and as byte
	// arrays) or audio. The gateway refuses requests that ask for them.
	ErrUnredactable = errors.New("chunk: log probabilities or audio, which cannot be redacted")
	// ErrNotString is a number or a boolean where the schema has a
	// string (a text, a role, a name, an id). A client that joins
	// text += delta.content, or an SDK model that does not validate,
	// shows it as text, and a number is no string the redactor reads.
	ErrNotString = errors.New("chunk: a number or a boolean where the schema has a string")
)

// Scanner finds the text strings of chat-completion chunks. It validates
// the whole document on the way, so a chunk it accepts is JSON and UTF-8
// (outside strings JSON is ASCII, and strings are checked as they are
// scanned, so the caller need not pass over the bytes first), and keys
// are compared after unescaping: "con\u0074ent" is content to a client, so
// it is content here. A Scanner reuses its buffers; its zero value is ready.
type Scanner struct {
	p     []byte
	spans []Span
	// Per element of a choices or tool_calls array, in order of
	// appearance: its "index" value, or -1 until one is seen.
	choices, tools []int
	key            []byte

	// The last chunk with exactly one text, around it. A provider sends
	// almost every chunk of a stream in one shape: same id, same choice,
	// same field, only the text differs. A chunk made of the same bytes
	// around one JSON string parses the same way — the bytes before it
	// leave the parser in the same place, the bytes after it take it to
	// the same end — so it needs no walk.
	head, tail []byte
	shaped     bool
	// gen counts full walks; hit says the last Scan took the shortcut.
	gen uint64
	hit bool

	// meta are the values a chunk says once per stream, or once per
	// choice: finish_reason, usage, and a tool call's type.
	// finished are the choices whose finish_reason is not null, in this
	// chunk (one in the shape has those of the walk that set it).
	meta     []Span
	finished []int
	// others are the chunk's strings that are not texts: keys, ids, an
	// error's message, anything a provider adds. A client can read them
	// as well, so they are redacted too, each on its own.
	others []Span
	// notString says the walk met a number or a boolean where the
	// schema has a string (ErrNotString).
	notString bool
}

// Others returns the strings of the last chunk walked in full (not one
// taken by the shortcut, whose others are those of the walk) that are not
// texts, keys included, in document order: Start and End bound each quoted
// string, Escaped says it has a backslash. Their Key is zero.
func (s *Scanner) Others() []Span { return s.others }

// Meta returns the metadata values of the last chunk walked in full (not
// one taken by the shortcut): Start and End bound each value, Key.Choice
// and Key.Tool say whose it is.
func (s *Scanner) Meta() []Span { return s.meta }

// Finished says whether the last chunk scanned ends choice: it carries a
// finish_reason for it other than null.
func (s *Scanner) Finished(choice int) bool { return slices.Contains(s.finished, choice) }

// Finishing says whether the last chunk scanned ends any choice.
func (s *Scanner) Finishing() bool { return len(s.finished) > 0 }

// Shape says whether the last Scan found its chunk in the shape of the
// last walked one, and which walk that was: two chunks with the same gen
// and hit both true have the same bytes outside their one text.
func (s *Scanner) Shape() (gen uint64, hit bool) { return s.gen, s.hit }

// element roles: where in a chunk a value sits.
type role uint8

const (
	roleOther     role = iota
	roleTop            // the document
	roleChoices        // the choices array
	roleChoice         // one element of choices
	roleToolCalls      // a tool_calls array inside a choice
	roleTool           // one element of tool_calls
	roleParts          // a content array, whose elements must be objects (parts)
)

// where is the context of a value: its role and the choice and tool
// elements (ordinals into Scanner.choices and .tools; -1 for none) it is in.
type where struct {
	role         role
	choice, tool int
}

// Scan returns the text strings of payload in document order. The slice is
// the Scanner's, valid until the next Scan.
func (s *Scanner) Scan(payload []byte) ([]Span, error) {
	if s.shaped && s.sameShape(payload) {
		s.hit = true
		return s.spans, nil
	}
	s.gen, s.hit, s.shaped = s.gen+1, false, false
	s.p, s.spans, s.choices, s.tools = payload, s.spans[:0], s.choices[:0], s.tools[:0]
	s.meta, s.finished, s.others, s.notString = s.meta[:0], s.finished[:0], s.others[:0], false
	i, err := s.value(skipSpace(payload, 0), 0, where{role: roleTop, choice: -1, tool: -1})
	switch {
	case err == nil && skipSpace(payload, i) != len(payload):
		err = ErrSyntax
	case err == nil && s.notString:
		err = ErrNotString
	}
	if err != nil {
		s.p = nil
		return nil, err
	}
	// An element's "index" may come after its text: resolve keys last. An
	// element without one is known by its position, as a client would.
	for k := range s.spans {
		sp := &s.spans[k]
		if c := sp.Key.Choice; c >= 0 {
			sp.Key.Choice = orPosition(s.choices[c], c)
		}
		if t := sp.Key.Tool; t >= 0 {
			sp.Key.Tool = orPosition(s.tools[t], t)
		}
	}
	for k := range s.meta {
		m := &s.meta[k]
		if c := m.Key.Choice; c >= 0 {
			m.Key.Choice = orPosition(s.choices[c], c)
		}
		if t := m.Key.Tool; t >= 0 {
			m.Key.Tool = orPosition(s.tools[t], t)
		}
		if m.Key.Field == finishReason && !bytes.HasPrefix(payload[m.Start:m.End], []byte("null")) {
			s.finished = append(s.finished, m.Key.Choice)
		}
	}
	if s.shaped = len(s.spans) == 1; s.shaped {
		sp := s.spans[0]
		s.head = append(s.head[:0], payload[:sp.Start]...)
		s.tail = append(s.tail[:0], payload[sp.End:]...)
	}
	s.p = nil // the caller's: not kept past the walk
	return s.spans, nil
}

// Shrink lets go of the buffers that one large chunk grew past keep bytes,
// so a stream keeps what an ordinary chunk needs, not its largest one; the
// shape goes with its head and tail, and the next chunk is walked in full.
func (s *Scanner) Shrink(keep int) {
	const spanBytes, intBytes = 40, 8
	if cap(s.head)+cap(s.tail) > keep {
		s.head, s.tail, s.shaped = nil, nil, false
	}
	if (cap(s.choices)+cap(s.tools))*intBytes > keep {
		s.choices, s.tools = nil, nil
	}
	if (cap(s.spans)+cap(s.meta)+cap(s.others))*spanBytes > keep {
		s.spans, s.meta, s.others, s.shaped = nil, nil, nil, false
	}
	if cap(s.key) > keep {
		s.key = nil
	}
}

// sameShape takes a payload in the last walked chunk's shape: its spans
// and finished choices are the walk's, all but where its one text ends and
// whether that has escapes, set in s.spans[0].
func (s *Scanner) sameShape(payload []byte) bool {
	start, end := len(s.head), len(payload)-len(s.tail)
	if end-start < 2 || payload[start] != '"' || payload[end-1] != '"' ||
		!bytes.Equal(payload[:start], s.head) || !bytes.Equal(payload[end:], s.tail) {
		return false
	}
	escaped := false
	// Most tokens are plain ASCII: no byte of theirs needs a closer look.
	if !plain(payload[start+1 : end-1]) {
		e, esc, err := stringEndChecked(payload, start)
		if err != nil || e != end {
			return false
		}
		escaped = esc
	}
	s.spans[0].End, s.spans[0].Escaped = end, escaped
	return true
}

func orPosition(index, ordinal int) int {
	if index >= 0 {
		return index
	}
	return ordinal
}

// value parses the value at p[i] and returns the index just past it.
func (s *Scanner) value(i, depth int, at where) (int, error) {
	if i >= len(s.p) {
		return 0, ErrSyntax
	}
	switch c := s.p[i]; {
	case c == '{':
		return s.object(i, depth+1, at)
	case c == '[':
		return s.array(i, depth+1, at)
	case c == '"':
		end, escaped, err := stringEndChecked(s.p, i)
		if err != nil {
			return 0, err
		}
		return end, s.other(i, end, escaped)
	case c == 't':
		return literal(s.p, i, "true")
	case c == 'f':
		return literal(s.p, i, "false")
	case c == 'n':
		return literal(s.p, i, "null")
	case c == '-' || '0' <= c && c <= '9':
		return number(s.p, i)
	}
	return 0, ErrSyntax
}

func (s *Scanner) object(i, depth int, at where) (int, error) {
	if depth > MaxDepth {
		return 0, ErrTooDeep
	}
	i = skipSpace(s.p, i+1)
	if i < len(s.p) && s.p[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(s.p) || s.p[i] != '"' {
			return 0, ErrSyntax
		}
		kEnd, escaped, err := stringEndChecked(s.p, i)
		if err != nil {
			return 0, err
		}
		if err := s.other(i, kEnd, escaped); err != nil {
			return 0, err
		}
		key, err := s.unquoteKey(s.p[i:kEnd], escaped)
		if err != nil {
			return 0, err
		}
		i = skipSpace(s.p, kEnd)
		if i >= len(s.p) || s.p[i] != ':' {
			return 0, ErrSyntax
		}
		i = skipSpace(s.p, i+1)
		if i, err = s.member(key, i, depth, at); err != nil {
			return 0, err
		}
		var done bool
		if i, done, err = s.after(i, '}'); err != nil || done {
			return i, err
		}
	}
}

// other records the string p[start:end] as one of the chunk's others.
func (s *Scanner) other(start, end int, escaped bool) error {
	if len(s.others) == MaxStrings {
		return ErrTooManyStrings
	}
	s.others = append(s.others, Span{Start: start, End: end, Escaped: escaped})
	return nil
}

// after reads past what follows a member or an element: a comma, and more
// follow, or the closing bracket, and the object or array is done.
func (s *Scanner) after(i int, closer byte) (next int, done bool, err error) {
	i = skipSpace(s.p, i)
	switch {
	case i >= len(s.p):
		return 0, false, ErrSyntax
	case s.p[i] == ',':
		return skipSpace(s.p, i+1), false, nil
	case s.p[i] == closer:
		return i + 1, true, nil
	}
	return 0, false, ErrSyntax
}

// member parses the value of key at p[i], inside an object at `at`.
func (s *Scanner) member(key []byte, i, depth int, at where) (int, error) {
	inner := where{role: roleOther, choice: at.choice, tool: at.tool}
	switch {
	case at.role == roleTop && is(key, "choices"):
		inner.role = roleChoices
	case at.choice >= 0 && is(key, "tool_calls"):
		inner.role = roleToolCalls
	case at.choice >= 0 && (is(key, "logprobs") || is(key, "audio")):
		if !bytes.HasPrefix(s.p[i:], []byte("null")) {
			return 0, ErrUnredactable
		}
	case at.role == roleChoice && is(key, "finish_reason"),
		at.role == roleTop && is(key, "usage"),
		at.role == roleTool && is(key, "type"):
		end, err := s.value(i, depth, inner)
		if err != nil {
			return 0, err
		}
		if len(s.meta) == MaxSpans {
			return 0, ErrTooMany
		}
		f := Field(0)
		if is(key, "finish_reason") {
			f = finishReason
		}
		s.meta = append(s.meta, Span{Start: i, End: end, Key: Key{Choice: at.choice, Tool: at.tool, Field: f}})
		return end, nil
	case (at.role == roleChoice || at.role == roleTool) && is(key, "index"):
		n, end, err := smallInt(s.p, i)
		if errors.Is(err, ErrSyntax) {
			// Not a number, but maybe JSON all the same ("0", {}): a
			// document a client decodes, with an index it cannot use.
			if _, err := s.value(i, depth, inner); err != nil {
				return 0, err
			}
			return 0, ErrBadIndex
		}
		if err != nil {
			return 0, err
		}
		if at.role == roleChoice {
			s.choices[at.choice] = n
		} else {
			s.tools[at.tool] = n
		}
		return end, nil
	}
	if i >= len(s.p) {
		return 0, ErrSyntax
	}
	k, ok := s.textKey(key, at)
	switch c := s.p[i]; {
	case !ok:
	case c == '"':
		end, escaped, err := stringEndChecked(s.p, i)
		if err != nil {
			return 0, err
		}
		if len(s.spans) == MaxSpans {
			return 0, ErrTooMany
		}
		s.spans = append(s.spans, Span{Start: i, End: end, Key: k, Escaped: escaped})
		return end, nil
	case k.Field != Other && (c == '-' || '0' <= c && c <= '9' || c == 't' || c == 'f'),
		k.Field != Other && k.Field != Content && k.Field != Text && (c == '[' || c == '{'):
		// Refused once the walk is done: a document that is no JSON
		// after all is data of another kind, forwarded as text. An array
		// is as bad as a number: text += ["kim@exa"] joins its elements.
		s.notString = true
	case (k.Field == Content || k.Field == Text) && c == '[':
		inner.role = roleParts
	}
	return s.value(i, depth, inner)
}

// textKey says whether a string member named key, inside an object at
// `at`, is a text, and of which stream. The model-text fields are texts
// anywhere in a chunk. Inside a choice so is every other string a client
// joins across chunks: a role, a tool call's name and id, and any member
// but "type", which the SDKs replace rather than join (it tells the
// members of a union apart).
func (s *Scanner) textKey(key []byte, at where) (Key, bool) {
	k := Key{Choice: at.choice, Tool: at.tool}
	var ok bool
	if k.Field, ok = textField(key); ok || at.choice < 0 {
		return k, ok
	}
	switch {
	case is(key, "type"):
		return k, false
	case is(key, "role"):
		k.Field = Role
	case is(key, "name"):
		k.Field = Name
	case is(key, "id"):
		k.Field = ID
	default:
		k.Field, k.Name = Other, keyHash(key)
	}
	return k, true
}

// keyHash names a member's stream: the hash of its key folded to lower
// case, as a Go client folds keys (is).
func keyHash(key []byte) uint64 {
	// Upper then lower, as EqualFold folds: "ſ" and "s" are one key.
	return maphash.Bytes(keySeed, bytes.ToLower(bytes.ToUpper(key))) | 1 // never 0, the known fields' Name
}

// keySeed is random per process, so no upstream can choose two member
// names that share a stream; it is one seed, so every scanner names a
// member alike.
var keySeed = maphash.MakeSeed()

func (s *Scanner) array(i, depth int, at where) (int, error) {
	if depth > MaxDepth {
		return 0, ErrTooDeep
	}
	i = skipSpace(s.p, i+1)
	if i < len(s.p) && s.p[i] == ']' {
		return i + 1, nil
	}
	for {
		elem := where{role: roleOther, choice: at.choice, tool: at.tool}
		switch at.role {
		case roleChoices:
			elem = where{role: roleChoice, choice: len(s.choices), tool: -1}
			s.choices = append(s.choices, -1)
		case roleToolCalls:
			elem = where{role: roleTool, choice: at.choice, tool: len(s.tools)}
			s.tools = append(s.tools, -1)
		case roleParts:
			// A part is an object; a string or a number among them is
			// text a client would join unredacted across chunks.
			s.notString = s.notString || s.p[i] != '{'
		}
		var err error
		if i, err = s.value(i, depth, elem); err != nil {
			return 0, err
		}
		var done bool
		if i, done, err = s.after(i, ']'); err != nil || done {
			return i, err
		}
	}
}

// is says whether key names name to a client. Go's encoding/json, which
// Go clients decode chunks with, matches keys without regard to case, so
// "Content" is content to them: the gateway folds case too, or PII split
// across two chunks under "Content" would be redacted piece by piece.
func is(key []byte, name string) bool {
	return bytes.EqualFold(key, []byte(name))
}

// unquoteKey returns a key's text: the raw bytes when it has no escape,
// which is every key an ordinary upstream sends.
func (s *Scanner) unquoteKey(q []byte, escaped bool) ([]byte, error) {
	if !escaped {
		return q[1 : len(q)-1], nil
	}
	var err error
	s.key, err = openai.AppendUnquote(s.key[:0], q)
	return s.key, err
}

func textField(key []byte) (Field, bool) {
	for _, f := range fieldKeys {
		if is(key, f.key) {
			return f.field, true
		}
	}
	return 0, false
}

// stringEndChecked is stringEnd that also refuses invalid escapes, so a
// document Scan accepts is one a client can decode.
func stringEndChecked(b []byte, i int) (end int, escaped bool, err error) {
	end, escaped, err = stringEnd(b, i)
	if err != nil {
		return 0, false, err
	}
	if escaped {
		var scratch [64]byte
		if _, err := openai.AppendUnquote(scratch[:0], b[i:end]); err != nil {
			return 0, false, err
		}
	}
	return end, escaped, nil
}

func literal(b []byte, i int, lit string) (int, error) {
	if !bytes.HasPrefix(b[i:], []byte(lit)) {
		return 0, ErrSyntax
	}
	return i + len(lit), nil
}

// number accepts JSON's number grammar.
func number(b []byte, i int) (int, error) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func() bool {
		start := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		return i > start
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		return 0, ErrSyntax
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return 0, ErrSyntax
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return 0, ErrSyntax
		}
	}
	return i, nil
}

// smallInt reads an "index": a non-negative integer below 2^20. Anything
// else would name a text stream no client could tell apart.
func smallInt(b []byte, i int) (int, int, error) {
	end, err := number(b, i)
	if err != nil {
		return 0, 0, err
	}
	n := 0
	for _, c := range b[i:end] {
		if c < '0' || c > '9' || n >= 1<<20 {
			return 0, 0, ErrBadIndex
		}
		n = n*10 + int(c-'0')
	}
	if n >= 1<<20 {
		return 0, 0, ErrBadIndex
	}
	return n, end, nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// special marks the bytes that end a run of plain string content: those a
// string may not hold raw, its quote and backslash, and the first bytes of
// multi-byte UTF-8, which are checked where they are met.
var special = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	for c := utf8.RuneSelf; c < 256; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// plain reports whether b, put between quotes, is a JSON string that
// needs no closer look: no control character, quote, backslash or byte of
// a multi-byte character, so no escape to decode and no UTF-8 to check.
func plain(b []byte) bool {
	for _, c := range b {
		if special[c] {
			return false
		}
	}
	return true
}

// stringEnd returns the index just past the closing quote of the string
// that opens at b[i], and whether it holds a backslash escape.
func stringEnd(b []byte, i int) (end int, escaped bool, err error) {
	for j := i + 1; j < len(b); j++ {
		for j < len(b) && !special[b[j]] {
			j++
		}
		if j == len(b) {
			break
		}
		switch c := b[j]; {
		case c == '"':
			return j + 1, escaped, nil
		case c == '\\':
			escaped = true
			if j++; j < len(b) && b[j] >= utf8.RuneSelf {
				return 0, false, openai.ErrBadString // no escape is one
			}
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(b[j:])
			if r == utf8.RuneError && size == 1 {
				return 0, false, ErrBadUTF8
			}
			j += size - 1
		default:
			return 0, false, openai.ErrBadString
		}
	}
	return 0, false, openai.ErrBadString
}
