package benchproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// TestSmoke runs the whole benchmark, every process and row, with a
// handful of short streams: `make bench-proxy` must keep working from a
// clean clone, and its figures must be real ones.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts every server")
	}
	targets := AllTargets()
	_, nginxErr := FindNginx()
	if nginxErr != nil {
		targets = slices.DeleteFunc(targets, func(s string) bool { return s == Nginx })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var log bytes.Buffer
	// Two rounds: each c=1 row runs its streams in two turns (2 and 1),
	// each c=2 row in one, as too few for two turns at that concurrency.
	cfg := Config{Root: "../..", Targets: targets, Events: 200, Streams: 3, BaselineStreams: 3, Rounds: 2,
		Concurrency: []int{1, 2}, MemStreams: 20, MemEvents: 20, LatencyStreams: 3, LatencyEvents: 20, LatencyPaceMS: 1, Previous: "HEAD", Seed: 1, Log: &log}
	// The previous revision's gateway comes right after the fixed one.
	all := slices.Insert(slices.Clone(targets), slices.Index(targets, Fixed)+1, Previous)
	rep, err := Run(ctx, cfg)
	if rep != nil {
		var table bytes.Buffer
		if werr := WriteTable(&table, rep); werr != nil {
			t.Errorf("WriteTable: %v", werr)
		}
		t.Logf("\n%s\n%s", log.String(), table.String())
		checkTable(t, table.String(), all, cfg.Concurrency)
		if !strings.Contains(table.String(), Untraced+": the fixed gateway with its flight recorder off") {
			t.Errorf("the table does not say what %s is", Untraced)
		}
		if !strings.Contains(table.String(), Previous+": the fixed gateway built from revision "+rep.Previous) || rep.Previous == "" {
			t.Errorf("the table does not say which revision %s is (%q)", Previous, rep.Previous)
		}
	}
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, log.String())
	}

	var i int
	for _, target := range all {
		for _, c := range cfg.Concurrency {
			if i >= len(rep.Rows) {
				t.Fatalf("%d rows, want one per target and concurrency: %d", len(rep.Rows), len(all)*len(cfg.Concurrency))
			}
			row := rep.Rows[i]
			i++
			if row.Target != target || row.Concurrency != c {
				t.Errorf("row %d is %s c=%d, want %s c=%d", i, row.Target, row.Concurrency, target, c)
			}
			if row.Streams != 3 || row.Failures != 0 {
				t.Errorf("%s c=%d: %d streams, %d failed (%s): want 3 whole streams", row.Target, c, row.Streams, row.Failures, row.FirstError)
			}
			if row.CPUMsPerStream <= 0 || row.StreamsPerSec <= 0 || row.P50Ms <= 0 || row.P99Ms < row.P50Ms {
				t.Errorf("%s c=%d: CPU %v ms/stream, %v streams/s, p50 %v ms, p99 %v ms: want positive figures, p99 ≥ p50",
					row.Target, c, row.CPUMsPerStream, row.StreamsPerSec, row.P50Ms, row.P99Ms)
			}
		}
	}
	if i != len(rep.Rows) {
		t.Errorf("%d rows, want %d", len(rep.Rows), i)
	}
	var held []string
	for _, m := range rep.Memory {
		held = append(held, m.Target)
		if m.Streams != 20 || m.HeapIdle == 0 || m.HeapHeld <= m.HeapIdle || m.BytesPerStream <= 0 {
			t.Errorf("%s: heap %d idle, %d with %d streams held, %v bytes per stream: want more with streams held",
				m.Target, m.HeapIdle, m.HeapHeld, m.Streams, m.BytesPerStream)
		}
	}
	if want := []string{ReverseProxy, Scanner, Fixed, Previous, Untraced, Baseline}; !slices.Equal(held, want) {
		t.Errorf("heap measured for %v, want %v", held, want)
	}
	var timed []string
	for _, l := range rep.Latency {
		timed = append(timed, l.Target)
		// No bound on the gaps: on a busy machine a proxy that waited for
		// a CPU forwards several events at once, and they arrive together.
		// Every event but each stream's first ends a gap.
		if l.Streams != 3 || l.Gaps < 3*(EventsPerStream(20)-1) || l.FirstP50Us <= 0 || l.FirstP99Us < l.FirstP50Us || l.GapP99Us < l.GapP50Us {
			t.Errorf("%s: %d streams, first event p50 %v µs p99 %v µs, %d gaps, p50 %v µs p99 %v µs: want 3 streams, a first event after its request, a gap per event after the first, p99 ≥ p50",
				l.Target, l.Streams, l.FirstP50Us, l.FirstP99Us, l.Gaps, l.GapP50Us, l.GapP99Us)
		}
	}
	if !slices.Equal(timed, all) {
		t.Errorf("latency measured for %v, want %v", timed, all)
	}
	if nginxErr != nil {
		t.Skipf("every other check passed, but nginx was not measured: %v", nginxErr)
	}
}

// A previous revision that is no revision, or an option in disguise, is
// refused before anything is built.
func TestPreviousMustBeARevision(t *testing.T) {
	for rev, want := range map[string]string{"no-such-revision": "previous revision", "--output=/tmp/x": "not an option"} {
		_, err := Run(context.Background(), Config{Root: "../..", Targets: []string{Fixed}, Events: 10, Streams: 1, BaselineStreams: 1,
			Concurrency: []int{1}, Previous: rev})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("-previous %q: %v, want an error saying %q", rev, err, want)
		}
	}
}

// checkTable holds the printed table to the rows: a line per target and
// concurrency, each with its ratio to the ReverseProxy.
func checkTable(t *testing.T, table string, targets []string, conc []int) {
	t.Helper()
	lines := strings.Split(table, "\n")
	for _, target := range targets {
		for _, c := range conc {
			found := slices.ContainsFunc(lines, func(l string) bool {
				f := strings.Fields(l)
				return len(f) == 12 && f[0] == target && f[1] == fmt.Sprint(c) && f[5] != "—"
			})
			if !found {
				t.Errorf("the table has no line for %s at concurrency %d with its ratios", target, c)
			}
		}
	}
}

// TestPayloads holds the upstream's traffic to the write-up's: chunk
// payloads of 24–96 characters, PII among them, and [DONE] last.
func TestPayloads(t *testing.T) {
	events := RenderEvents(10000, 1)
	if len(events) != EventsPerStream(10000) {
		t.Fatalf("%d events, want %d", len(events), EventsPerStream(10000))
	}
	var pii int
	for i, ev := range events[:len(events)-1] {
		payload, ok := bytes.CutPrefix(ev, []byte("data: "))
		payload, ok2 := bytes.CutSuffix(payload, []byte("\n\n"))
		if !ok || !ok2 || len(payload) < 24 || len(payload) > 96 {
			t.Fatalf("event %d: %q: want data: <24–96 characters>\\n\\n", i, ev)
		}
		if bytes.Contains(ev, []byte(`"@e`)) || bytes.Contains(ev, []byte(`"sk-`)) || bytes.Contains(ev, []byte(`"4111`)) || bytes.Contains(ev, []byte(`"+1`)) {
			pii++
		}
	}
	if pii < 5 {
		t.Errorf("%d PII items begun in 10,000 tokens, want about 25", pii)
	}
	if string(events[len(events)-1]) != done {
		t.Errorf("last event %q, want %q", events[len(events)-1], done)
	}
}

// TestReadStream: a cut stream is a failure, never a fast stream.
func TestReadStream(t *testing.T) {
	whole := bytes.Join(RenderEvents(50, 1), nil)
	resp := func(status int, body []byte, err error) *http.Response {
		var r io.Reader = bytes.NewReader(body)
		if err != nil {
			r = io.MultiReader(r, errReader{err})
		}
		return &http.Response{StatusCode: status, Body: io.NopCloser(iotest.OneByteReader(r))}
	}
	if err := readStream(resp(200, whole, nil), EventsPerStream(50), nil); err != nil {
		t.Errorf("a whole stream, read a byte at a time: %v", err)
	}
	for name, r := range map[string]*http.Response{
		"cut":             resp(200, whole[:len(whole)/2], nil),
		"cut before DONE": resp(200, whole[:len(whole)-len(done)], nil),
		"reset":           resp(200, whole[:100], errors.New("connection reset by peer")),
		"events missing":  resp(200, bytes.Join(RenderEvents(40, 1), nil), nil),
		"status":          resp(502, []byte(`{"error":{"message":"upstream"}}`), nil),
	} {
		if err := readStream(r, EventsPerStream(50), nil); !errors.Is(err, errStream) {
			t.Errorf("%s: %v, want a failed stream", name, err)
		}
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// TestLatencyPaceIsBounded: a negative pace or one over a second is a
// mistake, said before anything is built.
func TestLatencyPaceIsBounded(t *testing.T) {
	for pace, ok := range map[int]bool{-1: false, 0: true, 5: true, 1000: true, 1001: false} {
		c := Config{Root: ".", Targets: []string{Direct}, Events: 10, Streams: 1, BaselineStreams: 1, Concurrency: []int{1},
			LatencyStreams: 1, LatencyEvents: 10, LatencyPaceMS: pace}
		if err := c.check(); (err == nil) != ok {
			t.Errorf("pace %d ms: %v, want ok %v", pace, err, ok)
		}
	}
}

// A row's turns run each of its streams once, each turn with enough
// streams to keep its workers busy, and every turn index is taken once
// over the rounds, spread over them: the last round always holds one, so
// a row of few turns is not measured only while the run is young.
func TestTurnsRunEveryStreamOnce(t *testing.T) {
	for streams := 1; streams <= 40; streams++ {
		for _, conc := range []int{1, 2, 8} {
			for rounds := 1; rounds <= 6; rounds++ {
				n := turns(streams, conc, rounds)
				var taken []int
				sum, last := 0, -1
				for round := range rounds {
					turn, ok := turnIn(round, n, rounds)
					if !ok {
						continue
					}
					taken, last = append(taken, turn), round
					s := share(streams, n, turn)
					if s < min(conc, streams) {
						t.Errorf("%d streams at c=%d in %d rounds: turn %d runs %d, fewer than its %d workers", streams, conc, rounds, turn, s, conc)
					}
					sum += s
				}
				if last != rounds-1 {
					t.Errorf("%d streams at c=%d in %d rounds: the last turn is in round %d, not the last", streams, conc, rounds, last)
				}
				if want := iotaInts(n); !slices.Equal(taken, want) || sum != streams {
					t.Errorf("%d streams at c=%d in %d rounds: turns %v running %d streams, want turns %v running all %d", streams, conc, rounds, taken, sum, want, streams)
				}
			}
		}
	}
}

func iotaInts(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// flushCounter records what a handler writes and how often it flushes.
type flushCounter struct {
	*httptest.ResponseRecorder
	writes, flushes int
}

func (f *flushCounter) Write(b []byte) (int, error) {
	f.writes++
	return f.ResponseRecorder.Write(b)
}

func (f *flushCounter) Flush() { f.flushes++ }

// scan runs scanEvents over stream and says what it did.
func scan(t *testing.T, body io.Reader) (*flushCounter, error) {
	t.Helper()
	w := &flushCounter{ResponseRecorder: httptest.NewRecorder()}
	return w, scanEvents(w, body)
}

// The scanner forwards a stream byte for byte, a line longer than its
// buffer and CRLF line ends included, and flushes where an event ends with
// nothing more buffered, not per line.
func TestScannerForwardsEveryByte(t *testing.T) {
	long := strings.Repeat("x", 100<<10)
	stream := "data: a\n\ndata: " + long + "\r\n\r\nid: 7\ndata: b\n\ndata: [DONE]\n\n"
	// One byte at a time, so nothing more is ever buffered at an event's
	// end: every event is flushed on its own, and the end once more.
	w, err := scan(t, iotest.OneByteReader(strings.NewReader(stream)))
	if err != nil || w.Body.String() != stream {
		t.Fatalf("forwarded %d bytes (%v), want the stream's %d unchanged", w.Body.Len(), err, len(stream))
	}
	if w.flushes != 5 {
		t.Errorf("%d flushes, want 5: one per event and one at the end", w.flushes)
	}
	// All at once: the events come out together, flushed at the last.
	w, _ = scan(t, strings.NewReader("data: a\n\ndata: b\n\n"))
	if w.Body.String() != "data: a\n\ndata: b\n\n" || w.flushes != 2 {
		t.Errorf("%q with %d flushes, want both events and 2 flushes (the last event's, the end's)", w.Body.String(), w.flushes)
	}
}

// A line that fills the buffer exactly leaves its newline for the next
// read, which is no blank line: the event is not flushed there. A stream
// with no newline at all is written as it grows, not held to its end.
func TestScannerLongLines(t *testing.T) {
	exact := "data: " + strings.Repeat("x", 32<<10-len("data: ")) + "\ndata: more\n\n"
	w, err := scan(t, iotest.OneByteReader(strings.NewReader(exact)))
	if err != nil || w.Body.String() != exact || w.flushes != 2 {
		t.Errorf("a line of exactly the buffer: %d bytes, %d flushes (%v); want it whole and 2 flushes (the event's end, the stream's)", w.Body.Len(), w.flushes, err)
	}
	endless := strings.Repeat("y", 200<<10)
	w, err = scan(t, strings.NewReader(endless))
	if err != nil || w.Body.String() != endless || w.writes < 6 {
		t.Errorf("200 KiB without a newline: %d bytes in %d writes (%v); want it whole, written as it grew", w.Body.Len(), w.writes, err)
	}
}

// An upstream that fails mid-stream is an error, after what arrived.
func TestScannerReportsAReadError(t *testing.T) {
	w, err := scan(t, io.MultiReader(strings.NewReader("data: a\n\n"), iotest.ErrReader(io.ErrUnexpectedEOF)))
	if !errors.Is(err, io.ErrUnexpectedEOF) || w.Body.String() != "data: a\n\n" {
		t.Errorf("%q, %v; want the event, then io.ErrUnexpectedEOF", w.Body.String(), err)
	}
}
