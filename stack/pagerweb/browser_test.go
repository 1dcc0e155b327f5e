package pagerweb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"burnlab/shared/freeport"
	"burnlab/shared/incident"
	"burnlab/shared/proc"
)

// hostile is a label value that would run script and add an element if a
// page put it in as markup.
const hostile = `<script>document.title="owned"</script><b id="injected">bold</b>`

// The whole story in a browser: the baseline gateway's profile at the page,
// its top function on the incidents list and the incident page, pprof's
// flame graph of it, and after the switch to the fixed gateway and the
// resolve, the difference in which the guilty function's allocations go
// away. Screenshots go to $BURNLAB_SCREENSHOTS (default: a temporary
// directory).
func TestPagerWebInABrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the gateway and the pager, and drives Chromium")
	}
	if _, err := Chromium(); err != nil {
		t.Fatal(err)
	}
	shots := os.Getenv("BURNLAB_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	// Builds are timed apart: from a cold cache on a busy machine they take
	// minutes, while the story itself takes seconds.
	buildCtx, cancelBuild := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancelBuild()
	bin := t.TempDir()
	for _, b := range []struct{ out, pkg, tags string }{
		{"gateway-baseline", "./gateway/cmd/gateway", ""},
		{"gateway-fixed", "./gateway/cmd/gateway", "fixed"},
		{"pager", "./pager/cmd/pager", ""},
	} {
		build := proc.Build{Dir: repoRoot(t), Out: filepath.Join(bin, b.out), Pkgs: []string{b.pkg}, Tags: b.tags}
		if err := build.Run(buildCtx); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()

	up := upstream()
	defer up.Close()
	var admin atomic.Pointer[string]
	// The pager's -profile-url stays one URL while the gateway behind it is
	// replaced, as compose's gateway:6060 does.
	profiles := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(&url.URL{Scheme: "http", Host: *admin.Load()})
		r.Out.URL.Path = "/debug/pprof/allocs"
	}})
	defer profiles.Close()

	gw := startGateway(ctx, t, filepath.Join(bin, "gateway-baseline"), up.URL)
	admin.Store(&gw.admin)
	gw.streams(ctx, t, 6)

	pagerAddr := freeport.ForTest(t)
	pagerURL := "http://" + pagerAddr
	stopPager := run(ctx, t, pagerURL+"/readyz", filepath.Join(bin, "pager"), "-listen", pagerAddr, "-data", t.TempDir(),
		"-profile-url", profiles.URL+"/debug/pprof/allocs", "-external-url", pagerURL)
	defer stopPager()

	start := time.Now().UTC().Truncate(time.Second)
	postAlert(ctx, t, pagerURL, "firing", start)
	inc := waitIncident(ctx, t, pagerURL, func(inc incident.Incident) bool { return inc.Profile != nil })
	if inc.Profile.Error != "" || len(inc.Profile.Top) == 0 || !strings.HasSuffix(inc.Profile.Top[0].Function, "(*Baseline).Append") {
		t.Fatalf("page-time profile %+v", inc.Profile)
	}
	t.Logf("page-time profile: %d bytes alloc_space, top %s %.1f%%", inc.Profile.Total, inc.Profile.Top[0].Function, inc.Profile.Top[0].FlatPct)
	if inc.URL != pagerURL+"/incidents/"+inc.ID {
		t.Errorf("the API's url %q, want the incident's page under -external-url", inc.URL)
	}

	br, err := Open(ctx, shots)
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	b := &browser{t: t, Browser: br}

	// The incidents, newest first: the alert, its state, the top function.
	b.do("index", chromedp.Navigate(pagerURL+"/"), chromedp.WaitVisible(chromedp.CSS("#incidents")))
	text := b.text("#incidents")
	for _, want := range []string{"LLMGatewayStreamLatencyBudgetBurn", "stream-latency", "firing", "(*Baseline).Append", "9.8x"} {
		if !strings.Contains(text, want) {
			t.Errorf("the incidents list does not show %q:\n%s", want, text)
		}
	}

	// The incident: its state, the profile's top function, and the label
	// with markup in it as text.
	b.do("incident", chromedp.Click(chromedp.CSS("#incidents a")), chromedp.WaitVisible(chromedp.CSS("#profile")))
	alertname, state, profile := b.text("#alertname"), b.text("#state"), b.text("#profile")
	if alertname != "LLMGatewayStreamLatencyBudgetBurn" || state != "firing" || !strings.Contains(profile, "(*Baseline).Append") {
		t.Errorf("incident page: alert %q, state %q, profile:\n%s", alertname, state, profile)
	}
	label := eval[string](b, `[...document.querySelectorAll("#labels tr")].find(r => r.querySelector("th").textContent === "note").querySelector("td").textContent`)
	injected := eval[int](b, `document.querySelectorAll("#injected").length`)
	scripts := eval[int](b, `document.querySelectorAll("script").length`)
	if label != hostile || injected != 0 || scripts != 0 {
		t.Errorf("the label with markup: text %q, %d injected elements, %d scripts; want the text as sent and no element", label, injected, scripts)
	}

	// pprof's own flame graph of the page-time profile draws the function.
	b.do("flamegraph", chromedp.Click(chromedp.CSS("#flamegraph-link")), chromedp.WaitVisible(chromedp.CSS("#stack-chart .boxtext")))
	if !eval[bool](b, `[...document.querySelectorAll("#stack-chart .boxtext")].some(b => b.innerText.includes("(*Baseline).Append"))`) {
		t.Errorf("the flame graph at %s draws no (*Baseline).Append frame", eval[string](b, "location.href"))
	}

	// The fix: the fixed gateway replaces the baseline, serves the same
	// streams, and the page resolves.
	gw.stop()
	gw = startGateway(ctx, t, filepath.Join(bin, "gateway-fixed"), up.URL)
	admin.Store(&gw.admin)
	gw.streams(ctx, t, 6)
	postAlert(ctx, t, pagerURL, "resolved", start)
	inc = waitIncident(ctx, t, pagerURL, func(inc incident.Incident) bool { return inc.After != nil })
	if inc.After.Error != "" || len(inc.After.Top) == 0 {
		t.Fatalf("after profile %+v", inc.After)
	}
	t.Logf("after profile: %d bytes alloc_space, top %s %.1f%%", inc.After.Total, inc.After.Top[0].Function, inc.After.Top[0].FlatPct)

	b.do("incident-resolved", chromedp.Navigate(pagerURL+"/incidents/"+inc.ID), chromedp.WaitVisible(chromedp.CSS("#compares")))
	state, compares := b.text("#state"), b.text("#compares")
	if state != "resolved" || !strings.Contains(compares, "-diff_base") || !strings.Contains(compares, inc.Profile.TakenAt.UTC().Format("15:04:05")) ||
		!strings.Contains(compares, inc.After.TakenAt.UTC().Format("15:04:05")) {
		t.Errorf("resolved incident: state %q, compares:\n%s", state, compares)
	}

	// The difference: the guilty function's frame is there, drawn as
	// allocations that went away.
	b.do("diff", chromedp.Click(chromedp.CSS("#diff-link")), chromedp.WaitVisible(chromedp.CSS("#stack-chart .boxtext")))
	if !eval[bool](b, `[...document.querySelectorAll("#stack-chart .boxbg")].some(b =>
		b.querySelector(".boxtext")?.innerText.includes("(*Baseline).Append") && b.querySelector(".negative") !== null)`) {
		t.Error("the diff's flame graph does not draw (*Baseline).Append as allocations gone")
	}
	t.Logf("screenshots in %s", shots)
}

// browser is the test's Browser: a failed step fails the test.
type browser struct {
	t *testing.T
	*Browser
}

func (b *browser) do(name string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := b.Do(name, steps...); err != nil {
		b.t.Fatal(err)
	}
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	s, err := b.Text(sel)
	if err != nil {
		b.t.Fatal(err)
	}
	return s
}

func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := Eval[T](b.Browser, expr)
	if err != nil {
		b.t.Fatal(err)
	}
	return v
}

func repoRoot(t *testing.T) string {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// run starts a process (proc.Start) and waits until ready answers 200;
// it returns what stops it, SIGTERM then SIGKILL after 10 s, and puts the
// process's log in the test's output if the test failed.
func run(ctx context.Context, t *testing.T, ready string, args ...string) (stop func()) {
	t.Helper()
	name := filepath.Base(args[0])
	p, err := proc.Start(ctx, proc.Spec{Name: name, Args: args, Log: filepath.Join(t.TempDir(), name+".log"), Ready: ready})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			p.Stop(10 * time.Second)
			if t.Failed() {
				t.Logf("%s's log:\n%s", name, p.Tail(200))
			}
		})
	}
}

// upstream streams 3,000 chunks whose payloads stay inside the write-up's
// 24–96 characters, so the baseline's regexp and copying work on each.
func upstream() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3000 {
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" tok%d\"}}]}\n\n", i)
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
}

type gateway struct {
	public, admin string
	stop          func()
}

func startGateway(ctx context.Context, t *testing.T, binary, up string) *gateway {
	t.Helper()
	g := &gateway{public: freeport.ForTest(t), admin: freeport.ForTest(t)}
	g.stop = run(ctx, t, "http://"+g.admin+"/readyz", binary, "-listen", g.public, "-admin", g.admin, "-upstream", up,
		"-tenants", "k=lab:100000000", "-log-level", "warn", "-drain-grace", "0s")
	t.Cleanup(g.stop)
	return g
}

// streams sends n whole streams through the gateway, one after another.
func (g *gateway) streams(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	for range n {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+g.public+"/v1/chat/stream", strings.NewReader(`{"model":"m","stream":true,"messages":[]}`))
		req.Header.Set("Authorization", "Bearer k")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte("[DONE]")) {
			t.Fatalf("stream: %s, %d bytes", resp.Status, len(b))
		}
	}
}

// postAlert sends the pager Alertmanager's webhook for the lab's page, with
// a label carrying markup.
func postAlert(ctx context.Context, t *testing.T, pager, status string, start time.Time) {
	t.Helper()
	a := map[string]any{
		"status": status,
		"labels": map[string]string{"alertname": "LLMGatewayStreamLatencyBudgetBurn", "severity": "page",
			"sloth_slo": "stream-latency", "sloth_service": "llm-gateway", "note": hostile},
		"annotations": map[string]string{"burn_rate": "9.8x", "summary": "llm-gateway is burning its stream-latency error budget"},
		"startsAt":    start.Format(time.RFC3339),
		"endsAt":      "0001-01-01T00:00:00Z",
		"fingerprint": "5eb1a7e0c0ffee42",
	}
	if status == "resolved" {
		a["endsAt"] = time.Now().UTC().Format(time.RFC3339)
	}
	body, _ := json.Marshal(map[string]any{"version": "4", "groupKey": "{}:{}", "status": status, "receiver": "pager-page", "alerts": []any{a}})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, pager+"/webhook/page", bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("webhook: %s %s", resp.Status, b)
	}
}

// waitIncident polls the pager's API until its one incident satisfies ok.
func waitIncident(ctx context.Context, t *testing.T, pager string, ok func(incident.Incident) bool) incident.Incident {
	t.Helper()
	var last []incident.Incident
	for {
		err := func() error {
			resp, err := http.Get(pager + "/api/incidents")
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			return json.NewDecoder(resp.Body).Decode(&last)
		}()
		if err == nil && len(last) == 1 && ok(last[0]) {
			return last[0]
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pager's incidents never got there: %+v (%v)", last, errors.Join(err, ctx.Err()))
		case <-time.After(100 * time.Millisecond):
		}
	}
}
