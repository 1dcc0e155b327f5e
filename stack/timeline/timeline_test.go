package timeline

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"burnlab/shared/incident"
	"burnlab/shared/variant"
	"burnlab/stack/lab"
)

const appendFull = "burnlab/gateway/internal/transcript.(*Baseline).Append"

func diagnosed(sev string, at time.Time, g *incident.Growth) incident.Incident {
	return incident.Incident{ID: sev + "-1", SLO: slo, Severity: sev, AlertName: "LLMGatewayStreamLatencyBudgetBurn",
		Timeline: []incident.Event{{At: at}},
		Profile:  &incident.Profile{Top: []incident.TopEntry{{Function: appendFull, FlatPct: 93}}},
		Facts:    &incident.Facts{Heap: &incident.HeapChange{Error: "no delta profile from before the burn", Growth: g}}}
}

func quadratic(fn string, k float64) *incident.Growth {
	return &incident.Growth{Function: fn, Fitted: true, Exponent: k, Words: "transcript.(*Baseline).Append: bytes per stream grow as n^2.0"}
}

// The watcher keeps the first ticket and page of the creep's SLO, when
// each reached the pager and what each said; other SLOs' and severities'
// incidents are not the story's.
func TestTheWatcherKeepsTheFirstTicketAndPage(t *testing.T) {
	start := time.Now().Add(-time.Hour)
	incs := []incident.Incident{ // newest first, as the pager lists them
		diagnosed("ticket", start.Add(50*time.Minute), quadratic(appendFull, 1.2)),
		diagnosed("page", start.Add(40*time.Minute), quadratic(appendFull, 2.02)),
		diagnosed("ticket", start.Add(13*time.Minute), quadratic(appendFull, 1.98)),
		{ID: "other", SLO: "availability", Severity: "page", Timeline: []incident.Event{{At: start.Add(time.Minute)}}},
		{ID: "info", SLO: slo, Severity: "info", Timeline: []incident.Event{{At: start.Add(2 * time.Minute)}}},
	}
	incs[2].Facts.Heap.Growth.Words = "ticket words"
	incs[0].ID = "a later ticket"
	pager := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { json.NewEncoder(w).Encode(incs) }))
	defer pager.Close()
	l := &lab.Lab{Probe: lab.Probe{Addrs: lab.Addrs{Pager: strings.TrimPrefix(pager.URL, "http://")}}}
	r := Result{Variant: string(variant.Baseline)}
	if err := watchIncidents(l, start, &r, func(string, ...any) {}); err != nil {
		t.Fatal(err)
	}
	if r.TicketS == nil || *r.TicketS != 780 || r.PageS == nil || *r.PageS != 2400 || r.TicketIncident != "ticket-1" {
		t.Fatalf("ticket %v s, page %v s: want 780 and 2400 (%+v)", deref(r.TicketS), deref(r.PageS), r)
	}
	if !r.TicketNamesAppend || !strings.Contains(r.TicketVerdict, "ticket words") || !strings.Contains(r.TicketVerdict, "top alloc_space transcript.(*Baseline).Append (93 %)") {
		t.Errorf("the ticket's verdict %q (names Append: %v)", r.TicketVerdict, r.TicketNamesAppend)
	}
	if err := r.Check(); err != nil {
		t.Errorf("the story held, and Check says %v", err)
	}
}

// Check fails each way the story can go wrong.
func TestCheckSaysWhatWentWrong(t *testing.T) {
	s := func(v float64) *float64 { return &v }
	for _, c := range []struct {
		name string
		r    Result
		want string
	}{
		{"no ticket", Result{Variant: "baseline", PageS: s(10), PageNamesAppend: true}, "no ticket fired"},
		{"no page", Result{Variant: "baseline", TicketS: s(10), TicketNamesAppend: true}, "no page fired"},
		{"page first", Result{Variant: "baseline", TicketS: s(20), PageS: s(10), TicketNamesAppend: true, PageNamesAppend: true}, "came before the ticket"},
		{"ticket without its verdict", Result{Variant: "baseline", TicketS: s(10), PageS: s(20), PageNamesAppend: true, TicketVerdict: "growth not fitted"}, "the ticket's verdict does not name"},
		{"page without its verdict", Result{Variant: "baseline", TicketS: s(10), PageS: s(20), TicketNamesAppend: true}, "the page's verdict does not name"},
		{"fixed fires", Result{Variant: "fixed", TicketS: s(10)}, "must stay silent"},
	} {
		if err := c.r.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if err := (Result{Variant: "fixed"}).Check(); err != nil {
		t.Errorf("a silent fixed build: %v", err)
	}
}

// Only a fitted quadratic growth of Append is the write-up's verdict.
func TestVerdictNamesAppendOnlyWhenQuadratic(t *testing.T) {
	for _, c := range []struct {
		name string
		g    *incident.Growth
		want bool
	}{
		{"quadratic", quadratic(appendFull, 1.9), true},
		{"linear", quadratic(appendFull, 1.0), false},
		{"another function", quadratic("burnlab/gateway/internal/sse.(*Reader).Next", 2), false},
		{"not fitted", &incident.Growth{Function: appendFull, Words: "too little spread"}, false},
		{"none", nil, false},
	} {
		if _, named := Verdict(diagnosed("ticket", time.Now(), c.g)); named != c.want {
			t.Errorf("%s: names Append %v, want %v", c.name, named, c.want)
		}
	}
}

// An hour is read from Prometheus as the dashboard shows it: the p99 and
// p99.9 in milliseconds, the share of streams over the SLO, and the
// stream-latency alerts firing; a query with no streams is no figure.
func TestAnHourAsPrometheusSeesIt(t *testing.T) {
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query().Get("query")
		result := `[]`
		switch {
		case strings.HasPrefix(q, "ALERTS"):
			result = `[{"metric":{"severity":"ticket"},"value":[0,"1"]},{"metric":{"severity":"page"},"value":[0,"1"]}]`
		case strings.HasPrefix(q, "histogram_quantile(0.999,"):
			result = `[{"metric":{},"value":[0,"1.25"]}]`
		case strings.HasPrefix(q, "histogram_quantile(0.99,"):
			result = `[{"metric":{},"value":[0,"0.18"]}]`
		case strings.HasPrefix(q, "1 - sum"):
			result = `[{"metric":{},"value":[0,"NaN"]}]`
		}
		if !strings.Contains(q, "[50000ms]") && !strings.HasPrefix(q, "ALERTS") {
			t.Errorf("query %s: want the hour's 50 s window", q)
		}
		w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":` + result + `}}`))
	}))
	defer prom.Close()
	l := &lab.Lab{Probe: lab.Probe{Addrs: lab.Addrs{Prometheus: strings.TrimPrefix(prom.URL, "http://")}}}
	h := readHour(l, 26, 50*time.Second)
	if got, want := h.String(), "day 2 01:00  p99 180 ms   p99.9 1250 ms  breach no data firing: ticket, page"; got != want {
		t.Errorf("hour %q, want %q", got, want)
	}
}
