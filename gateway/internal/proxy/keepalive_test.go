package proxy

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Streams share one upstream connection: the gateway reads the body's end
// after [DONE], so the transport keeps the connection for the next. The
// upstream sends that end only once the client has read [DONE], so the
// gateway cannot have met it by chance while it read the stream, and the
// drain wait is long, so a loaded machine cannot decide the count.
func TestUpstreamConnectionsAreKeptAcrossStreams(t *testing.T) {
	const streams = 5
	var mu sync.Mutex
	conns := map[string]bool{}
	release := make(chan struct{}, streams)
	l := newLab(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		conns[r.RemoteAddr] = true
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chunkLine("hello")+"\n\ndata: [DONE]\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}, func(c *Config) { c.drainWait = time.Minute })
	for range streams {
		resp := l.post(t, "k-acme", `{"model":"m","stream":true,"messages":[]}`)
		br := bufio.NewReader(resp.Body)
		var seen strings.Builder
		for !strings.HasSuffix(seen.String(), "data: [DONE]\n\n") {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("stream ended before [DONE]: %v; read %q", err, seen.String())
			}
			seen.WriteString(line)
		}
		release <- struct{}{}
		if rest, err := io.ReadAll(br); err != nil || len(rest) > 0 {
			t.Fatalf("after [DONE]: %q, %v; want the end of the body", rest, err)
		}
		if text, _, _ := contents(t, seen.String()); text != "hello" {
			t.Fatalf("client read %q, want hello", text)
		}
	}
	if got := l.outcomes(t, OutcomeOK); got != streams {
		t.Errorf("%d streams ok, want %d", got, streams)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(conns) != 1 {
		t.Errorf("%d streams took %d upstream connections, want 1: the gateway closed each before its end", streams, len(conns))
	}
}

// An upstream that keeps its body open after [DONE] does not hold the
// stream: the gateway reads what follows for at most drainWait (the
// silent one) and at most drainBytes of it (the one sending for ever,
// given an hour's wait, so that only the byte bound can let it go), and
// does not wait at all on a connection the upstream said it will close
// (given an hour too). Each upstream holds its body open until the client
// has read the gateway's whole answer, so were a bound missing, the two
// would wait on each other until the test's deadline.
func TestAnUpstreamThatGoesOnAfterDONEIsLetGo(t *testing.T) {
	for _, c := range []struct {
		name  string
		wait  time.Duration // the drain's; 0: the gateway's default
		close bool          // the upstream answers Connection: close
		after func(http.ResponseWriter)
	}{
		{name: "silent", after: func(http.ResponseWriter) {}},
		{name: "sending", wait: time.Hour, after: func(w http.ResponseWriter) {
			// Each line flushed: a chunk left half sent would hold the
			// gateway's reads, [DONE] among them (net/http's chunked
			// reader waits for a chunk's end).
			for {
				if _, err := io.WriteString(w, ": more\n"); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			}
		}},
		{name: "closing", wait: time.Hour, close: true, after: func(http.ResponseWriter) {}},
	} {
		t.Run(c.name, func(t *testing.T) {
			release := make(chan struct{})
			l := newLab(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				if c.close {
					w.Header().Set("Connection", "close")
				}
				io.WriteString(w, chunkLine("hello")+"\n\ndata: [DONE]\n\n")
				w.(http.Flusher).Flush()
				c.after(w)
				select {
				case <-release:
				case <-r.Context().Done():
				}
			}, func(cfg *Config) { cfg.drainWait = c.wait })
			_, body := l.stream(t)
			close(release)
			if text, done, errs := contents(t, body); text != "hello" || !done || len(errs) > 0 {
				t.Errorf("client read %q, [DONE] %v, errors %q; want hello and [DONE]\n%s", text, done, errs, body)
			}
			if strings.Contains(body, "more") {
				t.Errorf("what followed [DONE] reached the client:\n%s", body)
			}
			if got := l.outcomes(t, OutcomeOK); got != 1 {
				t.Errorf("%d streams ok, want 1", got)
			}
		})
	}
}
