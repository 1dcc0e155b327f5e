package lifecycle_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"burnlab/pager/internal/lifecycle"

	"github.com/google/pprof/profile"

	"burnlab/pager/internal/heapdelta"
	"burnlab/pager/internal/promfacts"
	"burnlab/pager/internal/promfacts/promfactstest"
	"burnlab/pager/internal/store"
	"burnlab/shared/incident"
	"burnlab/shared/slo"
)

// The functions of the delta profiles, named as the gateway's are.
const (
	appendFn = "burnlab/gateway/internal/transcript.(*Baseline).Append"
	copyFn   = "burnlab/gateway/internal/proxy.(*Proxy).copyStream"
)

// deltaAt is a 10 s delta heap profile ending at to, as the gateway's
// net/http/pprof serves one (alloc_space sampled every 512 KiB, with a
// duration), in which each function allocates rates[fn] bytes a second.
func deltaAt(t *testing.T, to time.Time, rates map[string]float64) heapdelta.Sample {
	t.Helper()
	const seconds = 10
	p := &profile.Profile{
		SampleType:    []*profile.ValueType{{Type: "alloc_objects", Unit: "count"}, {Type: "alloc_space", Unit: "bytes"}},
		PeriodType:    &profile.ValueType{Type: "space", Unit: "bytes"},
		Period:        512 << 10,
		TimeNanos:     to.Add(-seconds * time.Second).UnixNano(),
		DurationNanos: seconds * 1e9,
	}
	var total int64
	for i, name := range slices.Sorted(maps.Keys(rates)) {
		fn := &profile.Function{ID: uint64(i + 1), Name: name, SystemName: name}
		loc := &profile.Location{ID: uint64(i + 1), Line: []profile.Line{{Function: fn}}}
		p.Function, p.Location = append(p.Function, fn), append(p.Location, loc)
		space := int64(rates[name] * seconds)
		total += space
		p.Sample = append(p.Sample, &profile.Sample{Location: []*profile.Location{loc}, Value: []int64{space >> 10, space}})
	}
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	return heapdelta.Sample{From: to.Add(-seconds * time.Second), To: to, Raw: buf.Bytes(), Total: total}
}

// deltas stands in for the heapdelta.Sampler: the samples it holds.
type deltas []heapdelta.Sample

func (d deltas) Samples() []heapdelta.Sample { return d }

// newFactsPager is a pager reading facts from the Prometheus at promURL
// ("" for none) and the deltas d (nil for none), and posting its findings
// to the Alertmanagers ams.
func newFactsPager(t *testing.T, promURL string, d lifecycle.Deltas, timeout time.Duration, ams ...string) *pager {
	t.Helper()
	return newPagerIn(t, t.TempDir(), "", factsConfig(t, promURL, d, timeout, ams...))
}

// factsConfig sets what newFactsPager's pager reads its facts from.
func factsConfig(t *testing.T, promURL string, d lifecycle.Deltas, timeout time.Duration, ams ...string) func(*lifecycle.Config) {
	t.Helper()
	var prom *promfacts.Client
	if promURL != "" {
		var err error
		if prom, err = promfacts.New(promURL, nil); err != nil {
			t.Fatal(err)
		}
	}
	return func(c *lifecycle.Config) {
		c.Prometheus, c.Deltas, c.FactsTimeout, c.Alertmanagers, c.ExternalURL = prom, d, timeout, ams, "http://pager.test"
	}
}

const exemplarSeries = `gateway_stream_duration_seconds_bucket{route="/v1/chat/stream"}`

// burnAlert is the stream-latency page as the rule files write it: two
// window pairs, the SLO's ID and the series of its exemplars.
func burnAlert(start time.Time, annotations map[string]string) map[string]any {
	a := alert("firing", "page", start)
	a["labels"].(map[string]string)["sloth_id"] = "llm-gateway-stream-latency"
	ann := a["annotations"].(map[string]string)
	ann["burn_windows"] = "30s/1m over 14.4x; 2m/4m over 6x"
	ann["exemplars"] = exemplarSeries
	maps.Copy(ann, annotations)
	return a
}

// facts waits for the Handler's work and returns the one incident's facts.
func (p *pager) facts(t *testing.T) (incident.Incident, *incident.Facts) {
	t.Helper()
	p.l.Close(context.Background())
	incs := all(p.st)
	if len(incs) != 1 || incs[0].Facts == nil {
		t.Fatalf("no facts: %+v", incs)
	}
	return incs[0], incs[0].Facts
}

func near(got *float64, want float64) bool {
	return got != nil && math.Abs(*got-want) < 1e-6*max(1, math.Abs(want))
}

// A new page's facts, read from Prometheus as of the alert's start: the
// burn of each pair and which fired, the budget by docs/pager.md's formulas at
// the fired pair's long-window burn, the ten slowest requests of the burn
// window, and what changed in the heap between the delta before the burn
// and the one during it.
func TestANewPageGetsItsFacts(t *testing.T) {
	prom := promfactstest.New(t)
	prom.Set("sum_over_time(", "0.012")           // the budget spent, set first: its query holds a window's name too
	prom.Set("ratio_rate30s{", "20")              // over 14.4, but
	prom.Set("ratio_rate1m{", "12")               // under: the fast pair did not fire
	prom.Set("ratio_rate2m{", "9.8")              // the slow pair fired
	prom.Set("ratio_rate4m{", "8.1")              //
	prom.Set("time_period", "0.4166666666666667") // 10 h
	start := time.Now().Add(-2 * time.Minute).UTC().Truncate(time.Second)
	// Two series of exemplars: r15 twice, the slowest 1.7 s.
	var a, b []promfactstest.Exemplar
	for i := 1; i <= 8; i++ {
		a = append(a, promfactstest.Exemplar{RequestID: fmt.Sprintf("r%d", i), Tenant: "acme", Seconds: float64(i) / 10, At: start.Add(-time.Duration(i) * time.Second)})
	}
	for i := 9; i <= 15; i++ {
		b = append(b, promfactstest.Exemplar{RequestID: fmt.Sprintf("r%d", i), Tenant: "globex", Seconds: 1 + float64(i-8)/10, At: start.Add(-time.Duration(i) * time.Second)})
	}
	a = append(a, promfactstest.Exemplar{RequestID: "r15", Tenant: "globex", Seconds: 0.95, At: start})
	prom.Exemplars(a, b)
	// The burn over 2m rose from no traffic 150 s before the start: the
	// burn window begins a step (5 s) before the last quiet step.
	prom.SetBefore("ratio_rate2m{", start.Add(-150*time.Second), "NaN")
	burnFrom := start.Add(-160 * time.Second)
	// A delta before the burn and one during it, in which Append
	// allocates 100 times as much.
	d := deltas{
		deltaAt(t, start.Add(-5*time.Minute), map[string]float64{appendFn: 1e6, copyFn: 5e6}),
		deltaAt(t, start.Add(-time.Minute), map[string]float64{appendFn: 100e6, copyFn: 5e6}),
	}
	for i := range d {
		d[i].Lengths = &heapdelta.Lengths{SumN: 1000, SumN2: 1e6}
	}
	p := newFactsPager(t, prom.URL, d, 0)
	if status, body := p.post(t, "/webhook/page", notification(burnAlert(start, nil))); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	inc, f := p.facts(t)

	if len(f.Pairs) != 2 || f.Pair != 1 || f.Pairs[0].Fired || !f.Pairs[1].Fired {
		t.Errorf("pairs %+v, chosen %d: want the 2m/4m pair fired, the 30s/1m not", f.Pairs, f.Pair)
	}
	if p0 := f.Pairs[0]; !near(p0.ShortBurn, 20) || !near(p0.LongBurn, 12) || p0.Factor != 14.4 || p0.Short != "30s" || p0.Long != "1m" {
		t.Errorf("fast pair %+v: want 20x and 12x, over 14.4x", p0)
	}
	if p1 := f.Pairs[1]; !near(p1.ShortBurn, 9.8) || !near(p1.LongBurn, 8.1) || p1.Factor != 6 {
		t.Errorf("slow pair %+v", p1)
	}
	// left × period ÷ b = 0.988 × 36,000 s ÷ 8.1
	runsOut := 0.988 * 36000 / 8.1
	if bu := f.Budget; bu == nil || math.Abs(bu.SpentPct-1.2) > 1e-9 || math.Abs(bu.LeftPct-98.8) > 1e-9 || bu.Period != "10h" ||
		!near(bu.Burn, 8.1) || bu.BurnWindow != "4m" || !near(bu.RunsOutSeconds, runsOut) || bu.RunsOut != "1h13m11s" {
		t.Errorf("budget %+v, want 1.2%% spent, 98.8%% left of 10h, runs out in %.1f s (1h13m11s) at the 4m burn of 8.1x", bu, runsOut)
	}
	for _, q := range prom.Asked() {
		switch {
		case q.Path == "/api/v1/query" && !q.Time.Equal(start):
			t.Errorf("%s read at %s, want the alert's start %s", q.Query, q.Time, start)
		case q.Path == "/api/v1/query_exemplars" && (q.Query != exemplarSeries || !q.Start.Equal(burnFrom) || !q.End.Equal(start)):
			t.Errorf("exemplars asked %+v, want %s from the burn's start, %s", q, exemplarSeries, burnFrom)
		case strings.HasPrefix(q.Query, "((sum_over_time(") && q.Query != slo.SpentExpr("llm-gateway-stream-latency", 30*time.Second, 10*time.Hour):
			t.Errorf("budget query %s, want the 30s error ratio summed over the 10h period", q.Query)
		case strings.HasPrefix(q.Query, "slo:sli_error") && !strings.Contains(q.Query, `{sloth_id="llm-gateway-stream-latency"} / on(sloth_id) group_left slo:error_budget:ratio{sloth_id="llm-gateway-stream-latency"}`):
			t.Errorf("burn query %s", q.Query)
		}
	}
	var got []string
	for _, e := range f.Slowest {
		got = append(got, fmt.Sprintf("%s %s %.2f", e.RequestID, e.Tenant, e.Seconds))
	}
	want := []string{"r15 globex 1.70", "r14 globex 1.60", "r13 globex 1.50", "r12 globex 1.40", "r11 globex 1.30",
		"r10 globex 1.20", "r9 globex 1.10", "r8 acme 0.80", "r7 acme 0.70", "r6 acme 0.60"}
	if !slices.Equal(got, want) || f.ExemplarQuery != exemplarSeries || !f.Slowest[9].At.Equal(start.Add(-6*time.Second)) {
		t.Errorf("slowest:\n%s\nwant (sorted, one per request ID, ten):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	h := f.Heap
	if h == nil || !h.Changed || h.Function != appendFn || !strings.Contains(h.Words, "transcript.(*Baseline).Append grew") ||
		math.Abs(h.Before-1e6) > 1e3 || math.Abs(h.During-100e6) > 1e5 || !h.DuringTo.Equal(start.Add(-time.Minute)) || !h.BeforeTo.Equal(start.Add(-5*time.Minute)) {
		t.Fatalf("heap %+v: want Append, 1 MB/s to 100 MB/s", h)
	}
	if g := h.Growth; g == nil || g.Fitted || g.Windows != 2 || !strings.Contains(g.Words, "only 2 delta windows") {
		t.Errorf("growth %+v: two deltas are too few to fit", g)
	}
	if len(f.Errors) != 0 {
		t.Errorf("errors %q", f.Errors)
	}

	// The deltas are stored, served by the API, and named for the alert.
	for which, file := range map[string]string{"before": h.BeforeFile, "during": h.DuringFile} {
		if want := fmt.Sprintf("profiles/%s-%d-delta-%s.pb.gz", fingerprint("page"), start.Unix(), which); file != want {
			t.Errorf("%s file %q, want %q", which, file, want)
		}
		if _, err := os.Stat(filepath.Join(p.Dir, file)); err != nil {
			t.Error(err)
		}
		resp, err := http.Get(p.Srv.URL + "/api/incidents/" + inc.ID + "/delta/" + which)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(b) < 50 {
			t.Errorf("GET delta/%s: %d, %d bytes", which, resp.StatusCode, len(b))
		}
	}
	for _, path := range []string{"/api/incidents/" + inc.ID + "/delta/after", "/api/incidents/nope/delta/before"} {
		resp, err := http.Get(p.Srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("GET %s: %d, want 404", path, resp.StatusCode)
		}
	}

	// The API's JSON, in the names the e2e reads.
	resp, err := http.Get(p.Srv.URL + "/api/incidents/" + inc.ID)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`"facts":{`, `"pairs":[{"short":"30s","long":"1m","short_burn":20,"long_burn":12,"factor":14.4,"fired":false}`,
		`"fired":true`, `"spent_pct":1.2`, `"left_pct":98.8`, `"period":"10h"`, `"slowest":[{"request_id":"r15","tenant":"globex","seconds":1.7`,
		`"heap":{"changed":true,"function":"` + appendFn + `","words":`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the API's incident lacks %s:\n%s", want, body)
		}
	}
	if !strings.Contains(fmt.Sprint(inc.Timeline), "facts read from Prometheus: fired through 2m/4m over 6x") || !strings.Contains(p.Logs.String(), "FACTS at page time") {
		t.Errorf("no facts line in the timeline %v or the log", inc.Timeline)
	}

	// A repeat of the page reads nothing more.
	n := len(prom.Asked())
	p2 := with(burnAlert(start.Truncate(time.Second), nil), "annotations", map[string]string{"burn_rate": "14.4x"})
	p.post(t, "/webhook/page", notification(p2))
	if got := len(prom.Asked()); got != n {
		t.Errorf("a repeat asked Prometheus %d more times", got-n)
	}
	// A ticket reads its own facts, as a page does.
	ticket := with(burnAlert(start, nil), "fingerprint", fingerprint("ticket"))
	ticket["labels"].(map[string]string)["severity"] = "ticket"
	p.post(t, "/webhook/ticket", notification(ticket))
	p.l.Close(context.Background())
	if got := len(prom.Asked()); got == n {
		t.Error("a ticket asked Prometheus nothing")
	}
	tinc, ok := p.st.Incident(store.IncidentID(&store.Alert{Fingerprint: fingerprint("ticket"), StartsAt: start}))
	if !ok || tinc.Facts == nil || tinc.Facts.Heap == nil || tinc.Facts.Heap.Function != appendFn {
		t.Errorf("the ticket's facts: %+v, want them with the heap's verdict naming %s", tinc.Facts, appendFn)
	}
}

// A page whose heap changed says how the function's bytes per stream grow
// with the stream's length, from every delta the pager holds and the
// gateway's stream counts in each delta's window. Here the streams' mean
// length doubles and their length-weighted mean quadruples 135 s before
// the alert, and Append's bytes grow eightfold: as Σn², so n².
//
// A creep's alert, whose burn window reaches back past the oldest delta
// the pager holds (a ticket's 48m or 3d), has no "before" to compare the
// heap with; the fit is then about the function that allocated the most,
// and says the same.
func TestAPageSaysHowItsFunctionGrows(t *testing.T) {
	start := time.Now().Add(-2 * time.Minute).UTC().Truncate(time.Second)
	for _, burnSince := range []time.Duration{150 * time.Second, 20 * time.Minute} {
		t.Run(fmt.Sprintf("burning for %s", burnSince), func(t *testing.T) { testGrowth(t, start, burnSince) })
	}
}

func testGrowth(t *testing.T, start time.Time, burnSince time.Duration) {
	prom := promfactstest.New(t)
	prom.Set("ratio_rate30s{", "20")
	prom.Set("ratio_rate1m{", "12")
	prom.Set("ratio_rate2m{", "9.8")
	prom.Set("ratio_rate4m{", "8.1")
	prom.SetBefore("ratio_rate2m{", start.Add(-burnSince), "NaN") // the burn from 10 s earlier
	grew := start.Add(-135 * time.Second)
	var d, uncounted deltas
	for i := 8; i >= 1; i-- {
		to := start.Add(-time.Duration(i) * 30 * time.Second)
		rate, l := 1e6, heapdelta.Lengths{SumN: 1000, SumN2: 1e6}
		if to.After(grew) {
			rate, l = 8e6, heapdelta.Lengths{SumN: 2000, SumN2: 8e6}
		}
		s := deltaAt(t, to, map[string]float64{appendFn: rate, copyFn: 5e6})
		uncounted = append(uncounted, s)
		s.Lengths = &l
		d = append(d, s)
	}
	p := newFactsPager(t, prom.URL, d, 0)
	if status, body := p.post(t, "/webhook/page", notification(burnAlert(start, nil))); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	_, f := p.facts(t)
	if compared := burnSince < 4*time.Minute; compared != f.Heap.Changed {
		t.Errorf("heap %+v: compared and changed %v, want %v", f.Heap, f.Heap.Changed, compared)
	}
	g := f.Heap.Growth
	if g == nil || !g.Fitted || g.Function != appendFn || math.Abs(g.Exponent-2) > 0.01 || g.R2 < 0.99 || g.Windows != 8 || math.Abs(g.Spread-4) > 0.01 ||
		!strings.HasPrefix(g.Words, "transcript.(*Baseline).Append: bytes per stream grow as n^2.0 with the stream's length (± 0.00, R² 1.00 over 8 delta windows): quadratic") {
		t.Fatalf("growth %+v", g)
	}
	// The log holds the points the fit read, so a verdict can be checked.
	if logs := p.Logs.String(); !strings.Contains(logs, `"sum_n":[1000,1000,1000,1000,2000,2000,2000,2000]`) || !strings.Contains(logs, `"bytes":[10000000,`) {
		t.Errorf("log holds no fit's windows:\n%s", logs)
	}
	for _, q := range prom.Asked() {
		if strings.Contains(q.Query, "gateway_stream_length_events") {
			t.Errorf("asked Prometheus %s: the counts are the deltas' own", q.Query)
		}
	}
	// lifecycle.Deltas without the gateway's stream counts: the page says so.
	p2 := newFactsPager(t, prom.URL, uncounted, 0)
	p2.post(t, "/webhook/page", notification(burnAlert(start, nil)))
	_, f2 := p2.facts(t)
	if g := f2.Heap.Growth; g == nil || g.Fitted || g.Error != lifecycle.NoLengths || !slices.Contains(f2.Errors, "the growth: "+lifecycle.NoLengths) {
		t.Errorf("growth %+v, errors %q: want the missing counts said", g, f2.Errors)
	}
}

// A Prometheus that hangs costs the page nothing: the webhook answers at
// once, and the facts say, in words, what could not be read once the
// queries time out; so does a Prometheus that is down.
func TestPrometheusDownOrHangingNeverDelaysThePage(t *testing.T) {
	// The form is read first: the server notices a client gone only once
	// the request's body is.
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		<-r.Context().Done()
	}))
	defer hang.Close()
	down := promfactstest.New(t)
	down.Close()
	for _, c := range []struct {
		name, url, words string
	}{{"hanging", hang.URL, "context deadline exceeded"}, {"down", down.URL, "connection refused"}} {
		t.Run(c.name, func(t *testing.T) {
			p := newFactsPager(t, c.url, nil, 300*time.Millisecond)
			begin := time.Now()
			if status, _ := p.post(t, "/webhook/page", notification(burnAlert(time.Now().Add(-time.Minute), nil))); status != 200 {
				t.Fatal(status)
			}
			if d := time.Since(begin); d > 250*time.Millisecond {
				t.Fatalf("the page waited %s for Prometheus", d)
			}
			_, f := p.facts(t)
			errs := strings.Join(f.Errors, "\n")
			for _, want := range []string{"the burn over 30s: ", c.words, "the budget: ", "the slowest requests: ", "the heap: the pager runs without -profile-url"} {
				if !strings.Contains(errs, want) {
					t.Errorf("errors lack %q:\n%s", want, errs)
				}
			}
			if f.Budget != nil || len(f.Pairs) != 2 || f.Pairs[0].ShortBurn != nil || f.Pairs[1].Fired || f.Pair != 1 {
				t.Errorf("facts %+v: want the pairs listed with no burn, the slowest chosen, no budget", f)
			}
		})
	}
}

// What comes in a payload goes into a query only when it is what it must
// be: a sloth_id that is not a plain token, or an exemplars annotation
// that is not a series selector, is never sent; an alert without the
// annotation gets no exemplar query, and no error.
func TestPayloadTextIsCheckedBeforeItIsQueried(t *testing.T) {
	prom := promfactstest.New(t)
	prom.Set("sum_over_time(", "0.5")
	prom.Set("time_period", "0.4166666666666667")
	start := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	cases := []struct {
		name    string
		alert   map[string]any
		errs    string
		queries int
	}{
		{"hostile sloth_id", with(burnAlert(start, nil), "labels", map[string]string{"severity": "page", "sloth_id": `x"} or vector(1) #`}),
			`sloth_id label "x\"} or vector(1) #" is not a plain SLO ID`, 0},
		{"hostile selector", burnAlert(start, map[string]string{"exemplars": `up{a="b"} or sum(rate(x[5m]))`}),
			"exemplars annotation", 8},
		{"no exemplars annotation", burnAlert(start, map[string]string{"exemplars": ""}), "", 8},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := len(prom.Asked())
			p := newFactsPager(t, prom.URL, deltas{}, 0)
			p.post(t, "/webhook/page", notification(c.alert))
			_, f := p.facts(t)
			asked := prom.Asked()[before:]
			if len(asked) != c.queries || slices.ContainsFunc(asked, func(a promfactstest.Asked) bool { return a.Path == "/api/v1/query_exemplars" }) {
				t.Errorf("asked %+v, want %d queries (the instant ones, and when the burn began) and no exemplars", asked, c.queries)
			}
			errs := strings.Join(f.Errors, "\n")
			if c.errs != "" && !strings.Contains(errs, c.errs) || c.errs == "" && strings.Contains(errs, "exemplar") {
				t.Errorf("errors %q, want %q", errs, c.errs)
			}
			if !strings.Contains(errs, "the heap: the pager holds no delta profiles") {
				t.Errorf("no samples: errors %q", errs)
			}
		})
	}
}

// With -gc-job, a page's facts hold the collector's share of its job's CPU
// over the burn window and before it, and the timeline's facts line says
// it; once the page resolves the share is read again, over the minute
// after the resolve, once it is over. Without a job, none is read.
func TestAPageReadsTheGCOfItsJob(t *testing.T) {
	for _, job := range []string{"gateway", ""} {
		prom := promfactstest.New(t)
		prom.Set("ratio_rate2m{", "9.8")
		prom.Set("ratio_rate4m{", "8.1")
		start := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
		prom.SetBefore("go_cpu_classes_gc_total", start.Add(-time.Minute), "0.04")
		prom.Set("go_cpu_classes_gc_total", "0.61")
		clk := newFakeClock(time.Now())
		p := newPagerIn(t, t.TempDir(), "", factsConfig(t, prom.URL, nil, 0), func(c *lifecycle.Config) { c.GCJob, c.Clock = job, clk })
		if status, body := p.post(t, "/webhook/page", notification(burnAlert(start, nil))); status != 200 {
			t.Fatalf("%d %s", status, body)
		}
		resolved := clk.Now()
		if status, body := p.post(t, "/webhook/page", notification(with(burnAlert(start, nil), "status", "resolved"))); status != 200 {
			t.Fatalf("resolve: %d %s", status, body)
		}
		if job != "" {
			if wake := <-clk.asleep; !wake.Equal(resolved.Add(75 * time.Second)) {
				t.Errorf("the GC after the resolve is read at %s, want the resolve's minute and 15 s later, %s", wake, resolved.Add(75*time.Second))
			}
			clk.Advance(75 * time.Second)
		}
		inc, f := p.facts(t)
		if job == "" {
			if f.GC != nil || inc.GCAfter != nil || strings.Contains(fmt.Sprint(prom.Asked()), "go_cpu_classes") {
				t.Errorf("without a job the GC was read: %+v, after %+v", f.GC, inc.GCAfter)
			}
			continue
		}
		if g := inc.GCAfter; g == nil || !near(g.CPUShare, 0.61) || !g.From.Equal(resolved) || !strings.Contains(fmt.Sprint(inc.Timeline), "after the resolve GC took 61%") {
			t.Errorf("the GC after the resolve: %+v; timeline %v", g, inc.Timeline)
		}
		if f.GC == nil || !near(f.GC.CPUShareDuring, 0.61) || !near(f.GC.CPUShareBefore, 0.04) || !f.GC.DuringTo.Equal(start) {
			t.Fatalf("GC %+v, want 61%% during the burn and 4%% before, up to the alert's start", f.GC)
		}
		if !strings.Contains(fmt.Sprint(inc.Timeline), "GC took 61% of gateway's CPU during the burn (4% before)") {
			t.Errorf("the timeline's facts line does not say the GC: %v", inc.Timeline)
		}
	}
}
