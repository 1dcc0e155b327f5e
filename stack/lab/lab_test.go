package lab

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"burnlab/shared/freeport"
	"burnlab/shared/scenario"
)

// The lab runs the repo's own config files; rendering may change nothing
// but the compose addresses, and must leave none of them behind.
func TestRenderChangesOnlyAddresses(t *testing.T) {
	root, _ := filepath.Abs("../..")
	addrs := freeAddrs(t)
	for _, windows := range []string{"lab", "production"} {
		cfg := Config{Root: root, Dir: t.TempDir(), Addrs: addrs, Windows: windows}
		if err := cfg.defaults(); err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Join(cfg.Dir, "etc/rules"), 0o755)
		l := &Lab{cfg: cfg}
		if err := l.render(); err != nil {
			t.Fatal(err)
		}
		for src, dst := range map[string]string{
			"prometheus/prometheus.yml":                "etc/prometheus.yml",
			"alertmanager/alertmanager.yml":            "etc/alertmanager.yml",
			"prometheus/rules/slo-" + windows + ".yml": "etc/rules/slo.yml",
			"pager/pager.yml":                          "etc/pager.yml",
		} {
			orig, _ := os.ReadFile(filepath.Join(root, src))
			got, _ := os.ReadFile(filepath.Join(cfg.Dir, dst))
			for _, compose := range []string{"gateway:6060", "upstream:8081", "upstream:6062", "loadgen:6061", "pager:5001", "alertmanager:9093", "alertmanager-2:9093", "localhost:9090"} {
				if strings.Contains(string(got), compose) {
					t.Errorf("%s still names %s", dst, compose)
				}
			}
			back := strings.NewReplacer(addrs.GatewayAdmin, "gateway:6060", addrs.Upstream, "upstream:8081", addrs.UpstreamAdmin, "upstream:6062", addrs.LoadgenAdmin, "loadgen:6061",
				addrs.Pager, "pager:5001", addrs.Alertmanager, "alertmanager:9093", addrs.Prometheus, "localhost:9090").Replace(string(got))
			// The lab's one Alertmanager answers for both of the pair.
			if back != strings.ReplaceAll(string(orig), "alertmanager-2:9093", "alertmanager:9093") {
				t.Errorf("%s differs from %s by more than addresses", dst, src)
			}
		}
	}
}

func TestConfigRefusesUnknownSettings(t *testing.T) {
	for _, c := range []Config{{}, {Root: "/r", Dir: "/d", Variant: "nightly"}, {Root: "/r", Dir: "/d", Windows: "weekly"}} {
		if err := c.defaults(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// The e2e's "nothing new fires" checks passed when the pager or Prometheus
// was down, because they ignored read errors. Against a lab with nothing
// listening (and one that answers 500) every check must report the error.
func TestChecksFailWhenThePagerOrPrometheusCannotBeRead(t *testing.T) {
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusInternalServerError)
	}))
	defer broken.Close()
	dead := freeAddrs(t)
	erring := dead
	erring.Pager = strings.TrimPrefix(broken.URL, "http://")
	erring.Prometheus = erring.Pager
	for name, addrs := range map[string]Addrs{"nothing listening": dead, "500": erring} {
		l := &Lab{Probe: Probe{addrs}}
		if _, err := l.Incident("id"); err == nil {
			t.Errorf("%s: Incident returned none instead of failing", name)
		}
		if _, err := firing(l, "availability", "page"); err == nil {
			t.Errorf("%s: firing said silent instead of failing", name)
		}
		if err := l.PagerShows("/"); err == nil {
			t.Errorf("%s: PagerShows passed instead of failing", name)
		}
	}
}

// The matrix's watch fails on a source it cannot read, and flags an alert
// seen before the fault or one the scenario does not allow — but not the
// ticket of the SLO it pages.
func TestWatchFlagsWhatTheScenarioDoesNotAllow(t *testing.T) {
	var prom, am, pager string
	serve := func(body *string) string {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(*body)) }))
		t.Cleanup(s.Close)
		return strings.TrimPrefix(s.URL, "http://")
	}
	addrs := Addrs{Prometheus: serve(&prom), Alertmanager: serve(&am), Pager: serve(&pager)}
	alert := func(slo, sev string) string {
		return `{"labels":{"sloth_service":"llm-gateway","sloth_slo":"` + slo + `","severity":"` + sev + `"},"state":"firing"}`
	}
	// A pending alert is not one: it was never sent.
	pending := `{"labels":{"sloth_service":"llm-gateway","alertname":"SLOSLINoData","severity":"page"},"state":"pending"}`
	prom, am, pager = `{"data":{"alerts":[`+alert("stream-latency", "ticket")+`,`+pending+`]}}`, `[]`, `[]`
	sc, err := scenario.Lookup("upstream-tail")
	if err != nil {
		t.Fatal(err)
	}
	w := newWatch(&Lab{Probe: Probe{addrs}}, sc)
	if err := w.poll(); err != nil {
		t.Fatal(err)
	}
	if v := w.violations(); len(v) != 1 || !strings.Contains(v[0], "before the fault") {
		t.Fatalf("an alert before the fault: %q", v)
	}
	w = newWatch(&Lab{Probe: Probe{addrs}}, sc)
	w.inject(time.Now())
	am = `[` + alert("stream-latency", "page") + `]`
	pager = `[{"id":"1","slo":"ttft","severity":"page","status":"firing","timeline":[{"kind":"firing","receiver":"pager-ticket"}]}]`
	if err := w.poll(); err != nil {
		t.Fatal(err)
	}
	v := strings.Join(w.violations(), "; ")
	if strings.Contains(v, "stream-latency") || !strings.Contains(v, "ttft page in pager") || !strings.Contains(v, "reached the pager through pager-ticket") {
		t.Fatalf("violations: %s", v)
	}
	if ticket := (scenario.Alert{SLO: "stream-latency", Severity: "ticket"}); w.everywhere(ticket, true) || w.everywhere(ticket, false) {
		t.Fatal("a ticket seen in Prometheus only is neither everywhere nor nowhere")
	}
	pager = `not json`
	if err := w.poll(); err == nil {
		t.Fatal("an unreadable pager must fail the poll")
	}
	dead := freeAddrs(t)
	if err := newWatch(&Lab{Probe: Probe{dead}}, sc).poll(); err == nil {
		t.Fatal("nothing listening must fail the poll")
	}
}

// fakeProm answers each instant query with the first result whose key the
// query contains, and an empty result otherwise.
func fakeProm(t *testing.T, results map[string]string) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query().Get("query")
		body := `[]`
		for k, v := range results {
			if strings.Contains(q, k) {
				body = v
			}
		}
		w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":` + body + `}}`))
	}))
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

func vector(labels, value string) string {
	return `[{"metric":{` + labels + `},"value":[0,"` + value + `"]}]`
}

// The matrix's end-of-row checks fail a stalled load, a NaN burn, a burn
// far from the derived one, and an alert that fired between two polls.
func TestMatrixChecksFailWhatTheyGuard(t *testing.T) {
	tail, err := scenario.Lookup("upstream-tail")
	if err != nil {
		t.Fatal(err)
	}
	ratio := func(v string) map[string]string {
		return map[string]string{`outcome="ok"}[2m]`: vector("", "25"), `ratio_rate2m{sloth_slo="stream-latency"}`: vector(`"sloth_slo":"stream-latency"`, v),
			`ratio_rate2m{sloth_slo="availability"}`: vector("", "0"), `ratio_rate2m{sloth_slo="ttft"}`: vector("", "0"),
			`ratio_rate2m{sloth_slo="completion-latency"}`: vector("", "0")}
	}
	for name, c := range map[string]struct {
		results map[string]string
		want    string // in the error; "" passes
	}{
		"as derived":     {ratio("0.0098"), ""},
		"far from it":    {ratio("0.005"), "stream-latency burns 5.0x"},
		"NaN":            {ratio("NaN"), "NaN"},
		"stalled load":   {map[string]string{`outcome="ok"}[2m]`: vector("", "3")}, "streams/s"},
		"no load at all": {map[string]string{}, "no streams counted"},
	} {
		l := &Lab{Probe: Probe{Addrs{Prometheus: fakeProm(t, c.results)}}}
		_, err := measureBurn(l, tail, tail.Observe)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	pager := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`[{"id":"1","slo":"stream-latency","severity":"page","status":"resolved"}]`))
	}))
	defer pager.Close()
	fired := func(alerts string) error {
		l := &Lab{Probe: Probe{Addrs{Prometheus: fakeProm(t, map[string]string{"ALERTS": alerts}), Pager: strings.TrimPrefix(pager.URL, "http://")}}}
		return firedOverTheRun(l, tail, time.Minute)
	}
	if err := fired(vector(`"sloth_slo":"stream-latency","severity":"ticket"`, "1")); err != nil {
		t.Errorf("the paging SLO's ticket is allowed: %v", err)
	}
	if err := fired(vector(`"sloth_slo":"ttft","severity":"page"`, "1")); err == nil || !strings.Contains(err.Error(), "ttft page in Prometheus") {
		t.Errorf("a ttft page that fired between polls: %v", err)
	}
}

// An incident is asked for by its ID, not searched for in the list, which
// holds only the newest page of them.
func TestIncidentIsFetchedByItsID(t *testing.T) {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/incidents/old-1":
			w.Write([]byte(`{"id":"old-1","status":"resolved"}`))
		case "/api/incidents":
			w.Write([]byte(`[]`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer s.Close()
	p := Probe{Addrs{Pager: strings.TrimPrefix(s.URL, "http://")}}
	if inc, err := p.Incident("old-1"); err != nil || inc.ID != "old-1" || inc.Status != "resolved" {
		t.Errorf("an incident past the list's first page: %+v %v", inc, err)
	}
	if inc, err := p.Incident("none"); err != nil || inc.ID != "" {
		t.Errorf("an unknown incident: %+v %v", inc, err)
	}
}

// The lab starts its load only once the pager reports a delta heap profile
// of the gateway: pagerDeltas reads that count from the pager's own
// exposition, the gateway's rule's series only, and a pager without it is
// an error, never a zero to wait on forever.
func TestPagerDeltasReadsTheGatewaysCounter(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pager_delta_profiles_total", Help: "h"}, []string{"result", "rule"})
	reg.MustRegister(c)
	c.WithLabelValues("ok", GatewayRule)
	c.WithLabelValues("error", GatewayRule).Add(3)
	c.WithLabelValues("ok", ProviderRule).Add(7)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	p := Probe{Addrs{Pager: strings.TrimPrefix(srv.URL, "http://")}}
	if n, err := p.pagerDeltas(GatewayRule); err != nil || n != 0 {
		t.Fatalf("before any delta of the gateway: %v, %v; want 0, nil", n, err)
	}
	c.WithLabelValues("ok", GatewayRule).Add(2)
	if n, err := p.pagerDeltas(GatewayRule); err != nil || n != 2 {
		t.Fatalf("after two deltas: %v, %v; want 2, nil", n, err)
	}
	if n, err := p.pagerDeltas(ProviderRule); err != nil || n != 7 {
		t.Fatalf("the provider's deltas: %v, %v; want 7, nil", n, err)
	}
	other := httptest.NewServer(promhttp.HandlerFor(prometheus.NewRegistry(), promhttp.HandlerOpts{}))
	defer other.Close()
	if _, err := (Probe{Addrs{Pager: strings.TrimPrefix(other.URL, "http://")}}).pagerDeltas(GatewayRule); err == nil {
		t.Fatal("a /metrics without the series read as no error")
	}
}

// freeAddrs picks the lab's ports for a test beside a running lab.
func freeAddrs(t testing.TB) Addrs {
	p := freeport.ForTest
	return Addrs{GatewayPublic: p(t), GatewayAdmin: p(t), Upstream: p(t), UpstreamAdmin: p(t), LoadgenAdmin: p(t),
		Pager: p(t), Prometheus: p(t), Alertmanager: p(t)}
}
