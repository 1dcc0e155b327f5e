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
	if len(conns) != 1 {
		t.Errorf("%d streams took %d upstream connections, want 1: the gateway closed each before its end", streams, len(conns))
	}
}

// An upstream that keeps its body open after [DONE], silent or sending
// on for ever, does not hold the stream: the gateway reads at most
// drainBytes for at most drainWait, then closes the connection. Were the
// wait unbounded, these upstreams would hold the handler until the test's
// deadline.
func TestAnUpstreamThatGoesOnAfterDONEIsLetGo(t *testing.T) {
	for name, after := range map[string]func(http.ResponseWriter){
		"silent": func(http.ResponseWriter) {},
		"sending": func(w http.ResponseWriter) {
			// Each line flushed: a chunk left half sent would hold the
			// gateway's reads, [DONE] among them (net/http's chunked
			// reader waits for a chunk's end).
			for {
				if _, err := io.WriteString(w, ": more\n"); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			closed := make(chan struct{})
			l := newLab(t, func(w http.ResponseWriter, r *http.Request) {
				defer close(closed)
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, chunkLine("hello")+"\n\ndata: [DONE]\n\n")
				w.(http.Flusher).Flush()
				after(w)
				<-r.Context().Done()
			})
			_, body := l.stream(t)
			if text, done, errs := contents(t, body); text != "hello" || !done || len(errs) > 0 {
				t.Errorf("client read %q, [DONE] %v, errors %q; want hello and [DONE]\n%s", text, done, errs, body)
			}
			if strings.Contains(body, "more") {
				t.Errorf("what followed [DONE] reached the client:\n%s", body)
			}
			<-closed // the gateway closed the connection
			if got := l.outcomes(t, OutcomeOK); got != 1 {
				t.Errorf("%d streams ok, want 1", got)
			}
		})
	}
}
