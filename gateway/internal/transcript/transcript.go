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
	"bytes"
	"encoding/binary"
	"regexp"
	"strings"
	"sync"
	"unsafe"

	"burnlab/gateway/internal/wordcopy"
)

// Transcript accumulates the audit transcript of one stream.
//
// Append takes one line, which holds no CR or LF (they end lines), and
// must copy whatever it keeps: the gateway passes a view of its reused
// read buffer, not a fresh string, so that the fixed build allocates nothing
// per event. Release gives back what the transcript holds when its stream
// has ended; the transcript is not used after it.
type Transcript interface {
	Append(event string)
	Len() int
	String() string
	Release()
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

// Len is the transcript's length in bytes.
func (t *Baseline) Len() int { return len(t.out) }

// Release lets the garbage collector have the string.
func (t *Baseline) Release() { t.out = "" }

// AvgEventBytes sizes ParseStreamFixed's up-front buffer. The write-up grew
// by 48 bytes an event, but its own synthetic events average ~61 bytes, so
// its builder still grew once, and a builder that outgrows its buffer
// copies it whole, so 96.
const AvgEventBytes = 96

// BlockBytes is the size of the blocks Fixed keeps a transcript in: a
// page, so a short stream holds a few kilobytes, and the last block's
// unused tail is at most that.
const BlockBytes = 4 << 10

type block = [BlockBytes]byte

// inlineBlocks is how many blocks a Fixed tracks without allocating: 64
// KiB of transcript, about 750 of the lab's events, more than an ordinary
// stream keeps.
const inlineBlocks = 16

// Fixed is the gateway's fixed transcript: the write-up's prefix check
// instead of the regexp, and instead of +=, fixed-size blocks filled in
// turn, so nothing kept is ever copied again. The write-up pre-grew one
// builder for the whole stream instead; sized from the request's
// max_tokens, that reserved up to a megabyte before a byte streamed, and a
// stream longer than the reservation copied the builder whole each time it
// grew (make scaling measured bytes per stream growing as n^1.19 from
// 1,000 to 16,000 events). Blocks hold what arrived, and cost grows with
// it linearly.
//
// A forwarding loop that builds a run of lines from one shape's head and
// tail (a chunk's bytes around its text, the same in every chunk of the
// run) says so (AppendSplit), and Fixed keeps that shape's ends once and
// then only what lies between them: about a tenth of the bytes of the
// lab's chunks, in memory and in copying.
//
// A stream makes 1 allocation (the Fixed), plus one each time its list of
// blocks doubles past inlineBlocks, plus each block its Pool could not
// lend: none for an ordinary stream once the gateway is warm.
type Fixed struct {
	pool   *Pool
	inline [inlineBlocks]*block
	blocks []*block // inline's, until it is full
	last   int      // bytes used in the last block
	n      int      // the transcript's length, what String returns
	// shape is the number of the shape last kept by AppendSplit, head and
	// tail the lengths of its ends, and shaped says one was.
	shape      uint64
	head, tail int
	shaped     bool
}

// What the blocks hold: payloads, each followed by a space, as String
// returns them, and between them records that start with a byte no line
// holds (a line ends at CR or LF), each with lengths as uvarints:
//   - markShape, the ends of a shape: the head's length and bytes, then
//     the tail's;
//   - markMiddle, a payload of the last shape: its middle's length and
//     bytes, stored without the ends.
const (
	markShape  = '\r'
	markMiddle = '\n'
)

// Pool lends Fixed transcripts their blocks and takes them back on Release,
// so a gateway's blocks are reused across streams. The zero Pool is ready.
type Pool struct{ p sync.Pool }

// NewFixed returns an empty transcript whose blocks come from pool; with a
// nil pool each block is allocated and left to the garbage collector.
func NewFixed(pool *Pool) *Fixed {
	t := &Fixed{pool: pool}
	t.blocks = t.inline[:0]
	return t
}

// Append adds the payload of one `data: ` line. A line holds no CR or LF.
func (t *Fixed) Append(e string) {
	if !strings.HasPrefix(e, "data: ") {
		return
	}
	p := e[6:]
	// The common payload fits in the last block with its space: one copy
	// and one store, where write would make two calls and two copies.
	if n := len(t.blocks); n > 0 && t.last+len(p) < BlockBytes {
		b := t.blocks[n-1]
		copy(b[t.last:], p)
		b[t.last+len(p)] = ' '
		t.last += len(p) + 1
		t.n += len(p) + 1
		return
	}
	t.write(p)
	t.write(" ")
	t.n += len(p) + 1
}

// AppendSplit adds the payload of one `data: ` line, as Append does, given
// that its first head bytes and its last tail bytes are the ends of shape
// number shape: lines given the same number (not 0) have the same ends, as
// the chunks of one shape have for the gateway's scanner. When shape is the
// last split line's, only the middle is kept again. The number spares a
// comparison of the ends, which cost as much as copying them; a line whose
// split points do not fit it is kept whole.
func (t *Fixed) AppendSplit(line []byte, head, tail int, shape uint64) {
	// The common line: one of the shape kept last, whose ends were checked
	// with the shape's first line.
	if shape != 0 && shape == t.shape && head-len(dataPrefix) == t.head && tail == t.tail && head+tail <= len(line) {
		t.record(markMiddle, line[head:len(line)-tail])
		t.n += len(line) - len(dataPrefix) + 1
		return
	}
	// The prefix is compared as a constant string: inline, no call.
	if head < len(dataPrefix) || tail < 0 || head+tail > len(line) || string(line[:len(dataPrefix)]) != "data: " {
		AppendLine(t, line)
		return
	}
	h, middle, tl := line[len(dataPrefix):head], line[head:len(line)-tail], line[len(line)-tail:]
	if shape == 0 || shape != t.shape || len(h) != t.head || len(tl) != t.tail {
		t.shape, t.head, t.tail, t.shaped = shape, len(h), len(tl), true
		t.record(markShape, h)
		var n [binary.MaxVarintLen64]byte
		t.writeBytes(n[:binary.PutUvarint(n[:], uint64(len(tl)))])
		t.writeBytes(tl)
	}
	t.record(markMiddle, middle)
	t.n += len(line) - len(dataPrefix) + 1
}

const dataPrefix = "data: "

// record writes a mark, the length of b and b. The common middle is
// shorter than 128 bytes, a length of one byte, and fits in the last
// block: two stores and one copy, no call.
func (t *Fixed) record(mark byte, b []byte) {
	if n := len(t.blocks); n > 0 && len(b) < 0x80 && t.last+2+len(b) <= BlockBytes {
		blk := t.blocks[n-1][:t.last+2]
		blk[t.last], blk[t.last+1] = mark, byte(len(b)) //nolint:gosec // G115: under 0x80, a uvarint of one byte
		wordcopy.Append(blk, b)                         // the block's spare room holds nothing
		t.last += 2 + len(b)
		return
	}
	var hdr [1 + binary.MaxVarintLen64]byte
	hdr[0] = mark
	t.writeBytes(hdr[:1+binary.PutUvarint(hdr[1:], uint64(len(b)))])
	t.writeBytes(b)
}

func (t *Fixed) writeBytes(b []byte) {
	if len(b) > 0 {
		t.write(unsafe.String(&b[0], len(b)))
	}
}

// write stores s in the blocks, opening blocks as they fill.
func (t *Fixed) write(s string) {
	for len(s) > 0 {
		if len(t.blocks) == 0 || t.last == BlockBytes {
			t.blocks = append(t.blocks, t.get())
			t.last = 0
		}
		c := copy(t.blocks[len(t.blocks)-1][t.last:], s)
		t.last += c
		s = s[c:]
	}
}

func (t *Fixed) get() *block {
	if t.pool != nil {
		if b, ok := t.pool.p.Get().(*block); ok {
			return b
		}
	}
	return new(block)
}

// Len is the transcript's length in bytes.
func (t *Fixed) Len() int { return t.n }

// String joins the blocks, each split line made whole again: one
// allocation of the transcript's length, and one of what the blocks hold
// when they hold split lines.
func (t *Fixed) String() string {
	var b strings.Builder
	b.Grow(t.n)
	if !t.shaped {
		for i := range t.blocks {
			b.Write(t.stored(i))
		}
		return b.String()
	}
	enc := make([]byte, 0, (len(t.blocks)-1)*BlockBytes+t.last)
	for i := range t.blocks {
		enc = append(enc, t.stored(i)...)
	}
	var head, tail []byte
	for len(enc) > 0 {
		i := bytes.IndexAny(enc, "\r\n")
		if i < 0 {
			b.Write(enc)
			break
		}
		b.Write(enc[:i])
		mark := enc[i]
		enc = enc[i+1:]
		var field []byte
		if field, enc = lengthPrefixed(enc); mark == markShape {
			head = field
			tail, enc = lengthPrefixed(enc)
			continue
		}
		b.Write(head)
		b.Write(field)
		b.Write(tail)
		b.WriteByte(' ')
	}
	return b.String()
}

// stored is what the i-th block holds.
func (t *Fixed) stored(i int) []byte {
	if i == len(t.blocks)-1 {
		return t.blocks[i][:t.last]
	}
	return t.blocks[i][:]
}

// lengthPrefixed splits a uvarint length and that many bytes off b. Fixed
// wrote b, so it is whole; were it not, what is there is returned.
func lengthPrefixed(b []byte) (field, rest []byte) {
	n, w := binary.Uvarint(b)
	if w <= 0 {
		return nil, nil
	}
	b = b[w:]
	n = min(n, uint64(len(b)))
	return b[:n], b[n:]
}

// Release gives the blocks back to the pool and empties the transcript.
func (t *Fixed) Release() {
	for i, b := range t.blocks {
		if t.pool != nil {
			t.pool.p.Put(b)
		}
		t.blocks[i] = nil
	}
	t.inline = [inlineBlocks]*block{}
	t.blocks, t.last, t.n = t.inline[:0], 0, 0
	t.shape, t.head, t.tail, t.shaped = 0, 0, 0, false
}

// ParseStreamBaseline is the write-up's parseStreamBaseline over a whole stream.
func ParseStreamBaseline(events []string) string {
	var t Baseline
	for _, e := range events {
		t.Append(e)
	}
	return t.String()
}

// ParseStreamFixed is the write-up's parseStreamFixed over a whole stream:
// one builder grown up front (by AvgEventBytes an event, not its 48), then
// a prefix check and a copy per event.
func ParseStreamFixed(events []string) string {
	var b strings.Builder
	b.Grow(len(events) * AvgEventBytes)
	for _, e := range events {
		if strings.HasPrefix(e, "data: ") {
			b.WriteString(e[6:])
			b.WriteByte(' ')
		}
	}
	return b.String()
}
