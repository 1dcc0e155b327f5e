package lifecycle_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"burnlab/pager/internal/lifecycle"
	"burnlab/pager/internal/store"
	"burnlab/shared/incident"
	"burnlab/shared/pproftop"
	"burnlab/shared/pproftop/pproftoptest"
)

// The incident's profile comes from a real Go pprof endpoint on loopback:
// the function that allocated most in that process must top the list.
func TestPageCapturesTheHeapProfile(t *testing.T) {
	p := newPager(t, gatewayPprof(t))
	start := time.Now().UTC().Truncate(time.Second).Add(250 * time.Millisecond)
	if status, _ := p.post(t, "/webhook/page", notification(alert("firing", "page", start))); status != 200 {
		t.Fatal(status)
	}
	p.l.Close(context.Background())
	inc := all(p.st)[0]
	if inc.Profile == nil || inc.Profile.Error != "" || len(inc.Profile.Top) == 0 {
		t.Fatalf("profile %+v", inc.Profile)
	}
	if !strings.HasSuffix(inc.Profile.Top[0].Function, pproftoptest.Allocator) {
		t.Fatalf("top alloc_space %+v", inc.Profile.Top[0])
	}
	if _, err := os.Stat(filepath.Join(p.Dir, inc.Profile.File)); err != nil {
		t.Fatalf("profile file: %v", err)
	}
	resp, _ := http.Get(p.Srv.URL + "/api/incidents/" + inc.ID + "/profile")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(b) < 100 {
		t.Fatalf("profile download: %d, %d bytes", resp.StatusCode, len(b))
	}
	if !strings.Contains(p.Logs.String(), "PROFILE top alloc_space") {
		t.Error("the captured profile's top functions are not logged")
	}

	// A repeat of the page captures nothing more: not
	// Alertmanager's retry of the same notification, nor the same alert
	// sent again later with a new burn rate and its start as Prometheus
	// restores it after a restart (whole seconds), which is stored as news
	// on the same incident.
	if status, body := p.post(t, "/webhook/page", notification(alert("firing", "page", start))); status != 200 || !strings.Contains(body, `"duplicates":1`) {
		t.Fatalf("retry: %d %s", status, body)
	}
	later := with(alert("firing", "page", start.Truncate(time.Second)), "annotations", map[string]string{"burn_rate": "14.4x"})
	if status, body := p.post(t, "/webhook/page", notification(later)); status != 200 || !strings.Contains(body, `"accepted":1`) {
		t.Fatalf("repeat: %d %s", status, body)
	}
	// A ticket is diagnosed as a page is, and gets its own; an alert of
	// another severity is kept, not diagnosed.
	if status, _ := p.post(t, "/webhook/ticket", notification(alert("firing", "ticket", start))); status != 200 {
		t.Fatalf("ticket: %d", status)
	}
	if status, _ := p.post(t, "/webhook/page", notification(alert("firing", "info", start))); status != 200 {
		t.Fatalf("info: %d", status)
	}
	p.l.Close(context.Background()) // any capture those started has finished
	if got := p.counter(t, "pager_profiles_total", map[string]string{"when": "page", "result": "ok"}) + p.counter(t, "pager_profiles_total", map[string]string{"when": "page", "result": "error"}); got != 2 {
		t.Errorf("profiles = %v, want 2: the page's and the ticket's", got)
	}
	if inc, _ := p.st.Incident(inc.ID); len(inc.Timeline) != 3 {
		t.Errorf("the page's timeline: %+v, want firing, profile captured, firing again", inc.Timeline)
	}
	for sev, want := range map[string]bool{"ticket": true, "info": false} {
		other, ok := p.st.Incident(store.IncidentID(&store.Alert{Fingerprint: fingerprint(sev), StartsAt: start}))
		if !ok || (other.Profile != nil) != want {
			t.Errorf("the %s's incident (found: %v) has profile %+v, want one: %v", sev, ok, other.Profile, want)
		}
	}
	if n := len(all(p.st)); n != 3 {
		t.Errorf("%d incidents, want the page's, the ticket's and the info's", n)
	}
}

func TestAFailedCaptureIsRecordedAndNeverBlocksThePage(t *testing.T) {
	// The profile target answers, with a failure, only once the page is
	// acknowledged: a page that waited for its capture would be answered
	// only at the capture's timeout (a minute), with its failure recorded.
	// No clock is read, so a busy machine cannot fail it.
	acked := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-acked:
			http.Error(w, "profiling failed", http.StatusInternalServerError)
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	p := newPagerIn(t, t.TempDir(), slow.URL, func(c *lifecycle.Config) { c.ProfileTimeout = time.Minute })
	if status, _ := p.post(t, "/webhook/page", notification(alert("firing", "page", time.Now()))); status != 200 {
		t.Fatal(status)
	}
	if inc := all(p.st)[0]; inc.Profile != nil {
		t.Fatalf("the page was answered after its capture ended: %+v", inc.Profile)
	}
	close(acked)
	p.l.Close(context.Background())
	inc := all(p.st)[0]
	if inc.Profile == nil || inc.Profile.Error == "" || !strings.Contains(fmt.Sprint(inc.Timeline), "profile failed") {
		t.Fatalf("failure not recorded: %+v", inc)
	}
}

// A profile target that serves a decompression bomb gets a clear error on
// the incident, after no more than pproftop.MaxBytes is inflated.
func TestADecompressionBombIsRefusedOnTheIncident(t *testing.T) {
	bomb := pproftoptest.Bomb(t, 2*pproftop.MaxBytes)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(bomb) }))
	defer target.Close()
	p := newPager(t, target.URL)
	if status, _ := p.post(t, "/webhook/page", notification(alert("firing", "page", time.Now()))); status != 200 {
		t.Fatal(status)
	}
	p.l.Close(context.Background())
	inc := all(p.st)[0]
	if inc.Profile == nil || !strings.Contains(inc.Profile.Error, "profile too large") || !strings.Contains(inc.Profile.Error, "inflate to over") {
		t.Fatalf("the bomb's capture: %+v", inc.Profile)
	}
}

// A page that resolves gets a second profile from the same source, taken
// after the page-time one even when the resolve arrives while that is still
// being fetched, journaled so it is there after a restart, and on the
// timeline; so does a ticket; a retried resolve takes none.
func TestAResolvedPageGetsAProfileTakenAfter(t *testing.T) {
	dir := t.TempDir()
	p := newPagerIn(t, dir, gatewayPprof(t), func(c *lifecycle.Config) { c.ExternalURL = "http://pager.example:5001" })
	start := time.Now().UTC().Truncate(time.Second)
	for _, n := range []struct{ path, body string }{
		{"/webhook/page", notification(alert("firing", "page", start))},
		{"/webhook/page", notification(alert("resolved", "page", start))},
		{"/webhook/page", notification(alert("resolved", "page", start))},
		{"/webhook/ticket", notification(alert("firing", "ticket", start))},
		{"/webhook/ticket", notification(alert("resolved", "ticket", start))},
	} {
		if status, body := p.post(t, n.path, n.body); status != 200 {
			t.Fatalf("%s: %d %s", n.path, status, body)
		}
	}
	p.l.Close(context.Background())
	if got := p.counter(t, "pager_profiles_total", map[string]string{"when": "after", "result": "ok"}); got != 2 {
		t.Errorf("after profiles = %v, want 2: the page's and the ticket's", got)
	}
	id := store.IncidentID(&store.Alert{Fingerprint: fingerprint("page"), StartsAt: start})
	inc, ok := p.st.Incident(id)
	if !ok || inc.Profile == nil || inc.After == nil || inc.After.Error != "" {
		t.Fatalf("incident %+v", inc)
	}
	if !strings.HasSuffix(inc.After.File, "-after.pb.gz") || inc.After.File == inc.Profile.File || inc.After.TakenAt.Before(inc.Profile.TakenAt) {
		t.Fatalf("after %+v, page time %+v", inc.After, inc.Profile)
	}
	if !strings.Contains(fmt.Sprint(inc.Timeline), "profile after resolve captured: top alloc_space") {
		t.Errorf("timeline %+v", inc.Timeline)
	}
	if ticket, _ := p.st.Incident(store.IncidentID(&store.Alert{Fingerprint: fingerprint("ticket"), StartsAt: start})); ticket.Profile == nil || ticket.After == nil || ticket.After.Error != "" {
		t.Errorf("the ticket's profiles: %+v at firing, %+v after: want both", ticket.Profile, ticket.After)
	}

	resp, err := http.Get(p.Srv.URL + "/api/incidents/" + id)
	if err != nil {
		t.Fatal(err)
	}
	var got incident.Incident
	json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if got.URL != "http://pager.example:5001/incidents/"+id || got.After == nil || got.BurnRate != "10.2x" {
		t.Errorf("API: url %q, after %+v, burn rate %q", got.URL, got.After, got.BurnRate)
	}

	p.st.Close()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if again, _ := st.Incident(id); again.After == nil || again.After.File != inc.After.File || !again.After.TakenAt.Equal(inc.After.TakenAt) {
		t.Fatalf("after a restart: %+v", again.After)
	}
}
