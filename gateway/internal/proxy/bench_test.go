package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"burnlab/gateway/internal/sse"
	"burnlab/gateway/internal/tenant"
	"burnlab/gateway/internal/transcript"
)

// renderStream is an upstream answer of n chunks with payloads inside the
// write-up's 24–96 characters, so the baseline regexp matches each one.
func renderStream(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" tok%s\"}}]}\n\n", strings.Repeat("x", i%40))
	}
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// BenchmarkStream times one 10k-event stream end to end over loopback and
// reports the process's CPU per stream (upstream and client included, the
// same in every case): direct to the upstream, through a bare
// httputil.ReverseProxy, and through the gateway in each build.
func BenchmarkStream(b *testing.B) {
	body := renderStream(10000)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(body)
	}))
	defer up.Close()
	u, _ := url.Parse(up.URL)

	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Without full duplex, stock ReverseProxy cuts POST streams short (Go issue 40747).
		http.NewResponseController(w).EnableFullDuplex()
		r.URL.Path = "/v1/chat/completions"
		rp.ServeHTTP(w, r)
	}))
	defer bare.Close()

	gateway := func(name string, newTr func() transcript.Transcript) *httptest.Server {
		tenants, _ := tenant.Parse("k=bench:1000000000")
		h, err := New(Config{Upstream: u, Tenants: tenants, Log: zerolog.Nop(), Variant: name, NewTranscript: newTr,
			Metrics: NewMetrics(prometheus.NewRegistry(), name, "bench", tenants.Names())})
		if err != nil {
			b.Fatal(err)
		}
		return httptest.NewServer(h)
	}
	var pool transcript.Pool
	fixed := gateway("fixed", func() transcript.Transcript { return transcript.NewFixed(&pool) })
	defer fixed.Close()
	baseline := gateway("baseline", func() transcript.Transcript { return &transcript.Baseline{} })
	defer baseline.Close()

	for _, c := range []struct{ name, url string }{
		{"direct", up.URL + "/v1/chat/completions"},
		{"reverseproxy", bare.URL + "/"},
		{"gateway-fixed", fixed.URL + RouteStream},
		{"gateway-baseline", baseline.URL + RouteStream},
	} {
		b.Run(c.name+"/events=10000", func(b *testing.B) {
			client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
			defer client.CloseIdleConnections()
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodPost, c.url, strings.NewReader(`{"stream":true,"max_tokens":10000}`))
				req.Header.Set("Authorization", "Bearer k")
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if n < int64(len(body))*9/10 {
					b.Fatalf("%s: got %d of %d bytes", c.name, n, len(body))
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// discard is a ResponseWriter that keeps nothing, so BenchmarkForward times
// the gateway's per-event work and no socket.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}
func (d *discard) Flush()                      {}

// SetWriteDeadline is the connection's, which takes a deadline without
// allocating, where a writer without it makes an error of each.
func (d *discard) SetWriteDeadline(time.Time) error { return nil }

// BenchmarkForward is the per-event loop alone on a 10k-event stream: read,
// scan, redact, rewrite, transcript, buffer. ns/event is its cost per event.
func BenchmarkForward(b *testing.B) {
	body := renderStream(10000)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	cpu0 := cpuTime()
	var pool transcript.Pool // the gateway's, one per process
	for b.Loop() {
		s := &stream{acct: accounting{start: time.Now()}, lim: Limits{}.withDefaults()}
		tr := transcript.NewFixed(&pool)
		s.begin(tr, 1)
		out := newFlusher(&discard{h: http.Header{}}, time.Second)
		dec := sse.NewDecoder(sse.NewReader(bytes.NewReader(body), 64<<10, 1<<20), 1<<20, out.flush)
		if err := s.forward(dec, out); err != nil {
			b.Fatal(err)
		}
		tr.Release()
	}
	// CPU time, not wall time: on a shared machine the wall clock counts
	// other processes' turns too.
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/10000, "cpu-ns/event")
}
