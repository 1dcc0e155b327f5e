package benchproxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"burnlab/loadgen/tokens"
	"burnlab/shared/service"
)

// piiEvery puts about one PII item in this many tokens, spelled across
// events, as the lab's upstream does: the gateway's redaction is always on
// and its slow path must be in the figure, not only its fast one.
const piiEvery = 400

// chunkHead and chunkTail frame each token: an OpenAI chunk without the
// choice's index (clients default it to 0), which leaves room for content
// within 96 characters.
const (
	chunkHead = `data: {"id":"b1","object":"chat.completion.chunk","choices":[{"delta":{"content":`
	chunkTail = "}}]}\n\n"
	finish    = `data: {"id":"b1","object":"chat.completion.chunk","choices":[{"delta":{},"finish_reason":"stop"}]}` + "\n\n"
	done      = "data: [DONE]\n\n"
)

// RenderEvents returns the events of one stream: n content chunks, the
// finish chunk and [DONE]. The same seed gives the same stream.
func RenderEvents(n int, seed uint64) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 16))
	events := make([][]byte, 0, n+2)
	toks := tokens.New(rng, piiEvery) // the lab's upstream's text
	for range n {
		q, _ := json.Marshal(toks.Next()) // a string always marshals
		events = append(events, []byte(chunkHead+string(q)+chunkTail))
	}
	return append(events, []byte(finish), []byte(done))
}

// EventsPerStream is how many SSE events a stream of n tokens has: the
// content chunks, the finish chunk and [DONE]. The load generator counts
// them to tell a whole stream from a cut one.
func EventsPerStream(n int) int { return n + 2 }

// upstreamRequest is what the bench upstream reads of a chat request.
type upstreamRequest struct {
	MaxTokens int `json:"max_tokens"`
	// PaceMS sends one event every PaceMS milliseconds instead of the
	// whole stream at once: the memory run holds streams open with it.
	// Every proxy forwards the body as it is, so it reaches the upstream.
	PaceMS int `json:"pace_ms"`
}

// Upstream is the benchmark's model provider: it answers
// POST /v1/chat/completions with a precomputed stream of its events
// (or of max_tokens events when the request asks for another number), so
// its own cost per stream is one write and the proxies' rows measure the
// proxies.
type Upstream struct {
	events int
	seed   uint64
	evs    [][]byte // the default stream's events, for paced answers
	body   []byte   // and all of them at once
}

// NewUpstream precomputes the default stream of events content chunks.
func NewUpstream(events int, seed uint64) *Upstream {
	evs := RenderEvents(events, seed)
	return &Upstream{events: events, seed: seed, evs: evs, body: bytes.Join(evs, nil)}
}

func (u *Upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/readyz" {
		w.Write([]byte("ready\n"))
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, "POST /v1/chat/completions only", http.StatusNotFound)
		return
	}
	var req upstreamRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		http.Error(w, "bad request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	n := u.events
	if req.MaxTokens > 0 && req.MaxTokens < n {
		n = req.MaxTokens
	}
	if req.PaceMS <= 0 {
		if n == u.events {
			w.Write(u.body)
			return
		}
		w.Write(bytes.Join(RenderEvents(n, u.seed), nil))
		return
	}
	rc := http.NewResponseController(w)
	tick := time.NewTicker(time.Duration(req.PaceMS) * time.Millisecond)
	defer tick.Stop()
	evs := u.evs
	if n != u.events {
		evs = RenderEvents(n, u.seed)
	}
	for _, ev := range evs {
		if _, err := w.Write(ev); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}

// NewReverseProxy is the benchmark's yardstick: a bare
// httputil.ReverseProxy, streaming (FlushInterval -1) and full duplex —
// without full duplex Go's HTTP/1 server may close a POST's request body
// once the answer has begun, which can cut the proxied stream short (Go
// issue 40747), as the in-process benchmark found.
func NewReverseProxy(upstream *url.URL) http.Handler {
	rp := httputil.NewSingleHostReverseProxy(upstream)
	rp.FlushInterval = -1
	rp.Transport = newTransport()
	return proxyHandler(rp)
}

// newTransport keeps as many idle upstream connections as the gateway's
// does, so no proxy pays for new connections another reuses.
func newTransport() *http.Transport {
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
}

// proxyHandler answers /readyz and serves every other request full
// duplex through h.
func proxyHandler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			w.Write([]byte("ready\n"))
			return
		}
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			http.Error(w, "full duplex: "+err.Error(), http.StatusInternalServerError)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// NewScanner is the floor of a proxy that reads its stream event by event,
// as the gateway must to redact and count: the upstream's answer read line
// by line into buffers reused for the whole stream (no allocation per
// event), written on as it came, and flushed where an event ends with
// nothing more from the upstream buffered, as the gateway flushes: not
// after a write over 8 KiB, which net/http has put on the socket already
// but for the chunk's CRLF. It does
// nothing else: no JSON, no redaction, no accounting, no transcript, so
// the CPU the gateway costs over it is what those cost, and its CPU over
// the ReverseProxy's is the least any such proxy costs on this machine.
func NewScanner(upstream *url.URL) http.Handler {
	transport := newTransport()
	return proxyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := *upstream
		u.Path, u.RawQuery = r.URL.Path, r.URL.RawQuery
		req, err := http.NewRequestWithContext(r.Context(), r.Method, u.String(), r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		req.Header, req.ContentLength = r.Header.Clone(), r.ContentLength
		dropHopByHop(req.Header)
		resp, err := transport.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		dropHopByHop(w.Header())
		w.WriteHeader(resp.StatusCode)
		if err := scanEvents(w, resp.Body); err != nil {
			// As httputil.ReverseProxy does: a stream cut short upstream
			// is not ended cleanly for the client.
			panic(http.ErrAbortHandler)
		}
	}))
}

// dropHopByHop removes the headers that describe one connection, not the
// message (RFC 9110, 7.6.1), as httputil.ReverseProxy does.
func dropHopByHop(h http.Header) {
	for _, k := range []string{"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"} {
		h.Del(k)
	}
}

// scanEvents copies an SSE stream from body to w line by line, writing
// what it holds at writeAt bytes and flushing at the end of an event when
// body has nothing more buffered. It returns the body's error other than
// io.EOF; a client that went away ends it quietly.
func scanEvents(w http.ResponseWriter, body io.Reader) error {
	const writeAt = 32 << 10
	rc := http.NewResponseController(w)
	br := bufio.NewReaderSize(body, writeAt)
	out := make([]byte, 0, writeAt+4<<10)
	midLine := false // the last read ended inside a line longer than br's buffer
	for {
		line, err := br.ReadSlice('\n')
		out = append(out, line...)
		full := errors.Is(err, bufio.ErrBufferFull)
		blank := err == nil && !midLine && (len(line) == 1 || len(line) == 2 && line[0] == '\r')
		midLine = full
		end := blank && br.Buffered() == 0
		if full {
			err = nil
		}
		if err != nil || end || len(out) >= writeAt {
			direct := len(out) > 8<<10
			if _, werr := w.Write(out); werr != nil {
				return nil
			}
			out = out[:0]
			if (err != nil || end) && !direct && rc.Flush() != nil {
				return nil
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// Serve runs h on listen and the admin mux (/metrics with the Go runtime's
// heap figures, /readyz, /debug/pprof/) on admin until ctx ends. Both must be
// loopback addresses: pprof hands out the heap.
func Serve(ctx context.Context, listen, admin string, h http.Handler) error {
	for _, addr := range []string{listen, admin} {
		if err := loopback(addr); err != nil {
			return err
		}
	}
	servers := []*http.Server{
		{Addr: listen, Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 2 * time.Minute},
		{Addr: admin, Handler: service.AdminMux(service.NewRegistry(), nil), ReadHeaderTimeout: 5 * time.Second},
	}
	errc := make(chan error, len(servers))
	for _, s := range servers {
		go func() { errc <- s.ListenAndServe() }()
	}
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	for _, s := range servers {
		s.Close()
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// loopback refuses an address that is not on 127.0.0.1 or ::1.
func loopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("address %q: the benchmark listens on loopback only", addr)
	}
	return nil
}
