package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"burnlab/pager/internal/store"
	"burnlab/shared/incident"
	"burnlab/shared/pproftop"
	"burnlab/shared/pproftop/pproftoptest"
	"burnlab/shared/syncbuf"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type pager struct {
	srv  *httptest.Server
	h    *Handler
	st   *store.Store
	logs *syncbuf.Buffer
	dir  string
}

func newPager(t *testing.T, profileURL, token string) *pager {
	t.Helper()
	return newPagerIn(t, t.TempDir(), profileURL, token)
}

// newPagerIn is a pager whose data directory is dir; opts set more of
// its Config.
func newPagerIn(t *testing.T, dir, profileURL, token string, opts ...func(*Config)) *pager {
	t.Helper()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	cfg := Config{Store: st, Log: zerolog.New(logs), ProfileURL: profileURL, Token: token, ProfileTimeout: 5 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	h := New(cfg, prometheus.NewRegistry())
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		h.Close(context.Background())
		st.Close()
	})
	return &pager{srv: srv, h: h, st: st, logs: logs, dir: dir}
}

func alert(status string, severity string, starts time.Time) map[string]any {
	a := map[string]any{
		"status": status,
		"labels": map[string]string{"alertname": "LLMGatewayStreamLatencyBudgetBurn", "severity": severity,
			"sloth_slo": "stream-latency", "sloth_service": "llm-gateway"},
		"annotations": map[string]string{"burn_rate": "10.2x", "summary": "burning"},
		"startsAt":    starts.Format(time.RFC3339Nano),
		"endsAt":      "0001-01-01T00:00:00Z",
		"fingerprint": fingerprint(severity),
	}
	if status == "resolved" {
		a["endsAt"] = starts.Add(5 * time.Minute).Format(time.RFC3339Nano)
	}
	return a
}

// fingerprint makes an Alertmanager-shaped fingerprint (16 lowercase hex
// digits) from a name, so each fixture's alert has its own.
func fingerprint(name string) string {
	h := fnv.New64a()
	h.Write([]byte(name))
	return fmt.Sprintf("%016x", h.Sum64())
}

func with(a map[string]any, k string, v any) map[string]any {
	a[k] = v
	return a
}

func notification(alerts ...map[string]any) string {
	b, _ := json.Marshal(map[string]any{"version": "4", "groupKey": "{}:{}", "status": alerts[0]["status"], "receiver": "pager-page", "alerts": alerts})
	return string(b)
}

func (p *pager) post(t *testing.T, path, body string, hdr ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, p.srv.URL+path, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

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
	resp, _ := http.Get(p.srv.URL + "/webhook/page")
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
	p.h.ServeHTTP(rec, req)
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
	if got := testutil.ToFloat64(p.h.duplicates); got != 3 {
		t.Errorf("duplicates = %v, want 3", got)
	}
	if got := testutil.ToFloat64(p.h.notifications.WithLabelValues("page", "firing")); got != 1 {
		t.Errorf("pager_notifications_total{page,firing} = %v", got)
	}
	logs := p.logs.String()
	if strings.Count(logs, `"message":"PAGE"`) != 1 || strings.Count(logs, `"message":"RESOLVED"`) != 1 ||
		!strings.Contains(logs, `"burn_rate":"10.2x"`) || !strings.Contains(logs, `"slo":"stream-latency"`) {
		t.Errorf("one PAGE and one RESOLVED line with burn rate and SLO, got:\n%s", logs)
	}
	resp, _ := http.Get(p.srv.URL + "/api/incidents")
	var api []incident.Incident
	json.NewDecoder(resp.Body).Decode(&api)
	resp.Body.Close()
	if len(api) != 1 || api[0].SLO != "stream-latency" || api[0].Severity != "page" {
		t.Fatalf("/api/incidents: %+v", api)
	}
}

// The incident's profile comes from a real Go pprof endpoint on loopback:
// the function that allocated most in that process must top the list.
func TestPageCapturesTheHeapProfile(t *testing.T) {
	p := newPager(t, gatewayPprof(t), "")
	start := time.Now().UTC().Truncate(time.Second).Add(250 * time.Millisecond)
	if status, _ := p.post(t, "/webhook/page", notification(alert("firing", "page", start))); status != 200 {
		t.Fatal(status)
	}
	p.h.Close(context.Background())
	inc := all(p.st)[0]
	if inc.Profile == nil || inc.Profile.Error != "" || len(inc.Profile.Top) == 0 {
		t.Fatalf("profile %+v", inc.Profile)
	}
	if !strings.HasSuffix(inc.Profile.Top[0].Function, pproftoptest.Allocator) {
		t.Fatalf("top alloc_space %+v", inc.Profile.Top[0])
	}
	if _, err := os.Stat(filepath.Join(p.dir, inc.Profile.File)); err != nil {
		t.Fatalf("profile file: %v", err)
	}
	resp, _ := http.Get(p.srv.URL + "/api/incidents/" + inc.ID + "/profile")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(b) < 100 {
		t.Fatalf("profile download: %d, %d bytes", resp.StatusCode, len(b))
	}
	if !strings.Contains(p.logs.String(), "PROFILE top alloc_space") {
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
	p.h.Close(context.Background()) // any capture those started has finished
	if got := testutil.ToFloat64(p.h.profiles.WithLabelValues("page", "ok")) + testutil.ToFloat64(p.h.profiles.WithLabelValues("page", "error")); got != 2 {
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
	p := newPager(t, slow.URL, "")
	p.h.cfg.ProfileTimeout = time.Minute
	if status, _ := p.post(t, "/webhook/page", notification(alert("firing", "page", time.Now()))); status != 200 {
		t.Fatal(status)
	}
	if inc := all(p.st)[0]; inc.Profile != nil {
		t.Fatalf("the page was answered after its capture ended: %+v", inc.Profile)
	}
	close(acked)
	p.h.Close(context.Background())
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
	p := newPager(t, target.URL, "")
	if status, _ := p.post(t, "/webhook/page", notification(alert("firing", "page", time.Now()))); status != 200 {
		t.Fatal(status)
	}
	p.h.Close(context.Background())
	inc := all(p.st)[0]
	if inc.Profile == nil || !strings.Contains(inc.Profile.Error, "profile too large") || !strings.Contains(inc.Profile.Error, "inflate to over") {
		t.Fatalf("the bomb's capture: %+v", inc.Profile)
	}
}

// gatewayPprof is a gateway's pprof endpoint on loopback, serving a real
// allocs profile of the test process in which pproftoptest.Allocator made
// the garbage (pproftoptest.HeapProfile).
func gatewayPprof(t *testing.T) string {
	prof := pproftoptest.HeapProfile(t)
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(prof) }))
	t.Cleanup(gw.Close)
	return gw.URL + "/debug/pprof/allocs"
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
	p := newPagerIn(t, data, gatewayPprof(t), "")
	status, resp := p.post(t, "/webhook/page", notification(with(alert("firing", "page", time.Now().UTC()), "fingerprint", "../../../escaped")))
	p.h.Close(context.Background())
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
		resp, err := http.Get(p.srv.URL + "/api/incidents/" + fp + "-" + fmt.Sprint(start.Unix()) + "/profile")
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
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	h := New(Config{Store: st, Log: zerolog.Nop()}, reg)
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); h.Close(context.Background()); st.Close() })
	p := &pager{srv: srv, h: h, st: st, dir: dir}
	start := time.Now().UTC()
	for i := range 50 {
		sev := fmt.Sprintf("made-up-%d", i)
		if status, body := p.post(t, "/webhook/ticket", notification(alert("firing", sev, start))); status != 200 {
			t.Fatalf("%s: %d %s", sev, status, body)
		}
	}
	p.post(t, "/webhook/page", notification(alert("firing", "page", start)))
	p.post(t, "/webhook/ticket", notification(alert("resolved", "ticket", start)))
	if n := testutil.CollectAndCount(h.notifications); n > 6 {
		t.Errorf("pager_notifications_total has %d series, want at most 6 (page, ticket, other × firing, resolved)", n)
	}
	for _, c := range []struct {
		severity, status string
		want             float64
	}{{"other", "firing", 50}, {"page", "firing", 1}, {"ticket", "resolved", 1}, {"ticket", "firing", 0}} {
		if got := testutil.ToFloat64(h.notifications.WithLabelValues(c.severity, c.status)); got != c.want {
			t.Errorf("pager_notifications_total{severity=%q,status=%q} = %v, want %v", c.severity, c.status, got, c.want)
		}
	}
}

// A page that resolves gets a second profile from the same source, taken
// after the page-time one even when the resolve arrives while that is still
// being fetched, journaled so it is there after a restart, and on the
// timeline; so does a ticket; a retried resolve takes none.
func TestAResolvedPageGetsAProfileTakenAfter(t *testing.T) {
	dir := t.TempDir()
	p := newPagerIn(t, dir, gatewayPprof(t), "")
	p.h.cfg.ExternalURL = "http://pager.example:5001"
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
	p.h.Close(context.Background())
	if got := testutil.ToFloat64(p.h.profiles.WithLabelValues("after", "ok")); got != 2 {
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

	resp, err := http.Get(p.srv.URL + "/api/incidents/" + id)
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

// slothAlert is alert i of one group as this repo's Alertmanager sends it
// for the stream-latency page: Sloth's labels and annotations, Prometheus's
// generator URL (the rule's whole expression, escaped), and a label that
// tells the group's alerts apart.
func slothAlert(i int, start time.Time) map[string]any {
	expr := `(max(slo:sli_error:ratio_rate30s{sloth_id="llm-gateway-stream-latency", sloth_service="llm-gateway", sloth_slo="stream-latency"} > (14.4 * 0.0009999999999999432)) without (sloth_window)` +
		` and max(slo:sli_error:ratio_rate1m{sloth_id="llm-gateway-stream-latency", sloth_service="llm-gateway", sloth_slo="stream-latency"} > (14.4 * 0.0009999999999999432)) without (sloth_window))` +
		` or (max(slo:sli_error:ratio_rate2m{sloth_id="llm-gateway-stream-latency", sloth_service="llm-gateway", sloth_slo="stream-latency"} > (6 * 0.0009999999999999432)) without (sloth_window)` +
		` and max(slo:sli_error:ratio_rate4m{sloth_id="llm-gateway-stream-latency", sloth_service="llm-gateway", sloth_slo="stream-latency"} > (6 * 0.0009999999999999432)) without (sloth_window))`
	return map[string]any{
		"status": "firing",
		"labels": map[string]string{"alertname": "LLMGatewayStreamLatencyBudgetBurn", "category": "latency", "lab": "burnlab", "owner": "burnlab",
			"route": "/v1/chat/stream", "severity": "page", "sloth_id": "llm-gateway-stream-latency", "sloth_service": "llm-gateway",
			"sloth_severity": "page", "sloth_slo": "stream-latency", "tenant": fmt.Sprintf("tenant-%05d", i)},
		"annotations": map[string]string{"burn_rate": "14.9x",
			"description": "Streams on /v1/chat/stream take over 600 ms more often than the budget allows. No 5xx and a fine p50 do not mean healthy: look at the tail.",
			"pager_url":   "http://127.0.0.1:5001/slo/stream-latency",
			"runbook":     "Profile allocation before CPU: go tool pprof -top -sample_index=alloc_space http://gateway:6060/debug/pprof/allocs — the top flat function is the one making the garbage.",
			"summary":     "llm-gateway is burning its stream-latency error budget (600 ms, 99.9%)",
			"title":       "(page) llm-gateway stream-latency SLO error budget burn rate is too fast."},
		"startsAt":     start.Format(time.RFC3339Nano),
		"endsAt":       "0001-01-01T00:00:00Z",
		"generatorURL": "http://prometheus:9090/graph?g0.expr=" + url.QueryEscape(expr) + "&g0.tab=1",
		"fingerprint":  fingerprint(fmt.Sprint("sloth ", i)),
	}
}

// group is one Alertmanager notification of n alerts, as its webhook
// notifier sends it: the common and group labels too.
func group(n int, start time.Time, pad int) string {
	alerts := make([]map[string]any, n)
	for i := range alerts {
		alerts[i] = slothAlert(i, start)
		if pad > 0 {
			alerts[i]["annotations"].(map[string]string)["pad"] = strings.Repeat("x", pad)
		}
	}
	b, _ := json.Marshal(map[string]any{"version": "4", "groupKey": `{}/{severity="page"}:{alertname="LLMGatewayStreamLatencyBudgetBurn", severity="page", sloth_service="llm-gateway", sloth_slo="stream-latency"}`,
		"truncatedAlerts": 0, "status": "firing", "receiver": "pager-page", "externalURL": "http://alertmanager:9093", "alerts": alerts,
		"groupLabels":       map[string]string{"alertname": "LLMGatewayStreamLatencyBudgetBurn", "severity": "page", "sloth_service": "llm-gateway", "sloth_slo": "stream-latency"},
		"commonLabels":      map[string]string{"alertname": "LLMGatewayStreamLatencyBudgetBurn", "severity": "page", "sloth_service": "llm-gateway", "sloth_slo": "stream-latency"},
		"commonAnnotations": map[string]string{"pager_url": "http://127.0.0.1:5001/slo/stream-latency"}})
	return string(b)
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
	if got := testutil.ToFloat64(p.h.truncated); got != 12 || !strings.Contains(p.logs.String(), `"truncated_alerts":12`) {
		t.Errorf("pager_truncated_alerts_total = %v, logs:\n%s", got, p.logs)
	}

	// Past the limit: a valid payload, too large to take, is the pager's
	// failure, not the sender's.
	p = newPager(t, "", "")
	over := group(limits[0], time.Now().UTC(), int(DefaultMaxBody)/limits[0])
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
		resp, err := http.Get(p.srv.URL + path)
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
	if status != 200 || len(incs) != store.PageSize || incs[0].ID != pageFor(119, start.Add(119*time.Second)) || hdr.Get("X-Total-Count") != "120" {
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
	p := newPagerIn(t, dir, newFakeGateway(t).url(), "")
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
	p.h.Close(context.Background())
	for _, kind := range []string{"page", "ticket"} {
		id := store.IncidentID(&store.Alert{Fingerprint: fingerprint(kind), StartsAt: start})
		inc, _ := p.st.Incident(id)
		if inc.Severity != kind || inc.Profile == nil {
			t.Errorf("%s without severity: stored as %q, profile %+v", kind, inc.Severity, inc.Profile)
		}
		if got := testutil.ToFloat64(p.h.notifications.WithLabelValues(kind, "firing")); got != 1 {
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
