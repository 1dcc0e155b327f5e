package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"burnlab/pager/internal/alerttest"
	"burnlab/pager/internal/pagertest"
	"burnlab/pager/internal/webhook"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"burnlab/pager/internal/store"
	"burnlab/shared/incident"
	"burnlab/shared/pproftop/pproftoptest"
	"burnlab/shared/syncbuf"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pager is the pager's chain (pagertest): this receiver, whose Sink is
// the real lifecycle, and the web UI with the API.
type pager struct {
	*pagertest.Pager
	st   *store.Store
	logs *syncbuf.Buffer
	dir  string
}

func newPager(t *testing.T, profileURL, token string) *pager {
	t.Helper()
	return newPagerIn(t, t.TempDir(), profileURL, token)
}

// newPagerIn is a pager whose data directory is dir, profiling
// profileURL and taking token.
func newPagerIn(t *testing.T, dir, profileURL, token string) *pager {
	t.Helper()
	p := pagertest.New(t, dir, profileURL, token)
	return &pager{Pager: p, st: p.Store, logs: p.Logs, dir: dir}
}

func (p *pager) post(t *testing.T, path, body string, hdr ...string) (int, string) {
	t.Helper()
	return p.Post(t, path, body, hdr...)
}

// notifications is pager_notifications_total of a severity and status.
func (p *pager) notifications(t *testing.T, severity, status string) float64 {
	t.Helper()
	return p.Counter(t, "pager_notifications_total", map[string]string{"severity": severity, "status": status})
}

var (
	alert        = alerttest.Alert
	fingerprint  = alerttest.Fingerprint
	with         = alerttest.With
	notification = alerttest.Notification
	slothAlert   = alerttest.SlothAlert
	group        = alerttest.Group
)

func TestRejectsBadPayloadsWithClearErrors(t *testing.T) {
	p := newPager(t, "", "")
	start := time.Now()
	cases := []struct {
		body   string
		status int
		want   string
	}{
		{`{"version":`, 400, "not JSON"},
		{`{"version":"3","alerts":[]}`, 400, "version"},
		{`{"version":"4","alerts":[]}`, 400, "no alerts"},
		{notification(with(alert("firing", "page", start), "fingerprint", "")), 400, "fingerprint"},
		{notification(with(alert("firing", "page", start), "status", "weird")), 400, "status"},
		{`{"version":"4","alerts":[{"status":"firing","fingerprint":"0123456789abcdef","labels":{"alertname":"A"}}]}`, 400, "startsAt"},
	}
	for _, c := range cases {
		status, body := p.post(t, "/webhook/page", c.body)
		if status != c.status || !strings.Contains(body, c.want) {
			t.Errorf("%.60s: %d %s, want %d %q", c.body, status, body, c.status, c.want)
		}
	}
	resp, _ := http.Get(p.Srv.URL + "/webhook/page")
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("GET: %d", resp.StatusCode)
	}
	if len(all(p.st)) != 0 {
		t.Error("a rejected payload was stored")
	}
}

// cutShort is a request body that fails after its first bytes, as one
// the server's read timeout or a reset cuts midway does.
type cutShort struct{ r io.Reader }

func (c *cutShort) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	if err == io.EOF {
		return n, errors.New("read tcp: i/o timeout")
	}
	return n, err
}

// A payload whose read fails midway is not known to be bad: a 503, which
// Alertmanager retries, not a 4xx, which it drops with the whole group.
func TestAPayloadCutShortIsRetried(t *testing.T) {
	p := newPager(t, "", "")
	body := notification(alert("firing", "page", time.Now()))
	req := httptest.NewRequest(http.MethodPost, "/webhook/page", &cutShort{strings.NewReader(body[:len(body)/2])})
	rec := httptest.NewRecorder()
	p.Srv.Config.Handler.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("a payload cut short: %d %s, want 503", rec.Code, rec.Body)
	}
	if n := len(all(p.st)); n != 0 {
		t.Errorf("%d incidents stored from a payload cut short", n)
	}
}

// An alert without an alertname label, which Alertmanager routes like any
// other, is stored under store.NoAlertName with the rest of its group,
// not refused with it.
func TestAnAlertWithoutAlertnameKeepsItsGroup(t *testing.T) {
	p := newPager(t, "", "")
	start := time.Now().UTC().Truncate(time.Second)
	nameless := with(alert("firing", "nameless", start), "labels", map[string]string{"severity": "page"})
	status, body := p.post(t, "/webhook/page", notification(alert("firing", "page", start), nameless, alert("firing", "ticket", start)))
	if status != 200 || !strings.Contains(body, `"accepted":3`) {
		t.Fatalf("a group with an alert without alertname: %d %s, want all 3 accepted", status, body)
	}
	if n := len(all(p.st)); n != 3 {
		t.Errorf("%d incidents stored, want 3", n)
	}
	a := store.Alert{Fingerprint: fingerprint("nameless"), StartsAt: start}
	if inc, ok := p.st.Incident(store.IncidentID(&a)); !ok || inc.AlertName != store.NoAlertName {
		t.Errorf("the alert without alertname: %+v %v, want it named %q", inc, ok, store.NoAlertName)
	}
}

func TestBearerToken(t *testing.T) {
	p := newPager(t, "", "s3cret")
	body := notification(alert("firing", "ticket", time.Now()))
	if status, _ := p.post(t, "/webhook/ticket", body); status != 401 {
		t.Fatalf("no token: %d", status)
	}
	if status, _ := p.post(t, "/webhook/ticket", body, "Authorization", "Bearer wrong"); status != 401 {
		t.Fatalf("wrong token: %d", status)
	}
	if status, _ := p.post(t, "/webhook/ticket", body, "Authorization", "Basic s3cret"); status != 401 {
		t.Fatalf("another scheme: %d", status)
	}
	// The scheme is case-insensitive (RFC 9110 §11.1), and Alertmanager
	// sends authorization.type as configured: type: bearer must not lose
	// every page to a 401, which Alertmanager does not retry.
	for _, auth := range []string{"Bearer s3cret", "bearer s3cret", "BEARER s3cret", "Bearer  s3cret"} {
		if status, _ := p.post(t, "/webhook/ticket", body, "Authorization", auth); status != 200 {
			t.Fatalf("%q: %d", auth, status)
		}
	}
}

func TestRetriesAreDeduplicatedAndTheTimelineKept(t *testing.T) {
	p := newPager(t, "", "")
	start := time.Now().Add(-time.Minute).UTC()
	for range 3 { // Alertmanager's retries and group_interval repeats
		if status, body := p.post(t, "/webhook/page", notification(alert("firing", "page", start))); status != 200 {
			t.Fatalf("%d %s", status, body)
		}
	}
	p.post(t, "/webhook/page", notification(alert("resolved", "page", start)))
	p.post(t, "/webhook/page", notification(alert("resolved", "page", start)))
	incs := all(p.st)
	if len(incs) != 1 || len(incs[0].Timeline) != 2 || incs[0].Status != "resolved" || incs[0].EndsAt == nil {
		t.Fatalf("incidents %+v", incs)
	}
	if got := p.Counter(t, "pager_duplicate_notifications_total", map[string]string{}); got != 3 {
		t.Errorf("duplicates = %v, want 3", got)
	}
	if got := p.notifications(t, "page", "firing"); got != 1 {
		t.Errorf("pager_notifications_total{page,firing} = %v", got)
	}
	logs := p.logs.String()
	if strings.Count(logs, `"message":"PAGE"`) != 1 || strings.Count(logs, `"message":"RESOLVED"`) != 1 ||
		!strings.Contains(logs, `"burn_rate":"10.2x"`) || !strings.Contains(logs, `"slo":"stream-latency"`) {
		t.Errorf("one PAGE and one RESOLVED line with burn rate and SLO, got:\n%s", logs)
	}
	resp, _ := http.Get(p.Srv.URL + "/api/incidents")
	var api []incident.Incident
	json.NewDecoder(resp.Body).Decode(&api)
	resp.Body.Close()
	if len(api) != 1 || api[0].SLO != "stream-latency" || api[0].Severity != "page" {
		t.Fatalf("/api/incidents: %+v", api)
	}
}

// Alertmanager's fingerprints are 16 lowercase hex digits; anything else is
// refused, with the alert it is in and what is wanted.
func TestRejectsFingerprintsThatAreNotAlertmanagers(t *testing.T) {
	p := newPager(t, "", "")
	start := time.Now().UTC()
	for _, fp := range []string{"../../../escaped", "abc123page", "0123456789ABCDEF", "0123456789abcde", "0123456789abcdef0",
		"0123456789abcdeg", "/etc/passwd", "0123456789abcd\x00f", "０１２３４５６７８９ａｂｃｄｅｆ", "0123456789abcd/f", " 123456789abcdef"} {
		body := notification(alert("firing", "page", start), with(alert("firing", "ticket", start), "fingerprint", fp))
		status, resp := p.post(t, "/webhook/page", body)
		if status != 400 || !strings.Contains(resp, "alert 1") || !strings.Contains(resp, "16 lowercase hex digits") {
			t.Errorf("fingerprint %q: %d %s, want 400 naming alert 1 and 16 lowercase hex digits", fp, status, resp)
		}
	}
	if n := len(all(p.st)); n != 0 {
		t.Errorf("%d incidents stored from refused payloads", n)
	}
}

// outside lists the files under base that are not under data.
func outside(t *testing.T, base, data string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(base, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == data {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			out = append(out, path)
		}
		return nil
	})
	return out
}

// A page whose fingerprint is a path must not make the pager write its
// profile there.
func TestAFingerprintCannotPlaceAProfileOutsideTheDataDir(t *testing.T) {
	base := t.TempDir()
	data := filepath.Join(base, "a", "b", "c", "data")
	p := newPagerIn(t, data, pproftoptest.Server(t), "")
	status, resp := p.post(t, "/webhook/page", notification(with(alert("firing", "page", time.Now().UTC()), "fingerprint", "../../../escaped")))
	p.Lifecycle.Close(context.Background())
	if status != 400 || !strings.Contains(resp, "alert 0") || !strings.Contains(resp, "16 lowercase hex digits") {
		t.Errorf("fingerprint ../../../escaped: %d %s", status, resp)
	}
	if files := outside(t, base, data); len(files) > 0 {
		t.Errorf("files written outside the data dir: %q", files)
	}
}

// Even a journal edited by hand cannot make the pager serve a file from
// outside its profiles directory.
func TestProfilesAreServedOnlyFromTheProfilesDir(t *testing.T) {
	base := t.TempDir()
	data := filepath.Join(base, "data")
	const secret = "root:x:0:0:secret"
	if err := os.WriteFile(filepath.Join(base, "secret"), []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(data, "profiles"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(base, "secret"), filepath.Join(data, "profiles", "link.pb.gz")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "profiles", "good.pb.gz"), []byte("pprof bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{ // incident fingerprint → profile.file
		"0000000000000001": "../secret",
		"0000000000000002": "profiles/../../secret",
		"0000000000000003": filepath.Join(base, "secret"),
		"0000000000000004": "profiles/link.pb.gz",
		"0000000000000005": "notifications.jsonl",
		"0000000000000006": "profiles/",
		"0000000000000007": "profiles/good.pb.gz",
	}
	start := time.Date(2026, 12, 1, 3, 12, 0, 0, time.UTC)
	var journal bytes.Buffer
	for fp, file := range files {
		a := store.Alert{Status: "firing", Fingerprint: fp, StartsAt: start, Labels: map[string]string{"alertname": "A", "severity": "page"}}
		for _, r := range []store.Record{
			{Type: "notification", At: start, Receiver: "pager-page", Alert: &a},
			{Type: "profile", At: start, Incident: store.IncidentID(&a), Profile: &incident.Profile{File: file}},
		} {
			line, _ := json.Marshal(r)
			journal.Write(append(line, '\n'))
		}
	}
	if err := os.WriteFile(filepath.Join(data, "notifications.jsonl"), journal.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	p := newPagerIn(t, data, "", "")
	for fp, file := range files {
		resp, err := http.Get(p.Srv.URL + "/api/incidents/" + fp + "-" + fmt.Sprint(start.Unix()) + "/profile")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if file == "profiles/good.pb.gz" {
			if resp.StatusCode != 200 || string(b) != "pprof bytes" {
				t.Errorf("profile.file %q: %d %.60q, want the profile", file, resp.StatusCode, b)
			}
			continue
		}
		if resp.StatusCode/100 != 4 || strings.Contains(string(b), secret) || strings.Contains(string(b), "notification") {
			t.Errorf("profile.file %q: %d %.60q, want 404 or 400", file, resp.StatusCode, b)
		}
	}
}

// A metric label takes only values the pager knows: a client making up
// severities must not make up series.
func TestSeverityLabelsAreBounded(t *testing.T) {
	p := newPager(t, "", "")
	start := time.Now().UTC()
	for i := range 50 {
		sev := fmt.Sprintf("made-up-%d", i)
		if status, body := p.post(t, "/webhook/ticket", notification(alert("firing", sev, start))); status != 200 {
			t.Fatalf("%s: %d %s", sev, status, body)
		}
	}
	p.post(t, "/webhook/page", notification(alert("firing", "page", start)))
	p.post(t, "/webhook/ticket", notification(alert("resolved", "ticket", start)))
	if n := must(testutil.GatherAndCount(p.Reg, "pager_notifications_total")); n > 6 {
		t.Errorf("pager_notifications_total has %d series, want at most 6 (page, ticket, other × firing, resolved)", n)
	}
	for _, c := range []struct {
		severity, status string
		want             float64
	}{{"other", "firing", 50}, {"page", "firing", 1}, {"ticket", "resolved", 1}, {"ticket", "firing", 0}} {
		if got := p.notifications(t, c.severity, c.status); got != c.want {
			t.Errorf("pager_notifications_total{severity=%q,status=%q} = %v, want %v", c.severity, c.status, got, c.want)
		}
	}
}

// maxAlerts reads max_alerts of each webhook in alertmanager.yml: how many
// alerts one notification of this repo's Alertmanager can carry.
func maxAlerts(t *testing.T) []int {
	t.Helper()
	b, err := os.ReadFile("../../../alertmanager/alertmanager.yml")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, m := range regexp.MustCompile(`(?m)^\s+max_alerts:\s*(\d+)\s*$`).FindAllStringSubmatch(string(b), -1) {
		n, _ := strconv.Atoi(m[1])
		out = append(out, n)
	}
	if len(out) != 2 {
		t.Fatalf("alertmanager.yml has %d max_alerts, want one per webhook (2)", len(out))
	}
	return out
}

// Alertmanager does not retry a 4xx: a group refused as too large is lost,
// every alert of it. The group of 2,000 alerts (2 MB of JSON) and
// the largest group alertmanager.yml lets Alertmanager send are accepted
// whole; a payload past the pager's limit is a 5xx, which Alertmanager
// retries and counts as failed, and is not stored.
func TestALargeGroupIsAcceptedWhole(t *testing.T) {
	limits := maxAlerts(t)
	for _, n := range append([]int{2000}, limits...) {
		if n == 0 {
			t.Fatal("alertmanager.yml's max_alerts is 0 (no limit): a group can outgrow any payload limit")
		}
		p := newPager(t, "", "")
		start := time.Now().UTC().Truncate(time.Second)
		body := group(n, start, 0)
		t.Logf("%d alerts: %d bytes", n, len(body))
		status, resp := p.post(t, "/webhook/page", body)
		if status != 200 || !strings.Contains(resp, fmt.Sprintf(`"accepted":%d`, n)) {
			t.Fatalf("%d alerts (%d bytes): %d %.200s", n, len(body), status, resp)
		}
		for i := range n {
			a := store.Alert{Fingerprint: fingerprint(fmt.Sprint("sloth ", i)), StartsAt: start}
			if _, ok := p.st.Incident(store.IncidentID(&a)); !ok {
				t.Fatalf("%d alerts: alert %d acknowledged and not stored", n, i)
			}
		}
	}

	// What Alertmanager left out past max_alerts is not here: the on-call
	// is told so, and the metric counts it.
	p := newPager(t, "", "")
	cut := strings.Replace(group(3, time.Now().UTC(), 0), `"truncatedAlerts":0`, `"truncatedAlerts":12`, 1)
	if status, resp := p.post(t, "/webhook/page", cut); status != 200 {
		t.Fatalf("truncated group: %d %s", status, resp)
	}
	if got := p.Counter(t, "pager_truncated_alerts_total", map[string]string{}); got != 12 || !strings.Contains(p.logs.String(), `"truncated_alerts":12`) {
		t.Errorf("pager_truncated_alerts_total = %v, logs:\n%s", got, p.logs)
	}

	// Past the limit: a valid payload, too large to take, is the pager's
	// failure, not the sender's.
	p = newPager(t, "", "")
	over := group(limits[0], time.Now().UTC(), int(webhook.DefaultMaxBody)/limits[0])
	status, resp := p.post(t, "/webhook/page", over)
	if status/100 != 5 || !strings.Contains(resp, "max_alerts") {
		t.Errorf("%d bytes: %d %.200s, want a 5xx naming max_alerts", len(over), status, resp)
	}
	if n := len(all(p.st)); n != 0 {
		t.Errorf("%d incidents stored from a payload refused", n)
	}
}

// all is every incident of st, newest first.
func all(st *store.Store) []incident.Incident {
	return st.List(store.Filter{}, 1, math.MaxInt).Incidents
}

// /api/incidents is a JSON array as it was, now of one page of
// store.PageSize incidents, newest first; the Link header names the pages
// beside it, X-Total-Count the incidents the filter takes, and a bad query
// is a 400 saying why.
func TestTheAPIListIsPaged(t *testing.T) {
	p := newPager(t, "", "")
	start := time.Now().UTC().Truncate(time.Second)
	alerts := make([]map[string]any, 120)
	for i := range alerts {
		alerts[i] = slothAlert(i, start.Add(time.Duration(i)*time.Second))
		if i%3 == 0 {
			alerts[i]["labels"].(map[string]string)["severity"] = "ticket"
		}
	}
	if status, body := p.post(t, "/webhook/page", notification(alerts...)); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	get := func(path string) (int, http.Header, []incident.Incident, string) {
		t.Helper()
		resp, err := http.Get(p.Srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var incs []incident.Incident
		json.Unmarshal(b, &incs)
		return resp.StatusCode, resp.Header, incs, string(b)
	}
	status, hdr, incs, _ := get("/api/incidents")
	if status != 200 || len(incs) != store.PageSize || incs[0].ID != alerttest.SlothIncident(119, start.Add(119*time.Second)) || hdr.Get("X-Total-Count") != "120" {
		t.Fatalf("first page: %d, %d incidents, total %q", status, len(incs), hdr.Get("X-Total-Count"))
	}
	if want := `</api/incidents>; rel="first", </api/incidents?page=2>; rel="next", </api/incidents?page=3>; rel="last"`; hdr.Get("Link") != want {
		t.Errorf("Link %q, want %q", hdr.Get("Link"), want)
	}
	_, hdr, incs, _ = get("/api/incidents?page=3")
	if len(incs) != 20 || !strings.Contains(hdr.Get("Link"), `</api/incidents?page=2>; rel="prev"`) || strings.Contains(hdr.Get("Link"), "next") {
		t.Errorf("last page: %d incidents, Link %q", len(incs), hdr.Get("Link"))
	}
	_, hdr, incs, _ = get("/api/incidents?severity=ticket&status=firing")
	if len(incs) != 40 || hdr.Get("X-Total-Count") != "40" {
		t.Errorf("firing tickets: %d, total %q", len(incs), hdr.Get("X-Total-Count"))
	}
	for _, inc := range incs {
		if inc.Severity != "ticket" || inc.Status != "firing" {
			t.Errorf("filter took %s %s", inc.Severity, inc.Status)
		}
	}
	if _, _, _, body := get("/api/incidents?slo=nope"); body != "[]\n" {
		t.Errorf("no match: %q, want []", body)
	}
	for q, want := range map[string]string{"page=4": "past the last, 3", "page=-1": "from 1", "status=paged": "firing or resolved"} {
		if status, _, _, body := get("/api/incidents?" + q); status != 400 || !strings.Contains(body, want) {
			t.Errorf("?%s: %d %s, want 400 saying %q", q, status, body, want)
		}
	}
}

// An alert without a severity label takes the severity of the webhook
// Alertmanager's route sent it to, in all the pager does with it: a page
// is logged as PAGE, counted as one, stored as one (after a restart too)
// and gets its profile; a ticket likewise gets none.
func TestAnAlertWithoutSeverityIsWhatItsWebhookSays(t *testing.T) {
	dir := t.TempDir()
	p := newPagerIn(t, dir, pproftoptest.Server(t), "")
	start := time.Now().UTC().Truncate(time.Second)
	bare := func(fp string) map[string]any {
		a := alert("firing", "", start)
		delete(a["labels"].(map[string]string), "severity")
		a["fingerprint"] = fingerprint(fp)
		return a
	}
	for _, kind := range []string{"page", "ticket"} {
		if status, body := p.post(t, "/webhook/"+kind, notification(bare(kind))); status != 200 {
			t.Fatalf("%s: %d %s", kind, status, body)
		}
	}
	p.Lifecycle.Close(context.Background())
	for _, kind := range []string{"page", "ticket"} {
		id := store.IncidentID(&store.Alert{Fingerprint: fingerprint(kind), StartsAt: start})
		inc, _ := p.st.Incident(id)
		if inc.Severity != kind || inc.Profile == nil {
			t.Errorf("%s without severity: stored as %q, profile %+v", kind, inc.Severity, inc.Profile)
		}
		if got := p.notifications(t, kind, "firing"); got != 1 {
			t.Errorf("pager_notifications_total{%s,firing} = %v", kind, got)
		}
		if !strings.Contains(p.logs.String(), `"severity":"`+kind+`"`) || !strings.Contains(p.logs.String(), `"message":"`+strings.ToUpper(kind)+`"`) {
			t.Errorf("%s not logged as %s:\n%s", kind, strings.ToUpper(kind), p.logs)
		}
	}
	p.st.Close()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if inc, _ := st.Incident(store.IncidentID(&store.Alert{Fingerprint: fingerprint("page"), StartsAt: start})); inc.Severity != "page" {
		t.Errorf("after a restart the page is a %q", inc.Severity)
	}
}

func must(n int, err error) int {
	if err != nil {
		panic(err)
	}
	return n
}
