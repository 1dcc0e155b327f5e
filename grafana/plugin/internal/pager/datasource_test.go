package pager

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"burnlab/shared/freeport"
	"burnlab/shared/pproftop/pproftoptest"

	"github.com/google/pprof/profile"
	"github.com/grafana/grafana-plugin-sdk-go/backend"
	"github.com/grafana/grafana-plugin-sdk-go/data"
	"github.com/grafana/grafana-plugin-sdk-go/experimental/datasourcetest"
	"github.com/prometheus/client_golang/prometheus"
)

// fakePager serves the pager's API: one resolved ticket without a profile
// and one page with the given profile, newest first.
func fakePager(t *testing.T, prof []byte) *httptest.Server {
	incidents := `[
	 {"id":"p1-1","alertname":"LLMGatewayStreamLatencyBudgetBurn","slo":"stream-latency","severity":"page","status":"firing",
	  "startsAt":"2026-12-01T03:12:00Z","annotations":{"burn_rate":"10.2x"},
	  "timeline":[{"at":"2026-12-01T03:12:05Z","kind":"firing","receiver":"pager-page","burn_rate":"10.2x"}],
	  "profile":{"file":"profiles/p1-1.pb.gz","top":[{"function":"transcript.(*Baseline).Append","flat_pct":99.6}]}},
	 {"id":"t1-1","alertname":"LLMGatewayStreamLatencyBudgetBurn","slo":"stream-latency","severity":"ticket","status":"resolved",
	  "startsAt":"2026-12-01T03:00:00Z","endsAt":"2026-12-01T03:30:00Z","annotations":{},"timeline":[]}]`
	// An older page, past the first page of the list: only its own URL
	// serves it.
	older := `{"id":"p0-1","alertname":"LLMGatewayStreamLatencyBudgetBurn","slo":"stream-latency","severity":"page","status":"resolved",
	  "startsAt":"2026-11-01T03:12:00Z","annotations":{},"timeline":[],"profile":{"file":"profiles/p0-1.pb.gz"}}`
	mux := http.NewServeMux()
	mux.HandleFunc("/api/incidents", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(incidents)) })
	mux.HandleFunc("/api/incidents/p0-1", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(older)) })
	mux.HandleFunc("/api/incidents/p1-1/profile", func(w http.ResponseWriter, r *http.Request) { w.Write(prof) })
	mux.HandleFunc("/api/incidents/p0-1/profile", func(w http.ResponseWriter, r *http.Request) { w.Write(prof) })
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func newDS(t *testing.T, url string) *Datasource {
	t.Helper()
	inst, err := NewDatasource(context.Background(), backend.DataSourceInstanceSettings{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	return inst.(*Datasource)
}

func queries(types ...string) *backend.QueryDataRequest {
	req := &backend.QueryDataRequest{}
	for i, qt := range types {
		j, _ := json.Marshal(map[string]string{"queryType": qt})
		req.Queries = append(req.Queries, backend.DataQuery{RefID: string(rune('A' + i)), JSON: j})
	}
	return req
}

func TestIncidentsTable(t *testing.T) {
	ds := newDS(t, fakePager(t, nil).URL)
	resp, err := ds.QueryData(context.Background(), queries("incidents"))
	if err != nil {
		t.Fatal(err)
	}
	r := resp.Responses["A"]
	if r.Error != nil || len(r.Frames) != 1 {
		t.Fatalf("%+v", r)
	}
	f := r.Frames[0]
	if n, _ := f.RowLen(); n != 2 {
		t.Fatalf("%d rows", n)
	}
	if cell(t, f, "severity", 0) != "page" || cell(t, f, "burn_rate", 0) != "10.2x" ||
		!strings.Contains(cell(t, f, "top_alloc_space", 0).(string), "Baseline") || !strings.Contains(cell(t, f, "timeline", 0).(string), "FIRING") {
		t.Fatalf("row %v", f.RowCopy(0))
	}
}

// The flame graph of a real heap profile: one root whose value is the
// profile's total alloc_space, rows in depth-first pre-order, and every
// node's value its self plus its children's values.
func TestFlameGraphOfARealHeapProfile(t *testing.T) {
	raw := pproftoptest.HeapProfile(t)
	p, err := profile.Parse(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	idx := 1 // allocs: alloc_objects, alloc_space, inuse_objects, inuse_space
	if p.SampleType[idx].Type != "alloc_space" {
		t.Fatalf("sample types %v", p.SampleType)
	}
	for _, s := range p.Sample {
		total += s.Value[idx]
	}
	ds := newDS(t, fakePager(t, raw).URL)
	resp, _ := ds.QueryData(context.Background(), queries("flamegraph"))
	r := resp.Responses["A"]
	if r.Error != nil {
		t.Fatal(r.Error)
	}
	f := r.Frames[0]
	if f.Meta == nil || f.Meta.PreferredVisualization != data.VisTypeFlameGraph {
		t.Fatal("frame is not marked for the flame graph panel")
	}
	if f.Fields[1].Config == nil || f.Fields[1].Config.Unit != "bytes" {
		t.Fatal("values are not in bytes")
	}
	n, _ := f.RowLen()
	level := func(i int) int64 { return f.Fields[0].At(i).(int64) }
	value := func(i int) int64 { return f.Fields[1].At(i).(int64) }
	self := func(i int) int64 { return f.Fields[2].At(i).(int64) }
	if level(0) != 0 || value(0) != total || total == 0 {
		t.Fatalf("root level %d value %d, profile total %d", level(0), value(0), total)
	}
	found := false
	for i := range n {
		if i > 0 && level(i) == 0 {
			t.Fatal("more than one root")
		}
		if i > 0 && level(i) > level(i-1)+1 {
			t.Fatalf("row %d jumps from level %d to %d: not pre-order", i, level(i-1), level(i))
		}
		var children int64
		for j := i + 1; j < n && level(j) > level(i); j++ {
			if level(j) == level(i)+1 {
				children += value(j)
			}
		}
		if value(i) != self(i)+children || self(i) < 0 {
			t.Fatalf("row %d (%s): value %d != self %d + children %d", i, f.Fields[3].At(i), value(i), self(i), children)
		}
		if strings.HasSuffix(f.Fields[3].At(i).(string), pproftoptest.Allocator) && self(i) > total/2 {
			found = true
		}
	}
	if !found {
		t.Fatal("the allocating function is not a node holding most of the profile")
	}
}

func TestErrorsAndHealth(t *testing.T) {
	ds := newDS(t, fakePager(t, []byte("not a profile")).URL)
	resp, _ := ds.QueryData(context.Background(), queries("flamegraph", "tracing", "incidents"))
	if resp.Responses["A"].Error == nil || resp.Responses["B"].Error == nil || resp.Responses["C"].Error != nil {
		t.Fatalf("a bad profile and an unknown type must fail alone: %+v", resp.Responses)
	}
	if h, _ := ds.CheckHealth(context.Background(), nil); h.Status != backend.HealthStatusOk || !strings.Contains(h.Message, "2 incidents") {
		t.Fatalf("%+v", h)
	}
	down := newDS(t, "http://127.0.0.1:1")
	if h, _ := down.CheckHealth(context.Background(), nil); h.Status != backend.HealthStatusError {
		t.Fatalf("%+v", h)
	}
	if _, err := NewDatasource(context.Background(), backend.DataSourceInstanceSettings{URL: "pager"}); err == nil {
		t.Fatal("a relative URL must be refused")
	}
}

// A round trip through the SDK's standalone plugin server: gRPC, as
// Grafana talks to the plugin. (The SDK serves once per process: every
// round trip is here.) Each serve registers the SDK's request counter with
// the default registry, which panics the second time a process serves (go
// test -count=2): each run gets a registry of its own.
func TestRoundTripThroughThePluginServer(t *testing.T) {
	defer func(r prometheus.Registerer) { prometheus.DefaultRegisterer = r }(prometheus.DefaultRegisterer)
	prometheus.DefaultRegisterer = prometheus.NewRegistry()
	pager := fakePager(t, pproftoptest.HeapProfile(t))
	// The plugin SDK's test server binds the address itself.
	addr := freeport.ForTest(t)
	tp, err := datasourcetest.Manage(NewDatasource, datasourcetest.ManageOpts{Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Shutdown()
	pc := backend.PluginContext{DataSourceInstanceSettings: &backend.DataSourceInstanceSettings{ID: 1, UID: "burnlab-pager", URL: pager.URL}}
	req := queries("incidents", "flamegraph")
	req.PluginContext = pc
	resp, err := tp.Client.QueryData(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := resp.Responses["A"].Frames[0].RowLen(); n != 2 {
		t.Fatalf("incidents over gRPC: %d rows", n)
	}
	if n, _ := resp.Responses["B"].Frames[0].RowLen(); n < 3 {
		t.Fatalf("flame graph over gRPC: %d rows", n)
	}
	h, err := tp.Client.CheckHealth(context.Background(), &backend.CheckHealthRequest{PluginContext: pc})
	if err != nil || h.Status != backend.HealthStatusOk {
		t.Fatalf("%+v %v", h, err)
	}

	// The facts' frames, a null burn and the warnings survive the Arrow
	// encoding.
	req = queries("facts")
	req.PluginContext = backend.PluginContext{DataSourceInstanceSettings: &backend.DataSourceInstanceSettings{ID: 2, UID: "burnlab-pager-facts", URL: factsPager(t).URL}}
	resp, err = tp.Client.QueryData(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	fs := frames(t, resp.Responses["A"])
	if burn := fs[BurnFrame]; rows(burn) != 2 || cell(t, burn, "short burn", 1) != nil || cell(t, burn, "long burn", 1) != 3.2 {
		t.Errorf("burn over gRPC: %d rows, the second %v", rows(burn), burn.RowCopy(1))
	}
	if w := notices(fs[HeapFrame], data.NoticeSeverityWarning); len(w) != 1 {
		t.Errorf("warnings over gRPC: %q", w)
	}
}

// The pager lists its newest incidents a page at a time: a chosen incident
// older than the first page is still found, by its own URL.
func TestAFlameGraphOfAnIncidentPastTheFirstPage(t *testing.T) {
	ds := newDS(t, fakePager(t, pproftoptest.HeapProfile(t)).URL)
	j, _ := json.Marshal(map[string]string{"queryType": "flamegraph", "incident": "p0-1"})
	resp, err := ds.QueryData(context.Background(), &backend.QueryDataRequest{Queries: []backend.DataQuery{{RefID: "A", JSON: j}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.Responses["A"]; r.Error != nil || len(r.Frames) != 1 {
		t.Fatalf("%+v", r)
	}
	j, _ = json.Marshal(map[string]string{"queryType": "flamegraph", "incident": "t1-1"})
	resp, _ = ds.QueryData(context.Background(), &backend.QueryDataRequest{Queries: []backend.DataQuery{{RefID: "A", JSON: j}}})
	if r := resp.Responses["A"]; r.Error == nil {
		t.Fatal("an incident the pager does not have: no error")
	}
}
