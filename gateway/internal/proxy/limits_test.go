package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"burnlab/gateway/internal/sse"
	"burnlab/gateway/internal/tenant"
	"burnlab/gateway/internal/transcript"
)

// events is an upstream of n chunks and [DONE].
func events(n int) http.HandlerFunc {
	var lines []string
	for i := range n {
		lines = append(lines, chunkLine(fmt.Sprintf(" w%d", i)), "")
	}
	return sseUpstream(append(lines, "data: [DONE]", "")...)
}

// A stream past one of its limits ends with an error event that names the
// limit, counted as stream_limit, an upstream failure.
func TestStreamLimitsEndTheStreamClearly(t *testing.T) {
	trickle := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; i < 500 && r.Context().Err() == nil; i++ {
			io.WriteString(w, chunkLine(" t")+"\n\n")
			w.(http.Flusher).Flush()
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, c := range []struct {
		name     string
		upstream http.HandlerFunc
		limits   Limits
		says     string
	}{
		{"events", events(200), Limits{Events: 50}, "limit of 50 events"},
		{"bytes", events(200), Limits{Bytes: 4096}, "limit of 4096 bytes"},
		// The upstream would take 5 s; the limit ends it long before.
		{"wall time", trickle, Limits{Duration: 200 * time.Millisecond}, "limit of 200ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newLab(t, c.upstream, func(cfg *Config) { cfg.Limits = c.limits })
			_, body := l.stream(t)
			_, done, errs := contents(t, body)
			if done || len(errs) != 1 || !strings.Contains(errs[0], c.says) {
				t.Fatalf("done=%v errors=%q, want one error that says %q", done, errs, c.says)
			}
			if l.reason(reasonStreamLimit) != 1 || l.outcomes(t, OutcomeUpstreamError) != 1 {
				t.Errorf("stream_limit %v, upstream_error %d; want 1 and 1", l.reason(reasonStreamLimit), l.outcomes(t, OutcomeUpstreamError))
			}
		})
	}
}

// The transcript stops at its limit; the stream goes on to [DONE].
func TestTranscriptIsCappedAndTheStreamGoesOn(t *testing.T) {
	l := newLab(t, events(200), func(cfg *Config) { cfg.Limits.Transcript = 1000 })
	_, body := l.stream(t)
	if text, done, errs := contents(t, body); !done || len(errs) > 0 || !strings.HasSuffix(text, " w199") {
		t.Fatalf("the stream was cut: done=%v errors=%v", done, errs)
	}
	if n := len(l.trs[0].text()); n == 0 || n > 1000 {
		t.Errorf("transcript of %d bytes, want 1..1000", n)
	}
	if !strings.Contains(l.logs.String(), `"transcript_truncated":true`) {
		t.Errorf("the log line does not say the transcript was cut: %s", l.logs.String())
	}
	if l.outcomes(t, OutcomeOK) != 1 {
		t.Error("a stream with a capped transcript is ok")
	}
}

// lineSource produces a stream one generated line at a time, so the input
// itself takes no memory the test measures.
type lineSource struct {
	next func(i int) string // "" ends the stream
	i    int
	buf  string
}

func (s *lineSource) Read(p []byte) (int, error) {
	if s.buf == "" {
		if s.buf = s.next(s.i); s.buf == "" {
			return 0, io.EOF
		}
		s.i++
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

// heapAfter runs f and reports how much more heap is in use after it, with
// what f returns still alive.
func heapAfter(f func() any) (uint64, any) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	kept := f()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if after.HeapAlloc < before.HeapAlloc {
		return 0, kept
	}
	return after.HeapAlloc - before.HeapAlloc, kept
}

// A hostile upstream makes each of the 64 text streams a response may open
// hold a large chunk or redact a large text. What the stream keeps stays
// bounded: the redactors let their large work buffers go, and text held in
// more than Limits.Held of chunks ends the stream.
func TestOneStreamsMemoryIsBounded(t *testing.T) {
	const pad = 700 << 10
	tool := func(i int, args string) string {
		return fmt.Sprintf(`data: {"id":"%s","choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"function":{"arguments":"%s"}}]}}]}`,
			strings.Repeat("p", pad-len(args)), i, args) + "\n\n"
	}
	// What a stream may keep: the transcript's 1 MiB, a few 64 KiB
	// buffers and pooled read and write buffers; for held chunks, also the
	// 1 MiB they may hold, the chunk that passed it, and the transcript's
	// builder grown past its 1 MiB by doubling. 64 streams keeping 700 KiB
	// each would be 44 MiB.
	const small, held = 3 << 19, 4 << 20
	for _, c := range []struct {
		name  string
		line  func(i int) string
		err   string
		bound uint64
	}{
		// Each chunk is 700 KiB and its text's tail ("abc") is held, so
		// the chunk is kept as the shape its tail goes out in.
		{"held chunks", func(i int) string { return tool(i, "x abc") }, "bytes held for redaction", held},
		// Each text is 700 KiB with digits: the redactor's slow path,
		// whose work buffers grew with it.
		{"large texts", func(i int) string { return tool(i, strings.Repeat("a1 ", pad/4)+"!") }, "", small},
		// What the scanner keeps of a chunk: 100,000 choices each time,
		// and a large chunk's shape.
		{"many choices", func(int) string {
			return `data: {"choices":[{"delta":{"content":"x"}}` + strings.Repeat(`,{}`, 100_000) + `]}` + "\n\n"
		}, "", small},
		{"large shapes", func(i int) string { return tool(0, fmt.Sprintf("x%d!", i)) }, "", small},
		// What the decoder keeps of a large id and event type.
		{"large ids", func(int) string {
			return "id: " + strings.Repeat("i", pad) + "\nevent: " + strings.Repeat("e", pad) + "\n" + chunkLine("x") + "\n\n"
		}, "", small},
	} {
		t.Run(c.name, func(t *testing.T) {
			var err error
			grew, kept := heapAfter(func() any {
				s := &stream{acct: accounting{start: time.Now()}, lim: Limits{}.withDefaults()}
				s.begin(transcript.NewFixed(nil), 1)
				out := newFlusher(&discard{h: http.Header{}}, time.Second)
				src := &lineSource{next: func(i int) string {
					if i == maxTextStreams {
						return "data: [DONE]\n\n"
					} else if i > maxTextStreams {
						return ""
					}
					return c.line(i)
				}}
				dec := sse.NewDecoder(sse.NewReader(src, 64<<10, 1<<20), 1<<20, out.flush)
				err = s.forward(dec, out)
				return []any{s, dec}
			})
			runtime.KeepAlive(kept)
			if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Fatalf("forward: %v, want %q", err, c.err)
			}
			if grew > c.bound {
				t.Errorf("the stream keeps %.1f MiB after 64 chunks of 700 KiB", float64(grew)/(1<<20))
			}
			t.Logf("heap kept by the stream: %.1f MiB", float64(grew)/(1<<20))
		})
	}
}

func TestNegativeLimitsAreRefused(t *testing.T) {
	for _, lim := range []Limits{{Events: -1}, {Bytes: -1}, {Duration: -time.Second}, {Transcript: -1}, {Held: -1}} {
		cfg := Config{Upstream: &url.URL{Scheme: "http", Host: "u"}, Tenants: &tenant.Registry{}, Metrics: &Metrics{},
			NewTranscript: func() transcript.Transcript { return nil }, Limits: lim}
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "must not be negative") {
			t.Errorf("%+v: %v, want a refusal", lim, err)
		}
	}
}

// A stream that waits on its upstream holds no write buffer: what it
// built is flushed, and the buffer goes back to the pool, before every
// read that may block. Nothing is lost on the way: the client gets every
// event.
func TestAWaitingStreamHoldsNoWriteBuffer(t *testing.T) {
	body := string(renderStream(300))
	rec := httptest.NewRecorder()
	out := newFlusher(rec, time.Second)
	s := &stream{acct: accounting{start: time.Now()}, lim: Limits{}.withDefaults()}
	s.begin(transcript.NewFixed(nil), 1)
	reads, holding := 0, 0
	up := readFunc(func(p []byte) (int, error) {
		if reads++; out.buf != nil {
			holding++
		}
		return strings.NewReader(body[min(len(body), (reads-1)*100):]).Read(p[:min(len(p), 100)])
	})
	dec := sse.NewDecoder(sse.NewReader(up, 64<<10, 1<<20), 1<<20, out.flush)
	if err := s.forward(dec, out); err != nil {
		t.Fatal(err)
	}
	if holding > 0 {
		t.Errorf("the stream held its write buffer during %d of its %d reads", holding, reads)
	}
	// 300 chunks, the tail the redactor held at the end, and [DONE].
	if got := rec.Body.String(); strings.Count(got, "data: ") != 302 || !strings.HasSuffix(got, "data: [DONE]\n\n") {
		t.Errorf("the client got %d events, want 302, the last [DONE]:\n%s", strings.Count(got, "data: "), got)
	}
}

type readFunc func([]byte) (int, error)

func (f readFunc) Read(p []byte) (int, error) { return f(p) }

// An ordinary stream allocates about as much at 10,000 events as at 1,000,
// read 4 KiB at a time: its buffers come from pools and are reused from
// read to read, and only the transcript's list of blocks grows (doubling).
func TestAllocationsDoNotGrowWithTheStream(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes pools drop buffers at random")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // a GC would empty the pools
	var pool transcript.Pool                         // the gateway's, one per process
	allocs := func(events int) float64 {
		body := renderStream(events)
		return testing.AllocsPerRun(5, func() {
			s := &stream{acct: accounting{start: time.Now()}, lim: Limits{}.withDefaults()}
			tr := transcript.NewFixed(&pool)
			s.begin(tr, 1)
			out := newFlusher(&discard{h: http.Header{}}, time.Second)
			up := &shortReads{r: bytes.NewReader(body), n: 4 << 10}
			dec := sse.NewDecoder(sse.NewReader(up, 64<<10, 1<<20), 1<<20, out.flush)
			if err := s.forward(dec, out); err != nil {
				t.Fatal(err)
			}
			out.done()
			tr.Release()
		})
	}
	short, long := allocs(1000), allocs(10000)
	t.Logf("allocations per stream: %.0f at 1,000 events, %.0f at 10,000", short, long)
	// The list of blocks doubles 4 times more; the rest is slack for
	// what other goroutines of the process allocate meanwhile (AllocsPerRun
	// counts them too). One allocation a read would be 150 more.
	if long > short+16 {
		t.Errorf("a stream of 10,000 events allocates %.0f times, one of 1,000 %.0f: something allocates per event or per read", long, short)
	}
}

// A line that takes the buffer past writeAt is written at once, under a
// deadline set then: a burst after a long upstream pause must not be
// written under the deadline of the flush before that pause.
func TestAFullBufferIsWrittenUnderAFreshDeadline(t *testing.T) {
	w := &deadlines{discard: discard{h: http.Header{}}}
	out := newFlusher(w, time.Minute)
	out.take()
	line := bytes.Repeat([]byte("x"), 1000)
	for i := 0; w.writes == 0 && i < 2*writeAt/len(line); i++ {
		out.line(line)
	}
	if w.writes != 1 || len(w.set) != 1 {
		t.Fatalf("a buffer past %d bytes: %d writes, %d deadlines set; want 1 of each before the flush", writeAt, w.writes, len(w.set))
	}
	if left := time.Until(w.set[0]); left < 50*time.Second {
		t.Errorf("the write's deadline is %v away, want the timeout (1m) from the write", left)
	}
}

// deadlines is a ResponseWriter that counts writes and keeps the write
// deadlines it was given.
type deadlines struct {
	discard
	writes int
	set    []time.Time
}

func (d *deadlines) Write(p []byte) (int, error) { d.writes++; return len(p), nil }

func (d *deadlines) SetWriteDeadline(t time.Time) error {
	d.set = append(d.set, t)
	return nil
}
