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
			f := NewFixed(1)
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
	for _, tr := range []Transcript{&Baseline{}, NewFixed(2)} {
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

// The gateway feeds whole data lines of OpenAI chunks, longer than the
// write-up's events: one allocation must still hold a stream of them.
func TestFixedHoldsGatewayChunksInOneAllocation(t *testing.T) {
	// 86 bytes of payload and the separator: the lab's 87 an event.
	line := []byte(`data: {"id":"c4f1c","object":"chat.completion.chunk","choices":[{"delta":{"content":" t"}}]}`)
	if len(line)-len("data: ")+1 != 87 {
		t.Fatalf("the line carries %d bytes, not 87", len(line)-len("data: ")+1)
	}
	const n = 2000
	allocs := testing.AllocsPerRun(10, func() {
		tr := NewFixed(n)
		for range n {
			AppendLine(tr, line)
		}
	})
	if allocs > 2 {
		t.Fatalf("a %d-event stream of 87-byte lines took %.0f allocations, want ≤ 2 (the Fixed and its buffer)", n, allocs)
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
