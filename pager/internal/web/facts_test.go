package web

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"burnlab/pager/internal/promfacts"
	"burnlab/pager/internal/promfacts/promfactstest"
	"burnlab/pager/internal/store"
	"burnlab/shared/incident"
	"burnlab/shared/pproftop/pproftoptest"
)

// hostile is text from a payload, or from what a payload made Prometheus
// say, that would be markup if it were not escaped.
const hostile = `<script>alert(1)</script><img src=x onerror=alert(2)>`

// burnPage stores a firing stream-latency page whose facts are fs (with
// delta profiles when withDeltas), and returns its id.
func (u *ui) burnPage(fp string, start time.Time, withDeltas bool) string {
	u.t.Helper()
	a := store.Alert{Status: "firing", Fingerprint: fp, StartsAt: start,
		Labels: map[string]string{"alertname": "LLMGatewayStreamLatencyBudgetBurn", "severity": "page", "sloth_slo": "stream-latency", "sloth_id": "llm-gateway-stream-latency"},
		Annotations: map[string]string{"burn_rate": "2m 9.8x and 4m 8.1x, over 6x", "burn_windows": "30s/1m over 14.4x; 2m/4m over 6x",
			"exemplars": `gateway_stream_duration_seconds_bucket{route="/v1/chat/stream"}`, "summary": hostile}}
	acc, err := u.st.AddNotification("pager-page", "page", []store.Alert{a}, start)
	if err != nil {
		u.t.Fatal(err)
	}
	id := acc[0].Incident
	burn := func(v float64) *float64 { return &v }
	f := incident.Facts{TakenAt: start.Add(time.Second), Pair: 1, BurnFrom: start.Add(-4 * time.Minute),
		Pairs: []incident.PairBurn{{Short: "30s", Long: "1m", ShortBurn: burn(20), Factor: 14.4},
			{Short: "2m", Long: "4m", ShortBurn: burn(9.8), LongBurn: burn(8.1), Factor: 6, Fired: true}},
		Budget:        &incident.Budget{SpentPct: 1.2, LeftPct: 98.8, Period: "10h", Burn: burn(8.1), BurnWindow: "4m", RunsOutSeconds: burn(4391), RunsOut: "1h13m11s"},
		ExemplarQuery: a.Annotations["exemplars"],
		Slowest: []incident.Exemplar{{RequestID: "req-" + hostile, Tenant: "tenant-" + hostile, Seconds: 2.345, At: start.Add(-time.Minute)},
			{RequestID: "req-2", Tenant: "acme", Seconds: 1.5, At: start.Add(-2 * time.Minute)}},
		Heap:   &incident.HeapChange{Changed: true, Function: "transcript.(*Baseline).Append", Words: "Append grew " + hostile, Before: 1e6, During: 1e8},
		Errors: []string{"the budget: " + hostile}}
	if withDeltas {
		for _, d := range []struct {
			suffix string
			file   *string
			raw    []byte
		}{{"-delta-before", &f.Heap.BeforeFile, pproftoptest.IdleProfile(u.t)}, {"-delta-during", &f.Heap.DuringFile, pproftoptest.HeapProfile(u.t)}} {
			name := fmt.Sprintf("%s-%d%s.pb.gz", fp, start.Unix(), d.suffix)
			if err := u.st.SaveProfile(name, d.raw); err != nil {
				u.t.Fatal(err)
			}
			*d.file = store.ProfilesDir + "/" + name
		}
	}
	if err := u.st.AddFacts(id, f, start.Add(time.Second)); err != nil {
		u.t.Fatal(err)
	}
	return id
}

// The incident's page tells the whole story, in order under the title:
// how bad (the pairs), the burn chart read from Prometheus, the budget,
// the slowest requests, the page-time profile, what changed in the heap;
// and whatever came from a payload, or from Prometheus, is text.
func TestTheIncidentPageTellsTheWholeStory(t *testing.T) {
	prom := promfactstest.New(t)
	prom.Set("ratio_rate2m{", "9.5")
	prom.Set("ratio_rate4m{", "7.25")
	client, err := promfacts.New(prom.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	u := newUIWith(t, Config{Prometheus: client})
	start := time.Now().Add(-3 * time.Minute).UTC().Truncate(time.Second)
	id := u.burnPage(fp1, start, true)
	u.profile(id, "page.pb.gz", pproftoptest.HeapProfile(t), false)
	body := u.get("/incidents/"+id, 200)

	last := 0
	for _, section := range []string{`id="burn-pairs"`, `id="burn-chart"`, `id="budget"`, `id="slowest"`, `id="profile"`, `id="heap-change"`} {
		i := strings.Index(body, section)
		if i < last {
			t.Errorf("%s is missing or out of order (at %d, after %d)", section, i, last)
		}
		last = max(last, i)
	}
	for _, want := range []string{
		"2m / 4m", "9.8x / 8.1x", "✓ fired", "20.0x / no data", // the pairs
		"<svg", `class="burn-long"`, "4m (long)", "over 6x", // the chart
		"1.2%", "98.8%", "1h13m11s", "10h", // the budget
		"2.345 s", "req-2", "acme", // the slowest
		"/incidents/" + id + "/delta/flamegraph?si=alloc_space", "/api/incidents/" + id + "/delta/during", // the heap
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the incident page lacks %q", want)
		}
	}
	for _, bad := range []string{"<script", "<img"} {
		if strings.Contains(body, bad) {
			t.Errorf("%q is markup on the page", bad)
		}
	}
	if n := strings.Count(body, "&lt;script&gt;alert(1)&lt;/script&gt;"); n < 5 {
		t.Errorf("the hostile text is shown escaped %d times, want in the summary, the slowest (2), the heap's words and the errors", n)
	}
	// The chart was read for the fired pair, from twice its long window
	// before the start.
	asked := prom.Asked()
	if len(asked) != 2 || asked[0].Path != "/api/v1/query_range" || !strings.Contains(asked[0].Query, "ratio_rate2m{") ||
		!strings.Contains(asked[1].Query, "ratio_rate4m{") || !asked[0].Start.Equal(start.Add(-8*time.Minute)) {
		t.Errorf("chart queries %+v", asked)
	}

	// pprof's UI on the delta during the burn, with the one before as the
	// base; an incident without the deltas has none.
	if top := u.get("/incidents/"+id+"/delta/top?si=alloc_space", 200); !strings.Contains(top, pproftoptest.Allocator) {
		t.Errorf("delta top:\n%.2000s", top)
	}
	other := u.burnPage(fp2, start, false)
	u.get("/incidents/"+other+"/delta/top", 404)
	u.get("/incidents/"+other+"/delta/", 404)
	plain := u.page(fp3, start, nil)
	u.get("/incidents/"+plain+"/delta/flamegraph", 404)
	if page := u.get("/incidents/"+plain, 200); !strings.Contains(page, "Not read yet") {
		t.Errorf("a page without facts does not say so")
	}
}

// Without Prometheus the page still renders, and says why it has no chart.
func TestNoChartIsANote(t *testing.T) {
	down := promfactstest.New(t)
	down.Close()
	client, _ := promfacts.New(down.URL, nil)
	for _, c := range []struct {
		name string
		cfg  Config
		note string
	}{
		{"down", Config{Prometheus: client}, "No burn chart: Prometheus at " + down.URL + " could not be read"},
		{"none", Config{}, "The pager runs without -prometheus-url: no burn chart."},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := newUIWith(t, c.cfg)
			id := u.burnPage(fp1, time.Now().Add(-time.Minute), false)
			body := u.get("/incidents/"+id, 200)
			chart := regexp.MustCompile(`(?s)<section id="burn-chart">(.*?)</section>`).FindStringSubmatch(body)
			if chart == nil || !strings.Contains(chart[1], c.note) || strings.Contains(chart[1], "<svg") {
				t.Errorf("the chart's section: %q, want the note %q", chart, c.note)
			}
		})
	}
}
