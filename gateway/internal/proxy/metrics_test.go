package proxy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"burnlab/shared/service"
)

// A gateway that has served nothing exposes its SLIs' series at zero: the
// no-data alert must read an idle gateway as no traffic, not as a scrape
// that stopped.
func TestSLISeriesExistBeforeTheFirstStream(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	NewMetrics(reg, "fixed", "test", nil)
	for _, c := range []struct {
		name   string
		series int
	}{
		{"gateway_stream_duration_seconds", 2 * 4 * 2}, // two routes × four outcomes × user and probe traffic
		{"gateway_stream_ttft_seconds", 2 * 2},         // two routes × user and probe traffic
	} {
		n, err := testutil.GatherAndCount(reg, c.name)
		if err != nil {
			t.Fatal(err)
		}
		if n != c.series {
			t.Errorf("%s: %d series before any stream, want %d", c.name, n, c.series)
		}
	}
}

// A stream's duration carries an exemplar naming it: the request ID the
// client got in X-Request-Id and the gateway's log line carries, and its
// tenant, so a slow stream seen in the histogram's buckets leads to its
// log line.
func TestStreamDurationExemplarNamesTheStream(t *testing.T) {
	l := newLab(t, sseUpstream(chunkLine(" hello"), "", "data: [DONE]", ""))
	resp, _ := l.stream(t)
	id := resp.Header.Get("X-Request-Id")
	if id == "" {
		t.Fatal("no X-Request-Id in the response")
	}
	want := map[string]string{"request_id": id, "tenant": "acme"}

	if got := durationExemplar(t, l.reg, RouteStream, OutcomeOK, TrafficUser); !maps.Equal(got, want) {
		t.Errorf("exemplar labels %v, want %v", got, want)
	}

	var line struct {
		Message   string `json:"message"`
		RequestID string `json:"request_id"`
		Tenant    string `json:"tenant"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(l.logs.String())), &line); err != nil {
		t.Fatalf("the stream's log line: %v\n%s", err, l.logs.String())
	}
	if line.Message != "stream" || line.RequestID != id || line.Tenant != "acme" {
		t.Errorf("log line %+v, want message stream, request_id %s, tenant acme", line, id)
	}

	// Prometheus reads exemplars only from OpenMetrics text, which the
	// admin server sends a scraper that asks for it.
	admin := httptest.NewServer(service.AdminMux(l.reg, nil))
	defer admin.Close()
	req, _ := http.NewRequest(http.MethodGet, admin.URL+"/metrics", nil)
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	scrape, err := admin.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer scrape.Body.Close()
	body, _ := io.ReadAll(scrape.Body)
	if ct := scrape.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") {
		t.Fatalf("scrape answered %s, want OpenMetrics text", ct)
	}
	found := false
	for _, s := range strings.Split(string(body), "\n") {
		series, exemplar, ok := strings.Cut(s, " # {")
		if ok && strings.HasPrefix(series, "gateway_stream_duration_seconds_bucket{") && strings.Contains(series, `outcome="ok"`) &&
			strings.Contains(exemplar, `request_id="`+id+`"`) && strings.Contains(exemplar, `tenant="acme"`) {
			found = true
		}
	}
	if !found {
		t.Errorf("no gateway_stream_duration_seconds bucket in the OpenMetrics scrape has the exemplar # {request_id=%q,tenant=\"acme\"}:\n%s", id, grepLines(string(body), "gateway_stream_duration_seconds_bucket"))
	}
}

// A probe tenant's stream (the loadgen's calibration) is counted, as
// traffic="probe", in both stream histograms, and a customer's as
// traffic="user": the SLIs leave out the one and count the other.
func TestAProbeTenantsStreamsAreLabelledProbe(t *testing.T) {
	l := newLab(t, sseUpstream(chunkLine(" hello"), "", "data: [DONE]", ""))
	for _, key := range []string{"k-probe", "k-acme", "k-acme"} {
		resp := l.post(t, key, `{"model":"m","stream":true,"messages":[]}`)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	for traffic, want := range map[string]uint64{TrafficProbe: 1, TrafficUser: 2} {
		for _, name := range []string{"gateway_stream_duration_seconds", "gateway_stream_ttft_seconds"} {
			if n := histogramCount(t, l.reg, name, traffic); n != want {
				t.Errorf("%s{traffic=%q}: %d streams, want %d", name, traffic, n, want)
			}
		}
	}
	if got := durationExemplar(t, l.reg, RouteStream, OutcomeOK, TrafficProbe); got["tenant"] != "calibration" {
		t.Errorf("the probe stream's exemplar %v, want tenant calibration", got)
	}
}

// Each ended stream has added its event count to the length histogram
// and its square to the places: streams of 1, 2 and 3 chunks and their [DONE]
// (2, 3 and 4 events) make Σn 9 and Σn² 29.
func TestStreamLengthsAndTheirSquaresAreSummed(t *testing.T) {
	var served atomic.Int64
	l := newLab(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range served.Add(1) {
			io.WriteString(w, chunkLine(fmt.Sprintf(" t%d", i))+"\n\n")
		}
		io.WriteString(w, "data: [DONE]\n\n")
	})
	for range 3 {
		resp := l.post(t, "k-acme", `{"model":"m","stream":true,"messages":[]}`)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if got := testutil.ToFloat64(l.m.places); got != 29 {
		t.Errorf("Σn² = %v, want 4+9+16 = 29", got)
	}
	mfs, err := l.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "gateway_stream_length_events" {
			if h := mf.GetMetric()[0].GetHistogram(); h.GetSampleSum() != 9 || h.GetSampleCount() != 3 {
				t.Errorf("Σn = %v over %d streams, want 9 over 3", h.GetSampleSum(), h.GetSampleCount())
			}
			return
		}
	}
	t.Error("no gateway_stream_length_events")
}

// A stream's events and their places are counted as it goes, not when it
// ends: at each of the upstream's two pauses, what was forwarded is
// counted already, n events and Σ(2i-1) = n², and by the end a stream of
// n events has added n and n².
func TestEventsAreCountedAsTheyAreForwarded(t *testing.T) {
	const pauses = 2
	var paused, resume [pauses]chan struct{}
	for i := range pauses {
		paused[i], resume[i] = make(chan struct{}), make(chan struct{})
	}
	l := newLab(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for p := range pauses {
			for i := range 3 {
				io.WriteString(w, chunkLine(fmt.Sprintf(" t%d.%d", p, i))+"\n\n")
			}
			w.(http.Flusher).Flush()
			close(paused[p])
			select {
			case <-resume[p]:
			case <-r.Context().Done():
				return
			}
		}
		io.WriteString(w, chunkLine(" end")+"\n\ndata: [DONE]\n\n")
	}, func(c *Config) { c.IdleTimeout = time.Minute }) // the pauses are the test's, not an idle upstream
	resp := l.post(t, "k-acme", `{"model":"m","stream":true,"messages":[]}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	rd := bufio.NewReader(resp.Body)
	read, counted := 0, 0.0
	for p := range pauses {
		select {
		case <-paused[p]:
		case <-time.After(time.Minute):
			t.Fatalf("the upstream never reached pause %d", p)
		}
		// Read two more events: the gateway counts before it
		// waits on the upstream and writes to the client after, so
		// what was read is counted.
		for want := read + 2; read < want; {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatalf("after %d events: %v", read, err)
			}
			if strings.HasPrefix(line, "data: ") {
				read++
			}
		}
		n, sq := testutil.ToFloat64(l.m.events), testutil.ToFloat64(l.m.places)
		if n < float64(read) || n <= counted || sq != n*n || histogramSamples(t, l.reg, "gateway_stream_length_events") != 0 {
			t.Errorf("pause %d: %v events, Σ(2i-1) %v, want at least the %d read, more than %v before, n², and no ended stream", p, n, sq, read, counted)
		}
		counted = n
		close(resume[p])
	}
	rest, err := io.ReadAll(rd)
	if err != nil || !strings.Contains(string(rest), "[DONE]") {
		t.Fatalf("%v %q", err, rest)
	}
	resp.Body.Close()
	// record runs after the client has its last byte.
	for deadline := time.Now().Add(time.Minute); histogramSamples(t, l.reg, "gateway_stream_length_events") == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stream was never recorded")
		}
	}
	n, sq := testutil.ToFloat64(l.m.events), testutil.ToFloat64(l.m.places)
	if n <= counted || sq != n*n {
		t.Errorf("ended: %v events, Σ(2i-1) %v, want more than %v and n² = %v", n, sq, counted, n*n)
	}
}

// histogramSamples is how many observations the unlabelled histogram name
// holds.
func histogramSamples(t *testing.T, reg prometheus.Gatherer, name string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatalf("no %s", name)
	return 0
}

// histogramCount sums the observations of the histogram name's series
// with the traffic label's value.
func histogramCount(t *testing.T, reg prometheus.Gatherer, name, traffic string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "traffic" && lp.GetValue() == traffic {
					n += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return n
}

// durationExemplar returns the labels of the one exemplar on
// gateway_stream_duration_seconds for route, outcome and traffic, after
// checking it sits in the bucket of its value and is the stream's one
// observation.
func durationExemplar(t *testing.T, reg prometheus.Gatherer, route, outcome, traffic string) map[string]string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "gateway_stream_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if labels["route"] != route || labels["outcome"] != outcome || labels["traffic"] != traffic {
				continue
			}
			h := m.GetHistogram()
			var found map[string]string
			lower := math.Inf(-1)
			for _, b := range h.GetBucket() {
				if e := b.GetExemplar(); e != nil {
					if found != nil {
						t.Fatalf("two exemplars for one stream: %v and %v", found, e)
					}
					if v := e.GetValue(); v <= lower || v > b.GetUpperBound() {
						t.Errorf("exemplar %v in the bucket (%v, %v]", v, lower, b.GetUpperBound())
					}
					if e.GetValue() != h.GetSampleSum() || h.GetSampleCount() != 1 {
						t.Errorf("exemplar value %v, want the one observation's %v (count %d)", e.GetValue(), h.GetSampleSum(), h.GetSampleCount())
					}
					found = map[string]string{}
					for _, lp := range e.GetLabel() {
						found[lp.GetName()] = lp.GetValue()
					}
				}
				lower = b.GetUpperBound()
			}
			if found == nil {
				t.Fatalf("gateway_stream_duration_seconds{route=%q,outcome=%q,traffic=%q} has no exemplar: %v", route, outcome, traffic, h)
			}
			return found
		}
	}
	t.Fatalf("no gateway_stream_duration_seconds{route=%q,outcome=%q,traffic=%q}", route, outcome, traffic)
	return nil
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// ObserveWithExemplar panics on labels past prometheus.ExemplarMaxRunes or
// not valid UTF-8. A tenant name no config should allow must cost the
// exemplar its tenant, and a request ID that cannot be one the exemplar,
// never the gateway.
func TestStreamExemplarNeverPanics(t *testing.T) {
	id := "0123456789abcdef"
	for _, c := range []struct {
		name, id, tenant string
		want             prometheus.Labels
	}{
		{"both", id, "acme", prometheus.Labels{"request_id": id, "tenant": "acme"}},
		{"the longest request ID and tenant name the gateway takes", strings.Repeat("r", 64), strings.Repeat("t", 32),
			prometheus.Labels{"request_id": strings.Repeat("r", 64), "tenant": strings.Repeat("t", 32)}},
		{"no tenant", id, "", prometheus.Labels{"request_id": id}},
		{"a very long tenant name", id, strings.Repeat("t", 1000), prometheus.Labels{"request_id": id}},
		{"a tenant name one rune too long", id, strings.Repeat("t", prometheus.ExemplarMaxRunes-len("request_idtenant")-len(id)+1), prometheus.Labels{"request_id": id}},
		{"a tenant name not UTF-8", id, "acme\xff", prometheus.Labels{"request_id": id}},
		{"a very long request ID", strings.Repeat("r", 200), "acme", nil},
		{"a request ID not UTF-8", "\xff", "acme", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := NewMetrics(reg, "fixed", "test", nil)
			m.observeStream(RouteStream, OutcomeOK, TrafficUser, 0.25, c.id, c.tenant)
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			var got prometheus.Labels
			for _, mf := range mfs {
				if mf.GetName() != "gateway_stream_duration_seconds" {
					continue
				}
				for _, metric := range mf.GetMetric() {
					h := metric.GetHistogram()
					if h.GetSampleCount() == 0 {
						continue
					}
					if h.GetSampleSum() != 0.25 {
						t.Errorf("observed %v, want 0.25", h.GetSampleSum())
					}
					for _, b := range h.GetBucket() {
						for _, lp := range b.GetExemplar().GetLabel() {
							if got == nil {
								got = prometheus.Labels{}
							}
							got[lp.GetName()] = lp.GetValue()
						}
					}
				}
			}
			if !maps.Equal(got, c.want) {
				t.Errorf("exemplar labels %v, want %v", got, c.want)
			}
		})
	}
}
