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
