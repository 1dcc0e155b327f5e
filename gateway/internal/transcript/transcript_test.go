package transcript

import (
	"fmt"
	"strings"
	"testing"
)

func events(n int) []string {
	es := make([]string, n)
	for i := range es {
		// 24–96 character payloads, the range the write-up's regexp accepts.
		es[i] = fmt.Sprintf(`data: {"i":%d,"tok":"%s"}`, i, strings.Repeat("x", 10+i%60))
	}
	return es
}

func TestBothParsersAgreeOnWriteUpTraffic(t *testing.T) {
	es := events(500)
	base, fixed := ParseStreamBaseline(es), ParseStreamFixed(es)
	if base != fixed {
		t.Fatalf("parsers disagree:\nbaseline %.120q\nfixed    %.120q", base, fixed)
	}
	if want := es[0][6:] + " "; !strings.HasPrefix(fixed, want) {
		t.Fatalf("transcript starts %.60q, want %q", fixed, want)
	}
}

func TestPayloadRules(t *testing.T) {
	cases := []struct {
		name, event     string
		baseline, fixed string
	}{
		{"in range", `data: {"tok":"abcdefghijklmnopqr"}`, `{"tok":"abcdefghijklmnopqr"} `, `{"tok":"abcdefghijklmnopqr"} `},
		// The regexp's 24–96 bound is part of the March code's behaviour.
		{"too short for the regexp", `data: {"t":"a"}`, "", `{"t":"a"} `},
		{"too long for the regexp", "data: " + strings.Repeat("y", 97), "", strings.Repeat("y", 97) + " "},
		{"not a data line", `event: {"tok":"abcdefghijklmnopqrstuvwxyz"}`, "", ""},
		{"comment", `: keep-alive ping with some padding text`, "", ""},
		{"done marker", "data: [DONE]", "", "[DONE] "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b Baseline
			b.Append(c.event)
			f := NewFixed(nil)
			f.Append(c.event)
			if b.String() != c.baseline {
				t.Errorf("baseline = %q, want %q", b.String(), c.baseline)
			}
			if f.String() != c.fixed {
				t.Errorf("fixed = %q, want %q", f.String(), c.fixed)
			}
		})
	}
}

// The gateway hands Append a view of a buffer it then overwrites; the
// transcript must not change with it.
func TestAppendCopiesItsInput(t *testing.T) {
	for _, tr := range []Transcript{&Baseline{}, NewFixed(nil)} {
		buf := []byte(`data: {"tok":"first event payload here"}`)
		tr.Append(string(buf[:]))
		AppendLine(tr, buf)
		copy(buf[6:], "XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX")
		want := `{"tok":"first event payload here"} {"tok":"first event payload here"} `
		if got := tr.String(); got != want {
			t.Errorf("%T kept a view of its input: %q", tr, got)
		}
	}
}

// gatewayLine is a data line of an OpenAI chunk as the gateway feeds it:
// 86 bytes of payload and the separator, the lab's 87 an event.
var gatewayLine = []byte(`data: {"id":"c4f1c","object":"chat.completion.chunk","choices":[{"delta":{"content":" t"}}]}`)

// Fixed's allocations are the stated number: the Fixed, each block, and
// each doubling of its list of blocks past the inline ones. Without a
// pool every block is new, so the count is exact; a pool only lends blocks
// (and may drop them at any collection, so the test does not count on it).
func TestFixedAllocatesWhatItStates(t *testing.T) {
	if len(gatewayLine)-len("data: ")+1 != 87 {
		t.Fatalf("the line carries %d bytes, not 87", len(gatewayLine)-len("data: ")+1)
	}
	for _, n := range []int{1, 400, 2000, 10000} {
		blocks := (n*87 + BlockBytes - 1) / BlockBytes
		growths := 0
		for c := inlineBlocks; c < blocks; c *= 2 {
			growths++
		}
		want := float64(1 + blocks + growths)
		stream := func(pool *Pool) func() {
			return func() {
				tr := NewFixed(pool)
				for range n {
					AppendLine(tr, gatewayLine)
				}
				if tr.Len() != n*87 {
					t.Fatalf("%d events: Len %d, want %d", n, tr.Len(), n*87)
				}
				tr.Release()
			}
		}
		if got := testing.AllocsPerRun(5, stream(nil)); got != want {
			t.Errorf("%d events without a pool: %.0f allocations, want %.0f (1 Fixed, %d blocks, %d growths of the list)", n, got, want, blocks, growths)
		}
		var pool Pool
		if got := testing.AllocsPerRun(5, stream(&pool)); got > want {
			t.Errorf("%d events with a pool: %.0f allocations, more than the %.0f without one", n, got, want)
		}
	}
}

// A payload that ends a byte short of its block's end, at it, or past it:
// its space goes in the same block, opens the next, or follows the payload
// into it, and the text is the same.
func TestFixedAtTheEndOfABlock(t *testing.T) {
	for _, d := range []int{-2, -1, 0, 1, 2} {
		tr := NewFixed(nil)
		filler := strings.Repeat("f", BlockBytes-101) // with its space, 100 bytes short of the block's end
		payload := strings.Repeat("p", 100+d)
		tr.Append("data: " + filler)
		tr.Append("data: " + payload)
		tr.Append("data: next")
		if want := filler + " " + payload + " next "; tr.String() != want || tr.Len() != len(want) {
			t.Errorf("payload ending %d bytes past the block: %d bytes kept, want %d, or the text differs", d, tr.Len(), len(want))
		}
	}
}

// What a Fixed holds follows what arrived, not what the request may ask
// for, and Release empties it for reuse.
func TestFixedHoldsWhatArrived(t *testing.T) {
	var pool Pool
	tr := NewFixed(&pool)
	var want strings.Builder
	for i := range 3000 {
		line := fmt.Sprintf("data: event %d of a stream whose blocks fill in turn", i)
		AppendLine(tr, []byte(line))
		want.WriteString(line[6:] + " ")
	}
	if tr.String() != want.String() || tr.Len() != want.Len() {
		t.Fatalf("3000 events across blocks: %d bytes kept, want %d, or the text differs", tr.Len(), want.Len())
	}
	if held := len(tr.blocks) * BlockBytes; held >= tr.Len()+BlockBytes {
		t.Errorf("%d bytes kept in %d blocks: more than one block's slack", tr.Len(), len(tr.blocks))
	}
	tr.Release()
	if tr.Len() != 0 || tr.String() != "" || len(tr.blocks) != 0 || tr.inline != [inlineBlocks]*block{} {
		t.Errorf("after Release: %d bytes, %d blocks: want an empty transcript holding no block", tr.Len(), len(tr.blocks))
	}
	AppendLine(tr, []byte("data: again"))
	if tr.String() != "again " {
		t.Errorf("reused after Release: %q, want %q", tr.String(), "again ")
	}
}

func TestFixedAllocatesOnceWhenSized(t *testing.T) {
	es := events(1000)
	allocs := testing.AllocsPerRun(20, func() { ParseStreamFixed(es) })
	if allocs > 2 {
		t.Fatalf("fixed parser allocates %.0f times per stream, want ≤ 2", allocs)
	}
}

func benchmarkParser(b *testing.B, parse func([]string) string, n int) {
	es := events(n)
	b.ReportAllocs()
	for b.Loop() {
		parse(es)
	}
}

func BenchmarkParse(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("baseline/events=%d", n), func(b *testing.B) { benchmarkParser(b, ParseStreamBaseline, n) })
		b.Run(fmt.Sprintf("fixed/events=%d", n), func(b *testing.B) { benchmarkParser(b, ParseStreamFixed, n) })
	}
}

// A split line is kept as the whole line would be: the shape's ends once,
// then middles, across blocks, between whole lines, with ends that change
// and split points that do not fit the line.
func TestAppendSplitKeepsWhatAppendWould(t *testing.T) {
	var lines []string
	split, whole := NewFixed(nil), NewFixed(nil)
	// At most what the blocks should hold: each middle with its mark and
	// length, each whole line, and each shape's ends (a few).
	bound := 0
	shape := uint64(1)
	add := func(line string, head, tail int) {
		lines = append(lines, line)
		if head+tail <= len(line) && head > 0 {
			bound += len(line) - head - tail + 3
		} else {
			bound += len(line)
		}
		split.AppendSplit([]byte(line), head, tail, shape)
		AppendLine(whole, []byte(line))
	}
	head, tail := `data: {"choices":[{"delta":{"content":"`, `"}}]}`
	for i := range 3000 { // ~50 bytes of middles a line: ~40 blocks' worth whole
		tok := strings.Repeat("y", i%97)
		add(head+tok+tail, len(head), len(tail))
		switch i % 500 {
		case 7:
			add(`data: {"other":1}`, 0, 0) // whole, between split lines
			add("event: x", 0, 0)          // no data line: kept by neither
		case 11:
			head = fmt.Sprintf(`data: {"id":"c%d","choices":[{"delta":{"content":"`, i) // a new shape
			shape++
		case 13:
			add(head+tok+tail, len(head)+len(tok)+len(tail)+1, 0) // ends past the line: kept whole
		}
	}
	if got, want := split.String(), whole.String(); got != want {
		t.Fatalf("split lines read back differently:\n got %.300q\nwant %.300q", got, want)
	}
	if got, want := split.String(), ParseStreamFixed(lines); got != want || split.Len() != len(want) {
		t.Fatalf("the transcript is not the write-up's (Len %d, want %d)", split.Len(), len(want))
	}
	if stored := len(split.blocks); stored > bound/BlockBytes+2 {
		t.Errorf("split lines took %d blocks, whole lines %d, middles about %d: the ends are stored again", stored, len(whole.blocks), bound/BlockBytes+1)
	}
	split.Release()
	if split.String() != "" || split.Len() != 0 {
		t.Error("Release left the transcript non-empty")
	}
	split.AppendSplit([]byte(head+"z"+tail), len(head), len(tail), shape)
	if got, want := split.String(), head[len("data: "):]+"z"+tail+" "; got != want {
		t.Errorf("after Release: %q, want %q", got, want)
	}
}

// FuzzAppendSplit feeds lines with any split points, numbering each pair
// of ends as a caller must: what Fixed returns is what the whole lines
// make.
func FuzzAppendSplit(f *testing.F) {
	f.Add("data: {\"a\":\"b\"}", 9, 3, uint8(3))
	f.Add("data: ", 6, 0, uint8(1))
	f.Fuzz(func(t *testing.T, line string, head, tail int, n uint8) {
		if strings.ContainsAny(line, "\r\n") {
			return // no line holds one
		}
		split, whole := NewFixed(nil), NewFixed(nil)
		shapes := map[string]uint64{}
		for i := range int(n) {
			l := line + strings.Repeat("x", i%3)
			var shape uint64
			if head >= 0 && tail >= 0 && head+tail <= len(l) {
				ends := l[:head] + "\x00" + l[len(l)-tail:]
				if shape = shapes[ends]; shape == 0 {
					shape = uint64(len(shapes) + 1)
					shapes[ends] = shape
				}
			}
			split.AppendSplit([]byte(l), head, tail, shape)
			AppendLine(whole, []byte(l))
		}
		if got, want := split.String(), whole.String(); got != want || split.Len() != len(want) {
			t.Fatalf("got %q (Len %d), want %q", got, split.Len(), want)
		}
	})
}
