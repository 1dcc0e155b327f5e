// Package transcript holds the two audit-transcript builders from the incident
// write-up: the one shipped in March (Baseline) and its fix (Fixed).
//
// Both are fed one SSE line at a time, so the gateway can build the transcript
// inside its per-event forwarding loop, where the cost lands in the stream's
// wall-clock exactly as it did in the incident. The names are chosen to read
// well in `go tool pprof -top`: the baseline's garbage shows up under
// (*Baseline).Append.
package transcript

import (
	"regexp"
	"strings"
	"unsafe"
)

// Transcript accumulates the audit transcript of one stream.
//
// Append must copy whatever it keeps: the gateway passes a view of its reused
// read buffer, not a fresh string, so that the fixed build allocates nothing
// per event.
type Transcript interface {
	Append(event string)
	String() string
}

// AppendLine feeds t one line from a reused read buffer without copying it
// into a string first: Transcript implementations copy what they keep, so a
// per-event allocation here would only add garbage the write-up's gateway
// never made.
func AppendLine(t Transcript, line []byte) {
	if len(line) == 0 {
		t.Append("")
		return
	}
	t.Append(unsafe.String(&line[0], len(line)))
}

// eventRE is the write-up's pattern, verbatim. Payloads outside 24–96
// characters do not match, which is why the lab's traffic keeps to that range.
var eventRE = regexp.MustCompile(`^data: (.{24,96})$`)

// Baseline is the March code: a regexp per event and a string that grows by
// concatenation, copying everything appended so far on every event (O(n²)).
type Baseline struct {
	out string
}

// Append parses one event the way the incident's gateway did.
func (t *Baseline) Append(e string) {
	m := eventRE.FindStringSubmatch(e)
	if len(m) == 2 {
		t.out += m[1] + " "
	}
}

func (t *Baseline) String() string { return t.out }

// AvgEventBytes sizes Fixed's up-front buffer. The write-up grew by 48 bytes
// an event, but its own synthetic events average ~61 bytes, so its builder
// still grew once; the gateway's chunks are longer still (an id, an object
// name: 87 bytes an event in the lab's transcripts, ~76 in the benchmark's),
// and a builder that outgrows its buffer copies it whole, so 96.
const AvgEventBytes = 96

// Fixed is the write-up's fix: a prefix check instead of the regexp, and one
// pre-grown builder instead of +=.
type Fixed struct {
	b strings.Builder
}

// MaxGrowBytes caps what NewFixed reserves. The hint is the client's
// max_tokens, so without a cap one request could reserve 96 MiB before a
// byte streamed; past the cap the builder grows with what arrives. 1 MiB
// (10,922 events) keeps ordinary streams, hundreds to a few thousand
// events, at one allocation.
const MaxGrowBytes = 1 << 20

// NewFixed returns a Fixed grown for about events events, at most
// MaxGrowBytes.
func NewFixed(events int) *Fixed {
	t := &Fixed{}
	if events > 0 {
		t.b.Grow(min(events, MaxGrowBytes/AvgEventBytes) * AvgEventBytes)
	}
	return t
}

// Append adds the payload of one `data: ` line.
func (t *Fixed) Append(e string) {
	if strings.HasPrefix(e, "data: ") {
		t.b.WriteString(e[6:])
		t.b.WriteByte(' ')
	}
}

func (t *Fixed) String() string { return t.b.String() }

// ParseStreamBaseline is the write-up's parseStreamBaseline over a whole stream.
func ParseStreamBaseline(events []string) string {
	var t Baseline
	for _, e := range events {
		t.Append(e)
	}
	return t.String()
}

// ParseStreamFixed is the write-up's parseStreamFixed over a whole stream.
func ParseStreamFixed(events []string) string {
	t := NewFixed(len(events))
	for _, e := range events {
		t.Append(e)
	}
	return t.String()
}
