package web

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"burnlab/pager/internal/store"
	"burnlab/shared/incident"
	"burnlab/shared/pproftop"
	"burnlab/shared/pproftop/pproftoptest"
)

type ui struct {
	t   *testing.T
	st  *store.Store
	h   *Handler
	srv *httptest.Server
}

func newUI(t *testing.T, maxViews int) *ui {
	t.Helper()
	return newUIWith(t, Config{MaxViews: maxViews})
}

// newUIWith is a UI of cfg, with a store of its own.
func newUIWith(t *testing.T, cfg Config) *ui {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store, cfg.Log = st, zerolog.New(io.Discard)
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); st.Close() })
	return &ui{t: t, st: st, h: h, srv: srv}
}

// page stores a firing page for fp with extra labels, and returns its id.
func (u *ui) page(fp string, start time.Time, labels map[string]string) string {
	u.t.Helper()
	l := map[string]string{"alertname": "LLMGatewayStreamLatencyBudgetBurn", "severity": "page", "sloth_slo": "stream-latency"}
	for k, v := range labels {
		l[k] = v
	}
	a := store.Alert{Status: "firing", Labels: l, Annotations: map[string]string{"burn_rate": "9.9x", "summary": "burning <b>fast</b>"},
		StartsAt: start, Fingerprint: fp}
	acc, err := u.st.AddNotification("pager-page", "page", []store.Alert{a}, start)
	if err != nil || len(acc) != 1 {
		u.t.Fatalf("%v %v", acc, err)
	}
	return acc[0].Incident
}

func (u *ui) resolve(id, fp string, start time.Time) {
	u.t.Helper()
	inc, _ := u.st.Incident(id)
	a := store.Alert{Status: "resolved", Labels: inc.Labels, Annotations: inc.Annotations, StartsAt: start, EndsAt: start.Add(3 * time.Minute), Fingerprint: fp}
	if _, err := u.st.AddNotification("pager-page", "page", []store.Alert{a}, start.Add(3*time.Minute)); err != nil {
		u.t.Fatal(err)
	}
}

// profile stores raw as the incident's page-time (or after) profile, the
// way the webhook does.
func (u *ui) profile(id, name string, raw []byte, after bool) {
	u.t.Helper()
	if err := u.st.SaveProfile(name, raw); err != nil {
		u.t.Fatal(err)
	}
	_, prof, err := pproftop.Read(bytes.NewReader(raw), pproftop.MaxBytes)
	if err != nil {
		u.t.Fatal(err)
	}
	top, total, err := pproftop.Top(prof, "alloc_space", 5)
	if err != nil {
		u.t.Fatal(err)
	}
	p := incident.Profile{File: store.ProfilesDir + "/" + name, Total: total, TakenAt: time.Now()}
	for _, e := range top {
		p.Top = append(p.Top, incident.TopEntry{Function: e.Function, Flat: e.Flat, FlatPct: e.FlatPct})
	}
	add := u.st.AddProfile
	if after {
		add = u.st.AddAfterProfile
	}
	if err := add(id, p, time.Now()); err != nil {
		u.t.Fatal(err)
	}
}

func (u *ui) do(method, path string) (int, http.Header, string) {
	u.t.Helper()
	req, _ := http.NewRequest(method, u.srv.URL+path, nil)
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		u.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func (u *ui) get(path string, want int) string {
	u.t.Helper()
	status, _, body := u.do(http.MethodGet, path)
	if status != want {
		u.t.Fatalf("GET %s: %d, want %d: %.300s", path, status, want, body)
	}
	return body
}

const (
	fp1 = "0123456789abcdef"
	fp2 = "fedcba9876543210"
	fp3 = "00000000000000aa"
)

// What came in a payload is text on every page: a label or annotation with
// markup never becomes markup, and the pager's own pages have no script at
// all, so any "<script" would be one smuggled in.
func TestPayloadsAreEscaped(t *testing.T) {
	u := newUI(t, 0)
	start := time.Now().Add(-time.Minute)
	id := u.page(fp1, start, map[string]string{"team": `<script>alert("x")</script>`, "alertname": `Burn<img src=x onerror=alert(1)>`})
	for _, path := range []string{"/", "/incidents/" + id} {
		body := u.get(path, 200)
		for _, bad := range []string{"<script", "<img", "<b>fast"} {
			if strings.Contains(body, bad) {
				t.Errorf("GET %s: %q is markup:\n%s", path, bad, body)
			}
		}
		if !strings.Contains(body, "&lt;script&gt;") && path != "/" {
			t.Errorf("GET %s: the label is not shown escaped", path)
		}
		if !strings.Contains(body, "Burn&lt;img") {
			t.Errorf("GET %s: the alert name is not shown escaped", path)
		}
	}
}

func TestIndexListsNewestFirstAndRefreshesWhileFiring(t *testing.T) {
	u := newUI(t, 0)
	if body := u.get("/", 200); !strings.Contains(body, "Nothing has paged yet") || strings.Contains(body, "http-equiv=\"refresh\"") {
		t.Fatalf("empty index:\n%s", body)
	}
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	older := u.page(fp1, t0, nil)
	newer := u.page(fp2, t0.Add(time.Minute), nil)
	u.profile(newer, "newer.pb.gz", pproftoptest.HeapProfile(t), false)
	body := u.get("/", 200)
	if i, j := strings.Index(body, newer), strings.Index(body, older); i < 0 || j < 0 || i > j {
		t.Errorf("newest first: %d %d", i, j)
	}
	for _, want := range []string{`http-equiv="refresh"`, pproftoptest.Allocator, "9.9x", "firing", "stream-latency"} {
		if !strings.Contains(body, want) {
			t.Errorf("index lacks %q:\n%s", want, body)
		}
	}
	u.resolve(older, fp1, t0)
	u.resolve(newer, fp2, t0.Add(time.Minute))
	if body := u.get("/", 200); strings.Contains(body, "http-equiv=\"refresh\"") || strings.Count(body, `class="state resolved"`) != 2 {
		t.Errorf("nothing firing, yet:\n%s", body)
	}
}

func TestUnknownAndMissingAre404(t *testing.T) {
	u := newUI(t, 0)
	id := u.page(fp1, time.Now(), nil)
	for _, path := range []string{
		"/incidents/nope", "/incidents/nope/pprof/", "/incidents/nope/diff/top",
		"/incidents/" + id + "/pprof/flamegraph", // no profile yet
		"/nosuchpage", "/slo/no-such-slo",
	} {
		u.get(path, 404)
	}
	u.profile(id, "p.pb.gz", pproftoptest.HeapProfile(t), false)
	for _, path := range []string{
		"/incidents/" + id + "/diff/flamegraph",    // not resolved, no after profile
		"/incidents/" + id + "/pprof/saveconfig",   // would write pprof's settings
		"/incidents/" + id + "/pprof/deleteconfig", // likewise
		"/incidents/" + id + "/pprof/disasm",       // would run objdump
	} {
		u.get(path, 404)
	}
}

// No route writes: every method but GET (and HEAD) is refused.
func TestOnlyGET(t *testing.T) {
	u := newUI(t, 0)
	id := u.page(fp1, time.Now(), nil)
	u.profile(id, "p.pb.gz", pproftoptest.HeapProfile(t), false)
	for _, path := range []string{"/", "/incidents/" + id, "/incidents/" + id + "/pprof/top", "/incidents/" + id + "/pprof/saveconfig", "/slo/stream-latency", "/anything"} {
		for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
			status, hdr, _ := u.do(m, path)
			if status != http.StatusMethodNotAllowed || !strings.Contains(hdr.Get("Allow"), "GET") {
				t.Errorf("%s %s: %d, Allow %q", m, path, status, hdr.Get("Allow"))
			}
		}
		if status, _, _ := u.do(http.MethodHead, path); status != 200 && status != 302 && status != 404 {
			t.Errorf("HEAD %s: %d", path, status)
		}
	}
}

// The incident's profile in pprof's own web UI, opened on alloc_space, and
// once resolved the difference to the profile taken after.
func TestPProfViewsAndTheDiff(t *testing.T) {
	u := newUI(t, 0)
	start := time.Now().Add(-5 * time.Minute).Truncate(time.Second)
	id := u.page(fp1, start, nil)
	u.profile(id, "page.pb.gz", pproftoptest.HeapProfile(t), false)

	page := u.get("/incidents/"+id, 200)
	for _, want := range []string{"/incidents/" + id + "/pprof/flamegraph?si=alloc_space", pproftoptest.Allocator, "When the page resolves"} {
		if !strings.Contains(page, want) {
			t.Errorf("incident page lacks %q", want)
		}
	}
	if status, hdr, _ := u.do(http.MethodGet, "/incidents/"+id+"/pprof/"); status != http.StatusMovedPermanently || hdr.Get("Location") != "flamegraph" {
		t.Errorf("pprof's root: %d to %q, want its relative redirect to the flame graph", status, hdr.Get("Location"))
	}
	top := u.get("/incidents/"+id+"/pprof/top", 200)
	if !strings.Contains(top, pproftoptest.Allocator) || !strings.Contains(top, "alloc_space") {
		t.Errorf("pprof top (default sample index) lacks the allocating function or alloc_space:\n%.2000s", top)
	}
	if fg := u.get("/incidents/"+id+"/pprof/flamegraph?si=alloc_space", 200); !strings.Contains(fg, "stackViewer(") || !strings.Contains(fg, pproftoptest.Allocator) {
		t.Errorf("pprof flame graph:\n%.2000s", fg)
	}

	u.resolve(id, fp1, start)
	u.profile(id, "after.pb.gz", pproftoptest.IdleProfile(t), true)
	page = u.get("/incidents/"+id, 200)
	for _, want := range []string{"-diff_base", "/incidents/" + id + "/diff/flamegraph?si=alloc_space", "after the incident resolved"} {
		if !strings.Contains(page, want) {
			t.Errorf("resolved incident page lacks %q", want)
		}
	}
	diff := u.get("/incidents/"+id+"/diff/top?si=alloc_space", 200)
	if !strings.Contains(diff, pproftoptest.Allocator) {
		t.Errorf("diff top:\n%.2000s", diff)
	}
	// -diff_base, not -base: percentages are of the page-time profile's
	// total, so "the function's share went from 99% to 0" reads as such.
	inc, _ := u.st.Incident(id)
	m := regexp.MustCompile(`of (-?[0-9.]+)(B|kB|MB|GB) total`).FindStringSubmatch(diff)
	if m == nil {
		t.Fatalf("no total in the diff's legend:\n%.3000s", diff)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	v *= map[string]float64{"B": 1, "kB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30}[m[2]]
	if base := float64(inc.Profile.Total); v < 0.99*base || v > 1.01*base {
		t.Errorf("the diff's percentages are of %s%s, want the page-time total %d bytes", m[1], m[2], inc.Profile.Total)
	}
}

// Built pprof UIs are kept, but only so many: each holds a parsed profile.
func TestViewCacheIsBounded(t *testing.T) {
	u := newUI(t, 2)
	raw := pproftoptest.HeapProfile(t)
	var ids []string
	for i, fp := range []string{fp1, fp2, fp3} {
		id := u.page(fp, time.Now().Add(time.Duration(i)*time.Second), nil)
		u.profile(id, fmt.Sprintf("p%d.pb.gz", i), raw, false)
		ids = append(ids, id)
	}
	for _, id := range ids {
		u.get("/incidents/"+id+"/pprof/top", 200)
		u.get("/incidents/"+id+"/pprof/top", 200)
	}
	if n, b := u.h.views.len(), u.h.views.builds.Load(); n != 2 || b != 3 {
		t.Fatalf("%d views kept after %d builds, want 2 after 3", n, b)
	}
	u.get("/incidents/"+ids[2]+"/pprof/flamegraph", 200) // kept
	u.get("/incidents/"+ids[0]+"/pprof/top", 200)        // evicted: built again
	if n, b := u.h.views.len(), u.h.views.builds.Load(); n != 2 || b != 4 {
		t.Fatalf("%d views kept after %d builds, want 2 after 4", n, b)
	}
}

// A profile file the journal names but that is gone is an error page, not
// a crash, and is tried again on the next request.
func TestAMissingProfileFileIsAnErrorPage(t *testing.T) {
	u := newUI(t, 0)
	id := u.page(fp1, time.Now(), nil)
	u.profile(id, "gone.pb.gz", pproftoptest.HeapProfile(t), false)
	if err := os.Remove(filepath.Join(u.st.Dir(), store.ProfilesDir, "gone.pb.gz")); err != nil {
		t.Fatal(err)
	}
	u.get("/incidents/"+id+"/pprof/top", 500)
	if u.h.views.len() != 0 {
		t.Error("a failed build was kept")
	}
}

// The link in the page alert's annotations names the SLO; it leads to the
// SLO's newest page, not a newer ticket of it.
func TestSLOLinkLeadsToTheNewestPage(t *testing.T) {
	u := newUI(t, 0)
	t0 := time.Now().Add(-time.Hour)
	u.page(fp1, t0, nil)
	newest := u.page(fp2, t0.Add(time.Minute), nil)
	u.page(fp3, t0.Add(2*time.Minute), map[string]string{"severity": "ticket"})
	u.page("00000000000000bb", t0.Add(3*time.Minute), map[string]string{"sloth_slo": "ttft"})
	status, hdr, _ := u.do(http.MethodGet, "/slo/stream-latency")
	if status != http.StatusFound || hdr.Get("Location") != "/incidents/"+newest {
		t.Fatalf("%d to %q, want /incidents/%s", status, hdr.Get("Location"), newest)
	}
}

// Pages within one capture window share one profile file; each of their
// pages says so.
func TestASharedProfileSaysWithHowMany(t *testing.T) {
	u := newUI(t, 0)
	start := time.Now().Add(-time.Minute).Truncate(time.Second)
	raw := pproftoptest.HeapProfile(t)
	a, b, c := u.page(fp1, start, nil), u.page(fp2, start, nil), u.page(fp3, start, nil)
	u.profile(a, "shared.pb.gz", raw, false)
	u.profile(b, "shared.pb.gz", raw, false)
	u.profile(c, "own.pb.gz", raw, false)
	for _, id := range []string{a, b} {
		if page := u.get("/incidents/"+id, 200); !strings.Contains(page, "Profile shared with 2 incidents") {
			t.Errorf("incident %s shares its profile, its page does not say so:\n%s", id, page)
		}
	}
	if page := u.get("/incidents/"+c, 200); strings.Contains(page, "shared with") {
		t.Errorf("incident %s has a profile of its own, its page says shared", c)
	}
}

// The list is pages of store.PageSize incidents, newest first, with
// filters: a page's size does not grow with the history, bad queries are a
// 400 saying why, and the links carry the filters on.
func TestIndexIsPagedAndFiltered(t *testing.T) {
	u := newUI(t, 0)
	t0 := time.Now().Add(-24 * time.Hour).Truncate(time.Second)
	add := func(from, to int) {
		for i := from; i < to; i++ {
			labels := map[string]string{}
			if i%4 == 0 {
				labels["sloth_slo"] = "ttft"
			}
			fp := fmt.Sprintf("%016x", i)
			id := u.page(fp, t0.Add(time.Duration(i)*time.Second), labels)
			if i%2 == 0 {
				u.resolve(id, fp, t0.Add(time.Duration(i)*time.Second))
			}
		}
	}
	rows := regexp.MustCompile(`<tr class="incident" id="incident-([0-9a-f]+)-`)
	add(0, 120)
	first := u.get("/", 200)
	if m := rows.FindAllStringSubmatch(first, -1); len(m) != store.PageSize || m[0][1] != fmt.Sprintf("%016x", 119) {
		t.Fatalf("first page: %d rows, want %d from the newest", len(m), store.PageSize)
	}
	if !strings.Contains(first, "page 1 of 3") || !strings.Contains(first, `href="/?page=2"`) || strings.Contains(first, `id="newer"`) {
		t.Errorf("first page's paging:\n%s", first)
	}
	last := u.get("/?page=3", 200)
	if m := rows.FindAllStringSubmatch(last, -1); len(m) != 20 || m[19][1] != fmt.Sprintf("%016x", 0) || !strings.Contains(last, `href="/?page=2"`) {
		t.Errorf("last page: %d rows", len(m))
	}
	add(120, 1200)
	if again := u.get("/", 200); len(again) > len(first)+len(first)/10 {
		t.Errorf("GET / is %d bytes with 1,200 incidents, %d with 120", len(again), len(first))
	}

	firing := u.get("/?status=firing&slo=stream-latency", 200)
	m := rows.FindAllStringSubmatch(firing, -1)
	if len(m) != store.PageSize || !strings.Contains(firing, "600 incidents match") || !strings.Contains(firing, `href="/?page=2&amp;slo=stream-latency&amp;status=firing"`) {
		t.Errorf("firing stream-latency: %d rows:\n%.3000s", len(m), firing)
	}
	for _, r := range m {
		var i int
		fmt.Sscanf(r[1], "%x", &i)
		if i%2 == 0 {
			t.Errorf("incident %d is not a firing stream-latency one", i)
		}
	}
	if none := u.get("/?severity=ticket", 200); !strings.Contains(none, "No incident matches") {
		t.Errorf("no ticket, yet:\n%s", none)
	}
	for q, want := range map[string]string{
		"page=25":       "past the last, 24",
		"page=0":        "from 1",
		"page=x":        "whole number",
		"status=asleep": "firing or resolved",
		"page=1&page=1": "once",
	} {
		if body := u.get("/?"+q, 400); !strings.Contains(body, want) {
			t.Errorf("?%s: want a 400 saying %q:\n%s", q, want, body)
		}
	}
}

// A profile merged from several processes names its rule and shows each
// process's own top, and why one that failed has none; so does a capture
// that failed on every process.
func TestAMergedProfileShowsEachProcess(t *testing.T) {
	u := newUI(t, 0)
	start := time.Now().Add(-time.Minute).Truncate(time.Second)
	a, b := u.page(fp1, start, nil), u.page(fp2, start, nil)
	merged := incident.Profile{Rule: "provider", Total: 2048, TakenAt: time.Now(),
		Top: []incident.TopEntry{{Function: "provider.render", Flat: 2048, FlatPct: 100}},
		Instances: []incident.InstanceProfile{
			{Instance: "provider-0", URL: "http://10.0.0.1:6061/debug/pprof/allocs", Total: 2048, Top: []incident.TopEntry{{Function: "provider.render", Flat: 2048, FlatPct: 100}}},
			{Instance: "provider-1", URL: "http://10.0.0.2:6061/debug/pprof/allocs", Error: "fetching http://10.0.0.2:6061/debug/pprof/allocs: 404 Not Found"},
		}}
	if err := u.st.AddProfile(a, merged, time.Now()); err != nil {
		t.Fatal(err)
	}
	failed := incident.Profile{Rule: "provider", Error: "no process's profile came", TakenAt: time.Now(), Instances: merged.Instances[1:]}
	if err := u.st.AddProfile(b, failed, time.Now()); err != nil {
		t.Fatal(err)
	}
	page := u.get("/incidents/"+a, 200)
	for _, want := range []string{"the 2 processes of the pager config's rule <code>provider</code>, merged", "<code>provider-0</code>",
		"Not profiled: fetching http://10.0.0.2:6061/debug/pprof/allocs: 404 Not Found"} {
		if !strings.Contains(page, want) {
			t.Errorf("the merged profile's page does not say %q", want)
		}
	}
	if page := u.get("/incidents/"+b, 200); !strings.Contains(page, "The capture failed: no process&#39;s profile came") || !strings.Contains(page, "<code>provider-1</code>") {
		t.Errorf("a capture failed on every process does not name them:\n%s", page)
	}
}

// The kinds a rule takes beside the heap each get their top, a pprof UI
// and a download; one that was not taken says why.
func TestAnIncidentShowsEachKindOfProfile(t *testing.T) {
	u := newUI(t, 0)
	start := time.Now().Add(-time.Minute).Truncate(time.Second)
	id := u.page(fp1, start, nil)
	raw := pproftoptest.HeapProfile(t)
	u.profile(id, "page.pb.gz", raw, false)
	if err := u.st.SaveProfile("page-cpu.pb.gz", raw); err != nil {
		t.Fatal(err)
	}
	inc, _ := u.st.Incident(id)
	p := *inc.Profile
	p.Kinds = []incident.KindProfile{
		{Kind: "cpu", SampleType: "cpu", File: store.ProfilesDir + "/page-cpu.pb.gz", Total: 1500000000,
			Top: []incident.TopEntry{{Function: "main.spin", Flat: 1500000000, FlatPct: 100}}},
		{Kind: "mutex", SampleType: "delay", Error: "fetching http://svc/debug/pprof/mutex: 404 Not Found"},
	}
	if err := u.st.AddProfile(id, p, time.Now()); err != nil {
		t.Fatal(err)
	}
	page := u.get("/incidents/"+id, 200)
	for _, want := range []string{"The cpu profile", "<strong>1.5s</strong> of <code>cpu</code>", "main.spin",
		`href="/incidents/` + id + `/cpu/flamegraph"`, "The mutex profile", "Not taken: fetching http://svc/debug/pprof/mutex: 404 Not Found"} {
		if !strings.Contains(page, want) {
			t.Errorf("the incident's page does not say %q", want)
		}
	}
	u.get("/incidents/"+id+"/cpu/top", 200)
	u.get("/incidents/"+id+"/mutex/top", 404)
	if b := u.get("/api/incidents/"+id+"/profile/cpu", 200); b != string(raw) {
		t.Errorf("the cpu profile's download: %d bytes, want its %d", len(b), len(raw))
	}
	u.get("/api/incidents/"+id+"/profile/mutex", 404)
}
