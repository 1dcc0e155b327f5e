package web

import (
	"strings"
	"testing"
	"time"

	"burnlab/pager/internal/store"
	"burnlab/shared/incident"
	"burnlab/shared/pproftop/pproftoptest"
)

// The page shows the flight recorder's snapshot: its size and window, a
// link to it for go tool trace, its slowest requests' split, and, beside
// each of the slowest requests the exemplars name, its split when the
// snapshot holds it or why not. Request IDs from the gateway are text.
func TestTheIncidentPageSplitsTheSlowRequestsTime(t *testing.T) {
	u := newUI(t, 0)
	start := time.Now().Add(-3 * time.Minute).UTC().Truncate(time.Second)
	id := u.burnPage(fp1, start, false)
	if err := u.st.SaveProfile("page.pb.gz", pproftoptest.HeapProfile(t)); err != nil {
		t.Fatal(err)
	}
	tr := &incident.Trace{File: store.ProfilesDir + "/page.trace", Bytes: 3 << 20, FetchSeconds: 0.25,
		From: start.Add(-90 * time.Second), To: start.Add(-80 * time.Second),
		Requests: []incident.RequestTime{
			{RequestID: "req-2", Seconds: 1.5, Began: true, Ended: true, Running: 0.6, Assist: 0.45, Runnable: 0.3, Network: 0.15},
			{RequestID: "req-other-" + hostile, Seconds: 0.5, Ended: true, Running: 0.5},
		}}
	if err := u.st.AddProfile(id, incident.Profile{File: store.ProfilesDir + "/page.pb.gz", Total: 1, TakenAt: start, Trace: tr}, start); err != nil {
		t.Fatal(err)
	}
	body := u.get("/incidents/"+id, 200)
	for _, want := range []string{
		`id="trace"`, "3.00 MiB", "10.0 s", `href="/incidents/` + id + `/trace"`, "go tool trace",
		"1.500 s = 40 % running, 30 % mark assist, 20 % waiting for a CPU, 10 % network, 0 % other", // req-2 in the slowest table
		"not among the snapshot&#39;s slowest",                                                      // the other exemplar, after the snapshot's start
		"<td class=\"num\">30 %</td>", "began before the snapshot",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the incident page lacks %q", want)
		}
	}
	if strings.Contains(body, "<script") {
		t.Error("a request ID from the trace is markup on the page")
	}
	if i, j := strings.Index(body, `id="gc"`), strings.Index(body, `id="trace"`); i < 0 || j < i {
		t.Errorf("the split comes after the GC's share (at %d, %d)", i, j)
	}

	// A page with no snapshot says why.
	other := u.burnPage(fp2, start, false)
	u.profile(other, "other.pb.gz", pproftoptest.HeapProfile(t), false)
	if page := u.get("/incidents/"+other, 200); !strings.Contains(page, "the pager runs without <code>-trace-url</code>") {
		t.Error("a page without a snapshot does not say why")
	}
}

// Once the page resolved, the GC section says the share after it; while it
// fires, that it will.
func TestTheIncidentPageShowsTheGCAfterTheResolve(t *testing.T) {
	u := newUI(t, 0)
	start := time.Now().Add(-3 * time.Minute).UTC().Truncate(time.Second)
	id := u.burnPage(fp1, start, false)
	if page := u.get("/incidents/"+id, 200); !strings.Contains(page, "When the page resolves the pager reads the share again") {
		t.Error("a firing page does not say the share is read again at the resolve")
	}
	share := 0.06
	g := incident.GCAfter{Job: "gateway", From: start, To: start.Add(time.Minute), CPUShare: &share, Words: "after the resolve GC took 6% of gateway's CPU, mark assist 0%"}
	if err := u.st.AddGCAfter(id, g, start.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if page := u.get("/incidents/"+id, 200); !strings.Contains(page, `id="gc-after"`) || !strings.Contains(page, "after the resolve GC took 6% of gateway&#39;s CPU") {
		t.Error("the page does not show the GC after the resolve")
	}
}
