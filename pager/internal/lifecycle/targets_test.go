package lifecycle_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	httppprof "net/http/pprof"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"burnlab/pager/internal/lifecycle"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"burnlab/pager/internal/store"
	"burnlab/pager/internal/targets"
	"burnlab/pager/internal/targets/targetstest"
	"burnlab/shared/pproftop/pproftoptest"
)

// With a pager config, a page is profiled on the processes of the rule its
// labels match: the provider's page on both provider replicas, found
// through Prometheus's targets and merged, and never on the gateway; its
// facts say the delta sampler does not sample the provider. An alert no
// rule takes is profiled nowhere, and says so.
func TestAPageProfilesTheProcessesOfItsRule(t *testing.T) {
	serve := func(raw []byte) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(raw) }))
		t.Cleanup(srv.Close)
		return srv
	}
	replicas := []*httptest.Server{serve(pproftoptest.HeapProfile(t)), serve(pproftoptest.IdleProfile(t))}
	gw := newFakeGateway(t)
	cfg, err := targets.Parse([]byte(`rules:
  - name: provider
    match: {sloth_service: llm-provider}
    jobs: [provider]
    port_label: __meta_pprof_port
  - name: gateway
    match: {sloth_service: llm-gateway}
    static: [`+gw.url()+`]
    sampled: true
`), "pager.yml")
	if err != nil {
		t.Fatal(err)
	}
	p := newPagerIn(t, t.TempDir(), "", func(c *lifecycle.Config) {
		c.Targets, c.Discovery, c.Deltas = &cfg, targetstest.Prometheus(t, map[string][]*httptest.Server{"provider": replicas}), deltas{}
	})
	start := time.Now().UTC().Truncate(time.Second)
	provider := with(alert("firing", "page", start), "labels", map[string]string{"alertname": "ProviderLatency", "severity": "page", "sloth_service": "llm-provider"})
	stranger := with(with(alert("firing", "page", start), "fingerprint", fingerprint("stranger")),
		"labels", map[string]string{"alertname": "Other", "severity": "page", "sloth_service": "other"})
	if status, body := p.post(t, "/webhook/page", notification(provider, stranger)); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	p.l.Close(context.Background())

	inc, _ := p.st.Incident(store.IncidentID(&store.Alert{Fingerprint: fingerprint("page"), StartsAt: start}))
	pr := inc.Profile
	if pr == nil || pr.Error != "" || pr.Rule != "provider" || len(pr.Instances) != 2 {
		t.Fatalf("the provider's page's profile: %+v", pr)
	}
	for _, in := range pr.Instances {
		if in.Error != "" || in.Total == 0 {
			t.Errorf("instance %+v: want its own profile", in)
		}
	}
	if pr.Total != pr.Instances[0].Total+pr.Instances[1].Total || !strings.HasSuffix(pr.Top[0].Function, pproftoptest.Allocator) {
		t.Errorf("the merge: %d bytes, top %+v; want the two replicas' sum and the allocator on top", pr.Total, pr.Top[0])
	}
	if n, _ := gw.counts(); n != 0 {
		t.Errorf("the gateway was profiled %d times for the provider's page", n)
	}
	if f := inc.Facts; f == nil || f.Heap == nil || !strings.Contains(f.Heap.Error, `does not sample the processes of rule "provider"`) {
		t.Errorf("the provider's heap facts: %+v", inc.Facts)
	}
	other, _ := p.st.Incident(store.IncidentID(&store.Alert{Fingerprint: fingerprint("stranger"), StartsAt: start}))
	if other.Profile == nil || !strings.Contains(other.Profile.Error, "no rule of pager.yml takes this alert") {
		t.Errorf("an alert no rule takes: profile %+v", other.Profile)
	}
}

// lateDiscovery is a Prometheus that has just started: it lists no target
// until its first discovery update, after `empty` asks.
type lateDiscovery struct {
	targets.Discovery
	mu    sync.Mutex
	empty int
}

func (d *lateDiscovery) Targets(ctx context.Context) (v1.TargetsResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.empty > 0 {
		d.empty--
		return v1.TargetsResult{}, nil
	}
	return d.Discovery.Targets(ctx)
}

// A page that comes while Prometheus lists no target yet (its first
// discovery update comes 5 s after it starts) is profiled once it does,
// not profiled nowhere: the pager found this following its own docs.
func TestAPageBeforePrometheusListsItsTargetsIsProfiled(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(pproftoptest.HeapProfile(t)) }))
	t.Cleanup(srv.Close)
	cfg, err := targets.Parse([]byte("rules:\n  - {name: provider, jobs: [provider], port_label: __meta_pprof_port}\n"), "pager.yml")
	if err != nil {
		t.Fatal(err)
	}
	late := &lateDiscovery{Discovery: targetstest.Prometheus(t, map[string][]*httptest.Server{"provider": {srv}}), empty: 1}
	p := newPagerIn(t, t.TempDir(), "", func(c *lifecycle.Config) { c.Targets, c.Discovery = &cfg, late })
	start := time.Now().UTC().Truncate(time.Second)
	if status, body := p.post(t, "/webhook/page", notification(alert("firing", "page", start))); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	p.l.Close(context.Background())
	inc, _ := p.st.Incident(store.IncidentID(&store.Alert{Fingerprint: fingerprint("page"), StartsAt: start}))
	if pr := inc.Profile; pr == nil || pr.Error != "" || len(pr.Instances) != 1 || late.empty != 0 {
		t.Errorf("a page before Prometheus listed its target: %+v", pr)
	}
}

// A rule that takes a cpu and a goroutine profile beside the heap gets
// them from a real net/http/pprof (this test process's), each stored with
// its top, and kept as the incident's files; a kind the process does not
// serve (a 404) is an error of its own, and the heap stands.
func TestARuleTakesTheKindsItNames(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", httppprof.Index)
	mux.HandleFunc("/debug/pprof/profile", httppprof.Profile)
	mux.HandleFunc("/debug/pprof/mutex", http.NotFound)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	cfg, err := targets.Parse([]byte("rules:\n  - {name: svc, static: ["+srv.URL+"/debug/pprof/allocs], profiles: [cpu, goroutine, mutex], cpu_seconds: 1}\n"), "pager.yml")
	if err != nil {
		t.Fatal(err)
	}
	p := newPagerIn(t, t.TempDir(), "", func(c *lifecycle.Config) { c.Targets = &cfg })
	start := time.Now().UTC().Truncate(time.Second)
	if status, body := p.post(t, "/webhook/page", notification(alert("firing", "page", start))); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	p.l.Close(context.Background())
	id := store.IncidentID(&store.Alert{Fingerprint: fingerprint("page"), StartsAt: start})
	inc, _ := p.st.Incident(id)
	pr := inc.Profile
	if pr == nil || pr.Error != "" || pr.File == "" || len(pr.Kinds) != 3 {
		t.Fatalf("profile %+v", pr)
	}
	for _, k := range []string{"cpu", "goroutine"} {
		kp := pr.Kind(k)
		if kp == nil || kp.Error != "" || kp.File == "" || kp.SampleType != targets.Kinds[k].SampleType {
			t.Errorf("%s: %+v", k, kp)
			continue
		}
		if _, err := os.Stat(filepath.Join(p.Dir, kp.File)); err != nil {
			t.Errorf("%s file: %v", k, err)
		}
	}
	if g := pr.Kind("goroutine"); g == nil || len(g.Top) == 0 || g.Total < 2 {
		t.Errorf("the goroutine profile of a process with goroutines: %+v", g)
	}
	if m := pr.Kind("mutex"); m == nil || !strings.Contains(m.Error, "404 Not Found") {
		t.Errorf("a kind the process does not serve: %+v", m)
	}
}

// Each rule has its own capture window: a storm of two services' pages
// costs each service's process one profile, and neither takes the other's.
func TestEachRuleHasItsOwnWindow(t *testing.T) {
	a, b := newFakeGateway(t), newFakeGateway(t)
	cfg, err := targets.Parse([]byte(`rules:
  - {name: a, match: {sloth_service: a}, static: [`+a.url()+`]}
  - {name: b, match: {sloth_service: b}, static: [`+b.url()+`]}
`), "pager.yml")
	if err != nil {
		t.Fatal(err)
	}
	clk := newFakeClock(time.Date(2026, 12, 1, 3, 12, 0, 0, time.UTC))
	p := newPagerIn(t, t.TempDir(), "", func(c *lifecycle.Config) { c.Targets, c.ProfileWindow, c.Clock = &cfg, time.Minute, clk })
	start := time.Now().UTC().Truncate(time.Second)
	var alerts []map[string]any
	for i := range 10 {
		svc := []string{"a", "b"}[i%2]
		alerts = append(alerts, with(with(alert("firing", "page", start), "fingerprint", fingerprint(fmt.Sprint("storm ", i))),
			"labels", map[string]string{"alertname": "Burn", "severity": "page", "sloth_service": svc}))
	}
	if status, body := p.post(t, "/webhook/page", notification(alerts...)); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	p.l.Close(context.Background())
	for name, g := range map[string]*fakeGateway{"a": a, "b": b} {
		if n, _ := g.counts(); n != 1 {
			t.Errorf("service %s's process was profiled %d times for its 5 pages, want once", name, n)
		}
	}
	for _, inc := range all(p.st) {
		if inc.Profile == nil || inc.Profile.Rule != inc.Labels["sloth_service"] || inc.Profile.Error != "" {
			t.Errorf("incident %s of %s: profile %+v", inc.ID, inc.Labels["sloth_service"], inc.Profile)
		}
	}
}

// Each sampled rule's page is compared on its own sampler's deltas, never
// on another process's: the provider's page reads the provider's sampler
// (here it has no burn window to compare over, which is how far it gets
// without Prometheus), and a rule whose sampler is missing says so rather
// than borrowing -profile-url's.
func TestASampledRulesPageReadsItsOwnSampler(t *testing.T) {
	gw := newFakeGateway(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(pproftoptest.HeapProfile(t)) }))
	t.Cleanup(srv.Close)
	cfg, err := targets.Parse([]byte(`rules:
  - name: provider
    match: {sloth_service: llm-provider}
    static: [`+srv.URL+`]
    sampled: true
  - name: gateway
    static: [`+gw.url()+`]
    sampled: true
`), "pager.yml")
	if err != nil {
		t.Fatal(err)
	}
	p := newPagerIn(t, t.TempDir(), "", func(c *lifecycle.Config) {
		// No -profile-url sampler: a page that read it would say it has
		// none, not get as far as its burn window.
		c.Targets, c.RuleDeltas = &cfg, map[string]lifecycle.Deltas{"provider": deltas{}}
	})
	start := time.Now().UTC().Truncate(time.Second)
	provider := with(alert("firing", "page", start), "labels", map[string]string{"alertname": "ProviderLatency", "severity": "page", "sloth_service": "llm-provider"})
	gateway := with(with(alert("firing", "page", start), "fingerprint", fingerprint("gateway")),
		"labels", map[string]string{"alertname": "GatewayLatency", "severity": "page", "sloth_service": "llm-gateway"})
	if status, body := p.post(t, "/webhook/page", notification(provider, gateway)); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	p.l.Close(context.Background())
	for fp, want := range map[string]string{"page": "no window pair", "gateway": `rule "gateway" is sampled, and no sampler of its processes runs`} {
		inc, _ := p.st.Incident(store.IncidentID(&store.Alert{Fingerprint: fingerprint(fp), StartsAt: start}))
		if f := inc.Facts; f == nil || f.Heap == nil || !strings.Contains(f.Heap.Error, want) {
			t.Errorf("%s: heap facts %+v, want %q", fp, inc.Facts, want)
		}
	}
}
