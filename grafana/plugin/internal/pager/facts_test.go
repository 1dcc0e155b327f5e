package pager

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"burnlab/shared/incident"

	"github.com/grafana/grafana-plugin-sdk-go/backend"
	"github.com/grafana/grafana-plugin-sdk-go/data"
)

func ptr(f float64) *float64 { return &f }

var fired = time.Date(2026, 12, 1, 3, 12, 0, 0, time.UTC)

// factsIncidents are the pager's first page of incidents, newest first: a
// page whose facts are not read yet, a page with its facts, a ticket whose
// facts are not read yet, and an alert of a severity the pager does not
// diagnose;
// and an older page past the first page, whose facts were read in part.
func factsIncidents() (list []incident.Incident, older incident.Incident) {
	withFacts := incident.Incident{
		ID: "p1-1", AlertName: "LLMGatewayStreamLatencyBudgetBurn", SLO: "stream-latency", Severity: "page", Status: "resolved",
		StartsAt: fired, Annotations: map[string]string{"burn_rate": "0.4x"}, BurnRate: "16.1x",
		Facts: &incident.Facts{
			TakenAt: fired.Add(3 * time.Second),
			Pairs: []incident.PairBurn{
				{Short: "2m", Long: "4m", ShortBurn: ptr(20.5), LongBurn: ptr(16.1), Factor: 14.4, Fired: true},
				{Short: "5m", Long: "30m", ShortBurn: nil, LongBurn: ptr(3.2), Factor: 6},
			},
			Pair: 0,
			Budget: &incident.Budget{SpentPct: 12.5, LeftPct: 87.5, Period: "10h", PeriodSeconds: 36000, History: "4m", HistorySeconds: 240,
				Burn: ptr(16.1), BurnWindow: "4m", RunsOutSeconds: ptr(19565.2), RunsOut: "5h26m5s"},
			BurnFrom:      fired.Add(-4 * time.Minute),
			ExemplarQuery: `gateway_stream_duration_seconds_bucket`,
			Slowest: []incident.Exemplar{
				{RequestID: "req-slow", Tenant: "acme", Seconds: 9.25, At: fired.Add(-time.Minute)},
				{RequestID: "req-less", Tenant: "globex", Seconds: 4.5, At: fired.Add(-2 * time.Minute)},
			},
			Heap: &incident.HeapChange{Changed: true, Function: "transcript.(*Baseline).Append",
				Words: "transcript.(*Baseline).Append allocates 40x faster", Before: 1e6, During: 4e7},
			Errors: []string{"the burn over 5m: Prometheus answered no series"},
		},
	}
	list = []incident.Incident{
		{ID: "p2-1", AlertName: "LLMGatewayStreamLatencyBudgetBurn", Severity: "page", Status: "firing", StartsAt: fired.Add(time.Hour)},
		withFacts,
		{ID: "t1-1", AlertName: "LLMGatewayStreamLatencyBudgetBurn", Severity: "ticket", Status: "resolved", StartsAt: fired.Add(-time.Hour)},
		{ID: "i1-1", AlertName: "SomethingToKnow", Severity: "info", Status: "resolved", StartsAt: fired.Add(-2 * time.Hour)},
	}
	older = incident.Incident{ID: "p0-1", Severity: "page", Status: "resolved", StartsAt: fired.Add(-30 * 24 * time.Hour),
		Facts: &incident.Facts{Pair: -1, Heap: &incident.HeapChange{Error: "no delta profile from before the burn"},
			Errors: []string{"the budget: slo:period_burn_rate:ratio: no series", "the heap: no delta profile from before the burn"}}}
	return list, older
}

// factsPager serves the pager's API as JSON of shared/incident's types:
// the list, and each incident (the older one too) by its own URL.
func factsPager(t *testing.T) *httptest.Server {
	list, older := factsIncidents()
	mux := http.NewServeMux()
	mux.HandleFunc("/api/incidents", func(w http.ResponseWriter, r *http.Request) { json.NewEncoder(w).Encode(list) })
	for _, inc := range append(list, older) {
		mux.HandleFunc("/api/incidents/"+inc.ID, func(w http.ResponseWriter, r *http.Request) { json.NewEncoder(w).Encode(inc) })
	}
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func factsQuery(t *testing.T, ds *Datasource, id string) backend.DataResponse {
	t.Helper()
	j, _ := json.Marshal(map[string]string{"queryType": "facts", "incident": id})
	resp, err := ds.QueryData(context.Background(), &backend.QueryDataRequest{Queries: []backend.DataQuery{{RefID: "A", JSON: j}}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Responses["A"]
}

// frames indexes a facts answer's frames by name, requiring all four.
func frames(t *testing.T, r backend.DataResponse) map[string]*data.Frame {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("error response: %v", r.Error)
	}
	byName := map[string]*data.Frame{}
	for _, f := range r.Frames {
		byName[f.Name] = f
	}
	for _, name := range []string{BurnFrame, BudgetFrame, SlowestFrame, HeapFrame} {
		if byName[name] == nil {
			t.Fatalf("no %q frame among %d", name, len(r.Frames))
		}
	}
	return byName
}

// cell is the value of the named field in row i, pointers dereferenced and
// nil as nil.
func cell(t *testing.T, f *data.Frame, name string, i int) any {
	t.Helper()
	fld, _ := f.FieldByName(name)
	if fld == nil {
		t.Fatalf("frame %q has no field %q", f.Name, name)
	}
	if n := fld.Len(); i >= n {
		t.Fatalf("frame %q: row %d of %d", f.Name, i, n)
	}
	v, ok := fld.ConcreteAt(i)
	if !ok {
		return nil
	}
	return v
}

func rows(f *data.Frame) int { n, _ := f.RowLen(); return n }

func notices(f *data.Frame, sev data.NoticeSeverity) []string {
	var out []string
	if f.Meta != nil {
		for _, n := range f.Meta.Notices {
			if n.Severity == sev {
				out = append(out, n.Text)
			}
		}
	}
	return out
}

// With no incident chosen, the facts are the newest page's that has them
// (p1-1, not the newer p2-1 still without), each frame holding what the
// pager's incident page shows.
func TestFactsFrames(t *testing.T) {
	fs := frames(t, factsQuery(t, newDS(t, factsPager(t).URL), ""))

	burn := fs[BurnFrame]
	if rows(burn) != 2 {
		t.Fatalf("burn: %d rows, want one per window pair", rows(burn))
	}
	for name, want := range map[string]any{"windows": "2m/4m", "short burn": 20.5, "long burn": 16.1, "factor": 14.4, "fired": true} {
		if got := cell(t, burn, name, 0); got != want {
			t.Errorf("burn row 0 %q = %v, want %v", name, got, want)
		}
	}
	if got := cell(t, burn, "short burn", 1); got != nil {
		t.Errorf("a burn Prometheus had no figure for is %v, want null", got)
	}
	if cell(t, burn, "windows", 1) != "5m/30m" || cell(t, burn, "long burn", 1) != 3.2 || cell(t, burn, "fired", 1) != false {
		t.Errorf("burn row 1 %v", burn.RowCopy(1))
	}

	budget := fs[BudgetFrame]
	if rows(budget) != 1 {
		t.Fatalf("budget: %d rows", rows(budget))
	}
	for name, want := range map[string]any{"spent %": 12.5, "left %": 87.5, "period": "10h", "history": "4m", "burn window": "4m",
		"burn": 16.1, "runs out": "5h26m5s", "runs out seconds": 19565.2} {
		if got := cell(t, budget, name, 0); got != want {
			t.Errorf("budget %q = %v, want %v", name, got, want)
		}
	}

	slow := fs[SlowestFrame]
	if rows(slow) != 2 || cell(t, slow, "request ID", 0) != "req-slow" || cell(t, slow, "tenant", 0) != "acme" ||
		cell(t, slow, "seconds", 0) != 9.25 || !cell(t, slow, "time", 0).(time.Time).Equal(fired.Add(-time.Minute)) ||
		cell(t, slow, "request ID", 1) != "req-less" {
		t.Errorf("slowest: %d rows, first %v", rows(slow), slow.RowCopy(0))
	}

	heap := fs[HeapFrame]
	if rows(heap) != 1 || cell(t, heap, "changed", 0) != true || cell(t, heap, "function", 0) != "transcript.(*Baseline).Append" ||
		!strings.Contains(cell(t, heap, "words", 0).(string), "40x") || cell(t, heap, "before", 0) != 1e6 || cell(t, heap, "during", 0) != 4e7 {
		t.Errorf("heap: %d rows, %v", rows(heap), heap.RowCopy(0))
	}
	if fld, _ := heap.FieldByName("during"); fld.Config == nil || fld.Config.Unit != "Bps" {
		t.Error("the heap's rates are not in bytes per second")
	}

	for name, f := range fs {
		if w := notices(f, data.NoticeSeverityWarning); len(w) != 1 || !strings.Contains(w[0], "the burn over 5m") {
			t.Errorf("frame %s: warnings %q, want the facts' one error", name, w)
		}
	}
}

// An incident chosen past the first page, whose facts were read in part:
// no budget row, the heap's row says why it was not compared with null
// rates, and each error is a warning.
func TestFactsReadInPart(t *testing.T) {
	fs := frames(t, factsQuery(t, newDS(t, factsPager(t).URL), "p0-1"))
	if rows(fs[BurnFrame]) != 0 || rows(fs[BudgetFrame]) != 0 || rows(fs[SlowestFrame]) != 0 {
		t.Errorf("rows: burn %d budget %d slowest %d, want none", rows(fs[BurnFrame]), rows(fs[BudgetFrame]), rows(fs[SlowestFrame]))
	}
	heap := fs[HeapFrame]
	if rows(heap) != 1 || cell(t, heap, "changed", 0) != false || !strings.Contains(cell(t, heap, "words", 0).(string), "no delta profile from before") ||
		cell(t, heap, "before", 0) != nil || cell(t, heap, "during", 0) != nil {
		t.Errorf("heap %v", heap.RowCopy(0))
	}
	if w := notices(fs[BudgetFrame], data.NoticeSeverityWarning); len(w) != 2 || !strings.Contains(w[0], "the budget") {
		t.Errorf("warnings %q", w)
	}
	if i := notices(fs[SlowestFrame], data.NoticeSeverityInfo); len(i) != 1 || !strings.Contains(i[0], "no exemplar series") {
		t.Errorf("slowest without an exemplar query: notices %q", i)
	}
}

// An incident without facts is four empty frames and a notice that says
// so, not an error: a page and a ticket not read yet, and an info alert,
// whose facts are never read.
func TestAnIncidentWithoutFacts(t *testing.T) {
	ds := newDS(t, factsPager(t).URL)
	for id, want := range map[string]string{"p2-1": "no facts yet", "t1-1": "when the ticket fires", "i1-1": "only pages and tickets"} {
		fs := frames(t, factsQuery(t, ds, id))
		for name, f := range fs {
			if rows(f) != 0 {
				t.Errorf("%s: frame %s has %d rows", id, name, rows(f))
			}
			if i := notices(f, data.NoticeSeverityInfo); len(i) != 1 || !strings.Contains(i[0], want) || !strings.Contains(i[0], id) {
				t.Errorf("%s: frame %s notices %q, want one saying %q", id, name, i, want)
			}
		}
	}
	if r := factsQuery(t, ds, "nope-1"); r.Error == nil {
		t.Error("an incident the pager does not have: no error")
	}
}

// A pager whose answers are not its API's JSON: an error response for
// that query, not a panic, and not a frame.
func TestFactsFromAPagerAnsweringGarbage(t *testing.T) {
	for name, body := range map[string]string{
		"not JSON":                `<html>502 Bad Gateway</html>`,
		"truncated":               `[{"id":"p1-1","severity":"page","facts":{"pairs":[{"short":"2m"`,
		"facts of the wrong type": `[{"id":"p1-1","severity":"page","facts":{"pairs":"2m/4m","budget":[1]}}]`,
		"a burn not a number":     `[{"id":"p1-1","severity":"page","facts":{"pairs":[{"short_burn":"fast"}]}}]`,
	} {
		t.Run(name, func(t *testing.T) {
			mux := http.NewServeMux()
			mux.HandleFunc("/api/incidents", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(body)) })
			mux.HandleFunc("/api/incidents/p1-1", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(strings.TrimPrefix(body, "["))) })
			s := httptest.NewServer(mux)
			defer s.Close()
			ds := newDS(t, s.URL)
			for _, id := range []string{"", "p1-1"} {
				if r := factsQuery(t, ds, id); r.Error == nil || len(r.Frames) != 0 {
					t.Errorf("incident %q: %d frames, error %v; want an error response", id, len(r.Frames), r.Error)
				}
			}
		})
	}
}

// The incidents table carries the burn at firing, which the latest
// notification's burn_rate does not, and the heap's verdict.
func TestIncidentsTableHasTheFacts(t *testing.T) {
	resp, _ := newDS(t, factsPager(t).URL).QueryData(context.Background(), queries("incidents"))
	r := resp.Responses["A"]
	if r.Error != nil || len(r.Frames) != 1 {
		t.Fatalf("%+v", r)
	}
	f := r.Frames[0]
	if cell(t, f, "id", 1) != "p1-1" || cell(t, f, "burn_rate", 1) != "0.4x" || cell(t, f, "burn at firing", 1) != "16.1x" ||
		cell(t, f, "heap", 1) != "transcript.(*Baseline).Append allocates 40x faster" {
		t.Errorf("p1-1: burn_rate (latest), burn at firing, heap: row %v", f.RowCopy(1))
	}
	if cell(t, f, "heap", 0) != "" || cell(t, f, "burn at firing", 0) != "" {
		t.Errorf("a page without facts: row %v", f.RowCopy(0))
	}
}
