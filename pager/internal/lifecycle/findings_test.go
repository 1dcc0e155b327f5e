package lifecycle_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"burnlab/pager/internal/lifecycle"
	"burnlab/shared/amwebhook"

	"burnlab/pager/internal/promfacts/promfactstest"
)

// fakeAlertmanager stands in for Alertmanager's v2 API: it keeps the
// alerts posted to it, in order, and answers as Alertmanager does, but
// with a 503 to the first fail posts, as a replica that is restarting.
type fakeAlertmanager struct {
	*httptest.Server
	mu     sync.Mutex
	posted []amwebhook.Alert
	fail   int
}

func newFakeAlertmanager(t *testing.T, fail int) *fakeAlertmanager {
	am := &fakeAlertmanager{fail: fail}
	am.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var alerts []amwebhook.Alert
		if r.Method != http.MethodPost || r.URL.Path != "/api/v2/alerts" || json.NewDecoder(r.Body).Decode(&alerts) != nil {
			http.Error(w, "want a POST of alerts to /api/v2/alerts", http.StatusBadRequest)
			return
		}
		am.mu.Lock()
		defer am.mu.Unlock()
		if am.fail > 0 {
			am.fail--
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		am.posted = append(am.posted, alerts...)
	}))
	t.Cleanup(am.Close)
	return am
}

// burningPage is a Prometheus and deltas by which a stream-latency page
// starting at start fired through its 30s/1m pair while Append's
// allocation grew a hundredfold.
func burningPage(t *testing.T, start time.Time) (*promfactstest.Server, deltas) {
	prom := promfactstest.New(t)
	prom.Set("sum_over_time(", "0.012")
	prom.Set("ratio_rate30s{", "20")
	prom.Set("ratio_rate1m{", "16")
	prom.Set("time_period", "0.4166666666666667")
	prom.SetBefore("ratio_rate30s{", start.Add(-90*time.Second), "NaN")
	return prom, deltas{
		deltaAt(t, start.Add(-5*time.Minute), map[string]float64{appendFn: 1e6, copyFn: 5e6}),
		deltaAt(t, start.Add(-30*time.Second), map[string]float64{appendFn: 100e6, copyFn: 5e6}),
	}
}

func (am *fakeAlertmanager) alerts() []amwebhook.Alert {
	am.mu.Lock()
	defer am.mu.Unlock()
	return slices.Clone(am.posted)
}

// A page's heap verdict goes to every Alertmanager of the set as an alert
// of its own: the page's labels, its alertname with HeapFinding,
// burnlab_finding and the incident, firing until the page resolves; the
// resolve ends it. A replica that answers 503 at first gets it on the next
// try. When Alertmanager sends the finding to the pager's webhook, the
// pager takes it for no page.
func TestThePagesHeapFindingGoesToAlertmanager(t *testing.T) {
	start := time.Now().Add(-2 * time.Minute).UTC().Truncate(time.Second)
	prom, d := burningPage(t, start)
	am1, am2 := newFakeAlertmanager(t, 0), newFakeAlertmanager(t, 1)
	p := newFactsPager(t, prom.URL, d, 0, am1.URL, am2.URL)
	page := burnAlert(start, nil)
	if status, body := p.post(t, "/webhook/page", notification(page)); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	inc, f := p.facts(t)
	if f.Heap == nil || !f.Heap.Changed {
		t.Fatalf("heap %+v: want Append's growth", f.Heap)
	}
	for _, am := range []*fakeAlertmanager{am1, am2} {
		got := am.alerts()
		if len(got) != 1 {
			t.Fatalf("%s holds %d alerts, want the finding: %+v", am.URL, len(got), got)
		}
		a := got[0]
		want := maps.Clone(page["labels"].(map[string]string))
		want[lifecycle.FindingLabel], want[lifecycle.IncidentLabel], want["alertname"] = "heap", inc.ID, "LLMGatewayStreamLatencyBudgetBurnHeapFinding"
		if len(a.Labels) != len(want) || !strings.Contains(a.Annotations["heap"], "transcript.(*Baseline).Append grew from 1.0 MB/s") ||
			a.Annotations["heap"] != f.Heap.Words || a.Annotations["pager_url"] != "http://pager.test/incidents/"+inc.ID || a.GeneratorURL != a.Annotations["pager_url"] {
			t.Errorf("finding %+v, want the page's labels %v and the verdict %q", a, want, f.Heap.Words)
		}
		for k, v := range want {
			if a.Labels[k] != v {
				t.Errorf("finding's %s=%q, want %q", k, a.Labels[k], v)
			}
		}
		if !a.StartsAt.Equal(f.TakenAt) || !a.EndsAt.Equal(f.TakenAt.Add(lifecycle.FindingFor)) {
			t.Errorf("finding from %s to %s, want from the facts' %s for %s", a.StartsAt, a.EndsAt, f.TakenAt, lifecycle.FindingFor)
		}
	}

	// Alertmanager sends the finding to the pager's webhook, alone as its
	// own group, or beside the page where a config groups them together:
	// it is no incident.
	back := with(burnAlert(start, nil), "fingerprint", fingerprint("finding"))
	maps.Copy(back["labels"].(map[string]string), map[string]string{lifecycle.FindingLabel: "heap", lifecycle.IncidentLabel: inc.ID, "alertname": "LLMGatewayStreamLatencyBudgetBurnHeapFinding"})
	if status, body := p.post(t, "/webhook/page", notification(back)); status != 200 || !strings.Contains(body, `"accepted":0,"duplicates":0,"findings":1`) {
		t.Errorf("a finding alone: %d %s, want it taken and none accepted", status, body)
	}
	if status, body := p.post(t, "/webhook/page", notification(back, page)); status != 200 || !strings.Contains(body, `"findings":1`) {
		t.Errorf("a finding with its page: %d %s, want one finding", status, body)
	}

	// The page resolves: its finding is posted resolved, with its words.
	resolved := with(alert("resolved", "page", start), "labels", page["labels"])
	if status, body := p.post(t, "/webhook/page", notification(resolved)); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	p.l.Close(context.Background())
	if incs := all(p.st); len(incs) != 1 || incs[0].Status != "resolved" {
		t.Fatalf("incidents %+v: want the page alone, resolved", incs)
	}
	for _, am := range []*fakeAlertmanager{am1, am2} {
		got := am.alerts()
		if len(got) != 2 {
			t.Fatalf("%s holds %d posts, want the finding and its end", am.URL, len(got))
		}
		if a := got[1]; a.EndsAt.After(time.Now()) || a.EndsAt.Before(a.StartsAt) || a.Annotations["heap"] != f.Heap.Words || a.Labels[lifecycle.FindingLabel] != "heap" {
			t.Errorf("the finding's end %+v: want it resolved by now, with its words", a)
		}
	}
}

// An Alertmanager that is down costs the page nothing but the finding,
// after its tries, and the pager says so; a heap that was not compared
// makes no finding.
func TestAFindingThatCannotBePostedIsLogged(t *testing.T) {
	start := time.Now().Add(-2 * time.Minute).UTC().Truncate(time.Second)
	prom, d := burningPage(t, start)
	down := newFakeAlertmanager(t, 0)
	down.Close()
	p := newFactsPager(t, prom.URL, d, 0, down.URL)
	if status, _ := p.post(t, "/webhook/page", notification(burnAlert(start, nil))); status != 200 {
		t.Fatal(status)
	}
	p.facts(t)
	if logs := p.Logs.String(); !strings.Contains(logs, "could not post the heap finding") || !strings.Contains(logs, "connection refused") {
		t.Errorf("log:\n%s", logs)
	}

	am := newFakeAlertmanager(t, 0)
	p = newFactsPager(t, prom.URL, deltas{}, 0, am.URL)
	p.post(t, "/webhook/page", notification(burnAlert(start, nil)))
	if _, f := p.facts(t); f.Heap == nil || f.Heap.Error == "" || len(am.alerts()) != 0 {
		t.Errorf("heap %+v, posted %+v: want no comparison, and no finding", f.Heap, am.alerts())
	}
}

func TestParseAlertmanagers(t *testing.T) {
	for in, want := range map[string][]string{
		"":                                nil,
		" , ":                             nil,
		"http://alertmanager:9093":        {"http://alertmanager:9093"},
		"http://a:9093/, https://b/am/ ,": {"http://a:9093", "https://b/am"},
	} {
		if got, err := lifecycle.ParseAlertmanagers(in); err != nil || !slices.Equal(got, want) {
			t.Errorf("lifecycle.ParseAlertmanagers(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"alertmanager:9093", "ftp://a:9093", "http://a:9093?x=1", "http://", "http://a:9093,tcp://b", "http://user:secret@a:9093"} {
		if got, err := lifecycle.ParseAlertmanagers(in); err == nil || !strings.Contains(err.Error(), "want http(s)://host:port") {
			t.Errorf("lifecycle.ParseAlertmanagers(%q) = %q, %v; want an error", in, got, err)
		}
	}
}
