package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"burnlab/gateway/internal/tenant"
	"burnlab/gateway/internal/transcript"
	"burnlab/shared/openai/openaitest"
	"burnlab/shared/syncbuf"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// lab is a gateway in front of a test upstream, both on loopback.
type lab struct {
	gw      *httptest.Server
	reg     *prometheus.Registry
	m       *Metrics
	logs    *syncbuf.Buffer
	tenants *tenant.Registry
	mu      sync.Mutex
	trs     []*keptTranscript
}

// keptTranscript is the gateway's fixed transcript that keeps a copy of
// its text when the gateway releases it, so a test can read what a
// stream kept after the stream ended.
type keptTranscript struct {
	*transcript.Fixed
	mu   sync.Mutex
	kept string
}

func (k *keptTranscript) Release() {
	k.mu.Lock()
	k.kept = k.String()
	k.mu.Unlock()
	k.Fixed.Release()
}

// text is what the stream kept: read it once the stream has ended.
func (k *keptTranscript) text() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.kept
}

func newLab(t *testing.T, upstream http.HandlerFunc, tweak ...func(*Config)) *lab {
	t.Helper()
	up := httptest.NewServer(upstream)
	t.Cleanup(up.Close)
	u, _ := url.Parse(up.URL)
	// acme's quota covers any reservation a test asks for (40 requests of
	// max_tokens 1048576 at once, say); tiny's is one token a second;
	// calibration is a probe tenant, whose streams are synthetic.
	tenants, err := tenant.Parse("k-acme=acme:1000000000000,k-tiny=tiny:60,k-pair=pair:1000000:2,k-probe=calibration:1000000000000:8:probe")
	if err != nil {
		t.Fatal(err)
	}
	l := &lab{reg: prometheus.NewRegistry(), logs: &syncbuf.Buffer{}, tenants: tenants}
	l.m = NewMetrics(l.reg, "fixed", "test", tenants.Names())
	cfg := Config{
		Upstream: u,
		Tenants:  tenants,
		Metrics:  l.m,
		Log:      zerolog.New(l.logs),
		Variant:  "fixed",
		NewTranscript: func() transcript.Transcript {
			tr := &keptTranscript{Fixed: transcript.NewFixed(nil)}
			l.mu.Lock()
			l.trs = append(l.trs, tr)
			l.mu.Unlock()
			return tr
		},
		UpstreamTimeout: 2 * time.Second,
		IdleTimeout:     2 * time.Second,
	}
	for _, f := range tweak {
		f(&cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l.gw = httptest.NewServer(h)
	t.Cleanup(func() {
		l.gw.Close()
		h.cfg.Client.CloseIdleConnections()
	})
	return l
}

func (l *lab) post(t *testing.T, key, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, l.gw.URL+RouteStream, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := l.gw.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// stream posts a request for as many choices as the gateway streams, so a
// test of several need not say so.
func (l *lab) stream(t *testing.T) (*http.Response, string) {
	t.Helper()
	resp := l.post(t, "k-acme", `{"model":"m","stream":true,"n":8,"messages":[]}`)
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func (l *lab) outcomes(t *testing.T, outcome string) int {
	t.Helper()
	n := 0
	mfs, _ := l.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "gateway_stream_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "outcome" && lp.GetValue() == outcome {
					n += int(m.GetHistogram().GetSampleCount())
				}
			}
		}
	}
	return n
}

func (l *lab) reason(reason string) float64 {
	return testutil.ToFloat64(l.m.upstreamErr.WithLabelValues(reason))
}

func chunkLine(content string) string {
	c, _ := json.Marshal(content)
	return fmt.Sprintf(`data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":%s}}]}`, c)
}

// sseUpstream answers with the given raw lines, each followed by "\n".
func sseUpstream(lines ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, l := range lines {
			io.WriteString(w, l+"\n")
		}
	}
}

// contents extracts delta contents from a client's view of a stream; an
// upstream's broken payload is forwarded as it came, and skipped here.
func contents(t *testing.T, body string) (text string, done bool, errs []string) {
	t.Helper()
	st, err := openaitest.Read(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return st.Text, st.Done, st.Errors
}
