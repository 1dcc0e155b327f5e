package targets

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"burnlab/pager/internal/targets/targetstest"
	"burnlab/shared/pproftop"
	"burnlab/shared/pproftop/pproftoptest"
)

// replica is one process of a service: its own listener, answering its
// pprof path with serve.
func replica(t *testing.T, serve http.HandlerFunc) *httptest.Server {
	srv := httptest.NewServer(serve)
	t.Cleanup(srv.Close)
	return srv
}

func profileOf(raw []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != DefaultPath {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(raw)
	}
}

// A service of five replicas: two answer real heap profiles, one an HTML
// page (a wrong port), one hangs, one says 404 (a wrong path). The two are
// merged; each of the three says why it is not in the merge; the one that
// hangs is given up at its own timeout, and the others came all the same.
func TestEveryReplicaIsProfiledAndMerged(t *testing.T) {
	busy, idle := pproftoptest.HeapProfile(t), pproftoptest.IdleProfile(t)
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	srvs := []*httptest.Server{
		replica(t, profileOf(busy)),
		replica(t, profileOf(idle)),
		replica(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write([]byte("<html>a dashboard</html>"))
		}),
		replica(t, func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-hang:
			case <-r.Context().Done():
			}
		}),
		replica(t, http.NotFound),
	}
	other := replica(t, profileOf(busy))
	d := targetstest.Prometheus(t, map[string][]*httptest.Server{"provider": srvs, "gateway": {other}})
	c, err := Parse([]byte("rules:\n  - {name: provider, jobs: [provider], port_label: __meta_pprof_port}\n"), "pager.yml")
	if err != nil {
		t.Fatal(err)
	}
	ts, err := Resolve(context.Background(), d, &c.Rules[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != len(srvs) {
		t.Fatalf("targets %+v, want the provider's %d and not the gateway's", ts, len(srvs))
	}
	for i, tg := range ts {
		if want := fmt.Sprintf("provider-%d", i); tg.Instance != want || tg.URL != srvs[i].URL+DefaultPath {
			t.Errorf("target %d: %+v, want %s at %s", i, tg, want, srvs[i].URL+DefaultPath)
		}
	}
	got, err := Fetch(context.Background(), http.DefaultClient, ts, Heap, Limits{Concurrency: 2, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	in := got.Instances
	for i, want := range []string{"", "", "answered HTML, not a pprof profile", "context deadline exceeded", "404 Not Found"} {
		if !strings.Contains(in[i].Error, want) || (want == "") != (in[i].Error == "") {
			t.Errorf("instance %s: error %q, want %q", in[i].Instance, in[i].Error, want)
		}
	}
	if len(in[0].Top) == 0 || !strings.HasSuffix(in[0].Top[0].Function, pproftoptest.Allocator) {
		t.Errorf("the busy replica's own top: %+v", in[0].Top)
	}
	if in[0].Total == 0 || in[1].Total == 0 || got.Total != in[0].Total+in[1].Total {
		t.Errorf("merged %d bytes, want the two replicas' %d + %d", got.Total, in[0].Total, in[1].Total)
	}
	if len(got.Top) == 0 || !strings.HasSuffix(got.Top[0].Function, pproftoptest.Allocator) {
		t.Errorf("the merged top: %+v", got.Top)
	}
	p, err := profile.ParseData(got.Raw)
	if err != nil {
		t.Fatalf("the merged profile's bytes: %v", err)
	}
	if _, total, _ := pproftop.Top(p, Heap.SampleType, 1); total != got.Total {
		t.Errorf("the stored merge holds %d bytes, the page says %d", total, got.Total)
	}
}

func TestAServiceThatCannotBeProfiledSaysWhy(t *testing.T) {
	a, b := replica(t, profileOf(pproftoptest.IdleProfile(t))), replica(t, http.NotFound)
	d := targetstest.Prometheus(t, map[string][]*httptest.Server{"provider": {a, b}})
	rule := func(y string) *Rule {
		c, err := Parse([]byte(y), "pager.yml")
		if err != nil {
			t.Fatal(err)
		}
		return &c.Rules[0]
	}
	for _, tc := range []struct {
		name string
		d    Discovery
		rule *Rule
		want string
	}{
		{"too many", d, rule("rules:\n  - {name: p, jobs: [provider], max_targets: 1}\n"), "more than 1 active targets (max_targets): none is profiled"},
		{"no such job", d, rule("rules:\n  - {name: p, jobs: [provider, provder]}\n"), `Prometheus has no active target of job "provder"`},
		{"no Prometheus", nil, rule("rules:\n  - {name: p, jobs: [provider]}\n"), "the pager has no -prometheus-url"},
	} {
		if ts, err := Resolve(context.Background(), tc.d, tc.rule); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %+v, %v; want an error saying %q", tc.name, ts, err, tc.want)
		}
	}
	// The scrape's own port, the rule's port and path otherwise.
	ts, err := Resolve(context.Background(), d, rule("rules:\n  - {name: p, jobs: [provider], path: '/debug/pprof/heap?gc=1'}\n"))
	if err != nil || len(ts) != 2 || ts[0].URL != a.URL+"/debug/pprof/heap?gc=1" {
		t.Errorf("targets at the scrape's port: %+v %v", ts, err)
	}
	// None came: the error names each.
	_, err = Fetch(context.Background(), http.DefaultClient, []Target{{Instance: "b", URL: b.URL + DefaultPath}}, Heap, Limits{Concurrency: 1, Timeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "no process's profile came: b: fetching") {
		t.Errorf("no profile came: %v", err)
	}
	// A profile of the wrong kind (CPU, no alloc_space) is no heap profile.
	cpu := &profile.Profile{SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}}, PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"}}
	var buf strings.Builder
	if err := cpu.Write(&buf); err != nil {
		t.Fatal(err)
	}
	c := replica(t, profileOf([]byte(buf.String())))
	got, err := Fetch(context.Background(), http.DefaultClient, []Target{{Instance: "c", URL: c.URL + DefaultPath}}, Heap, Limits{Concurrency: 1, Timeout: time.Second})
	if err == nil || !strings.Contains(got.Instances[0].Error, `not a heap profile`) {
		t.Errorf("a CPU profile: %+v %v", got.Instances, err)
	}
}

// A process that redirects the pager is not followed, whatever it points
// at: an answer, and an error of that process's.
func TestAProcessCannotRedirectThePager(t *testing.T) {
	hit := make(chan struct{}, 1)
	inside := replica(t, func(w http.ResponseWriter, r *http.Request) { hit <- struct{}{} })
	evil := replica(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, inside.URL+"/latest/meta-data/", http.StatusFound)
	})
	_, err := Fetch(context.Background(), http.DefaultClient, []Target{{Instance: "evil", URL: evil.URL + DefaultPath}}, Heap, Limits{Concurrency: 1, Timeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), `302 Found" to`) || !strings.Contains(err.Error(), "never follows") {
		t.Errorf("a redirect: %v", err)
	}
	select {
	case <-hit:
		t.Error("the pager followed the redirect")
	default:
	}
}

// When one of several processes answers, its profile is what is stored:
// the bytes written are a profile, not nothing.
func TestOneOfSeveralProfilesIsStored(t *testing.T) {
	ok, gone := replica(t, profileOf(pproftoptest.HeapProfile(t))), replica(t, http.NotFound)
	got, err := Fetch(context.Background(), http.DefaultClient, []Target{{Instance: "ok", URL: ok.URL + DefaultPath}, {Instance: "gone", URL: gone.URL + DefaultPath}}, Heap, Limits{Concurrency: 2, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := profile.ParseData(got.Raw); err != nil || len(p.Sample) == 0 || got.Instances[1].Error == "" {
		t.Errorf("stored %d bytes (%v), instances %+v", len(got.Raw), err, got.Instances)
	}
}

// What the pager holds of one capture's processes is bounded by their
// parsed fields, not their bytes, which a gzip makes small: past the
// bound a process's profile is an error of its own, and the rest merge.
func TestTheProcessesProfilesAreBoundedInAll(t *testing.T) {
	raw := pproftoptest.HeapProfile(t)
	p, err := profile.ParseData(raw)
	if err != nil {
		t.Fatal(err)
	}
	n := len(p.Sample) + len(p.Location) + len(p.Function) + len(p.Mapping)
	var ts []Target
	for i := range 3 {
		ts = append(ts, Target{Instance: fmt.Sprint("p", i), URL: replica(t, profileOf(raw)).URL + DefaultPath})
	}
	got, err := Fetch(context.Background(), http.DefaultClient, ts, Heap, Limits{Concurrency: 1, Timeout: 5 * time.Second, MaxFields: 2*n + n/2})
	if err != nil {
		t.Fatal(err)
	}
	over := 0
	for _, in := range got.Instances {
		if strings.Contains(in.Error, "fields are past the") {
			over++
		}
	}
	if over != 1 || got.Total != got.Instances[0].Total*2 && got.Total != got.Instances[1].Total*2 {
		t.Errorf("room for 2.5 profiles of 3: %d refused, merged %d bytes; instances %+v", over, got.Total, got.Instances)
	}
}
