package webhook

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

	"burnlab/pager/internal/promfacts/promfactstest"
)

// fakeAlertmanager stands in for Alertmanager's v2 API: it keeps the
// alerts posted to it, in order, and answers as Alertmanager does.
type fakeAlertmanager struct {
	*httptest.Server
	mu     sync.Mutex
	posted []amAlert
}

func newFakeAlertmanager(t *testing.T) *fakeAlertmanager {
	am := &fakeAlertmanager{}
	am.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var alerts []amAlert
		if r.Method != http.MethodPost || r.URL.Path != "/api/v2/alerts" || json.NewDecoder(r.Body).Decode(&alerts) != nil {
			http.Error(w, "want a POST of alerts to /api/v2/alerts", http.StatusBadRequest)
			return
		}
		am.mu.Lock()
		am.posted = append(am.posted, alerts...)
		am.mu.Unlock()
	}))
	t.Cleanup(am.Close)
	return am
}

func (am *fakeAlertmanager) alerts() []amAlert {
	am.mu.Lock()
	defer am.mu.Unlock()
	return slices.Clone(am.posted)
}

// A page's heap verdict goes to every Alertmanager of the set as an alert
// of its own: the page's labels, its alertname with HeapFinding, and
// burnlab_finding, firing until the page resolves; the resolve ends it. When Alertmanager sends it back
// with the page, the pager takes it for no page of its own.
func TestThePagesHeapFindingJoinsItsGroup(t *testing.T) {
	prom := promfactstest.New(t)
	prom.Set("avg_over_time(", "0.012")
	prom.Set("ratio_rate30s{", "20")
	prom.Set("ratio_rate1m{", "16")
	prom.Set("time_period", "0.4166666666666667")
	start := time.Now().Add(-2 * time.Minute).UTC().Truncate(time.Second)
	prom.SetBefore("ratio_rate30s{", start.Add(-90*time.Second), "NaN")
	d := deltas{
		deltaAt(t, start.Add(-5*time.Minute), map[string]float64{appendFn: 1e6, copyFn: 5e6}),
		deltaAt(t, start.Add(-30*time.Second), map[string]float64{appendFn: 100e6, copyFn: 5e6}),
	}
	am1, am2 := newFakeAlertmanager(t), newFakeAlertmanager(t)
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
		want[FindingLabel], want["alertname"] = "heap", "LLMGatewayStreamLatencyBudgetBurnHeapFinding"
		if len(a.Labels) != len(want) || !strings.Contains(a.Annotations["heap"], "transcript.(*Baseline).Append grew from 1.0 MB/s") ||
			a.Annotations["heap"] != f.Heap.Words || a.Annotations["pager_url"] != "http://pager.test/incidents/"+inc.ID {
			t.Errorf("finding %+v, want the page's labels %v and the verdict %q", a, want, f.Heap.Words)
		}
		for k, v := range want {
			if a.Labels[k] != v {
				t.Errorf("finding's %s=%q, want %q", k, a.Labels[k], v)
			}
		}
		if !a.StartsAt.Equal(f.TakenAt) || !a.EndsAt.Equal(f.TakenAt.Add(FindingFor)) {
			t.Errorf("finding from %s to %s, want from the facts' %s for %s", a.StartsAt, a.EndsAt, f.TakenAt, FindingFor)
		}
	}

	// Alertmanager sends the group back, the page with its finding: the
	// finding is no incident.
	back := with(burnAlert(start, nil), "fingerprint", fingerprint("finding"))
	back["labels"].(map[string]string)[FindingLabel] = "heap"
	if status, body := p.post(t, "/webhook/page", notification(back, page)); status != 200 || !strings.Contains(body, `"findings":1`) {
		t.Errorf("the group back: %d %s, want one finding", status, body)
	}
	if status, body := p.post(t, "/webhook/page", notification(back)); status != 200 || !strings.Contains(body, `"accepted":0`) {
		t.Errorf("a finding alone: %d %s, want it taken and none accepted", status, body)
	}

	// The page resolves: its finding is posted resolved, with its words.
	resolved := with(alert("resolved", "page", start), "labels", page["labels"])
	if status, body := p.post(t, "/webhook/page", notification(resolved)); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	p.h.Close(context.Background())
	if incs := all(p.st); len(incs) != 1 || incs[0].Status != "resolved" {
		t.Fatalf("incidents %+v: want the page alone, resolved", incs)
	}
	for _, am := range []*fakeAlertmanager{am1, am2} {
		got := am.alerts()
		if len(got) != 2 {
			t.Fatalf("%s holds %d posts, want the finding and its end", am.URL, len(got))
		}
		if a := got[1]; a.EndsAt.After(time.Now()) || a.EndsAt.Before(a.StartsAt) || a.Annotations["heap"] != f.Heap.Words || a.Labels[FindingLabel] != "heap" {
			t.Errorf("the finding's end %+v: want it resolved by now, with its words", a)
		}
	}
}

// An Alertmanager that is down costs the page nothing but the finding, and
// the pager says so.
func TestAFindingThatCannotBePostedIsLogged(t *testing.T) {
	down := newFakeAlertmanager(t)
	down.Close()
	p := newFactsPager(t, "", deltas{}, 0, down.URL)
	if status, _ := p.post(t, "/webhook/page", notification(burnAlert(time.Now().Add(-time.Minute), nil))); status != 200 {
		t.Fatal(status)
	}
	p.facts(t)
	if logs := p.logs.String(); !strings.Contains(logs, "could not post the heap finding") || !strings.Contains(logs, "connection refused") {
		t.Errorf("log:\n%s", logs)
	}
}

func TestParseAlertmanagers(t *testing.T) {
	for in, want := range map[string][]string{
		"":                                nil,
		" , ":                             nil,
		"http://alertmanager:9093":        {"http://alertmanager:9093"},
		"http://a:9093/, https://b/am/ ,": {"http://a:9093", "https://b/am"},
	} {
		if got, err := ParseAlertmanagers(in); err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseAlertmanagers(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"alertmanager:9093", "ftp://a:9093", "http://a:9093?x=1", "http://", "http://a:9093,tcp://b"} {
		if got, err := ParseAlertmanagers(in); err == nil || !strings.Contains(err.Error(), "want http(s)://host:port") {
			t.Errorf("ParseAlertmanagers(%q) = %q, %v; want an error", in, got, err)
		}
	}
}
