//go:build e2e

package lab

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"burnlab/shared/incident"
	"burnlab/shared/results"
	"burnlab/shared/scenario"
	"burnlab/shared/slo"
	"burnlab/shared/variant"
	"burnlab/stack/pagerweb"

	"github.com/chromedp/chromedp"
)

// The bounds the regression is held to, from the lab windows
// (prometheus/slo/windows/lab) and the intervals (5 s scrape and
// evaluation, Alertmanager's 10 s group_wait and 30 s group_interval):
//   - the calibrated 10x burn pages through the slow pair once its 4m
//     window averages 6x: 4m × 6/10 = 2.4 min after the load starts, plus
//     5 s + 5 s + 10 s; pageWithin allows 2.5 times that;
//   - after the switch the page clears once the 2m window falls under 6x:
//     2m × (1 − 6/10) = 48 s, plus 5 s + 5 s + 30 s (the resolve waits
//     for the group's next interval): ~1.5 min; resolveWithin allows
//     twice that (twelve fresh runs at stop 50 resolved in 30–89 s);
//   - the pager's profile and facts come within one profile fetch of the
//     page: a 10 s delta and its request, far under profileWithin.
const (
	pageWithin    = 6 * time.Minute
	profileWithin = 90 * time.Second
	resolveWithin = 3 * time.Minute
	pollEvery     = 5 * time.Second
)

const guilty = "transcript.(*Baseline).Append"

// regressionBound is how far the baseline's measured burn may be from the
// calibration's: the baseline's breaches depend on a busy machine's CPU,
// not an exact share.
const regressionBound = 0.5

// expectedBurn is the calibration's promise for the shape file: its 1 long
// stream in long_every breaches, and nothing else does.
func expectedBurn(path string) (float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var s struct {
		LongEvery int `json:"long_every"`
	}
	if err := json.Unmarshal(b, &s); err != nil || s.LongEvery < 2 {
		return 0, fmt.Errorf("shape %s: long_every %d: %v", path, s.LongEvery, err)
	}
	return 1 / float64(s.LongEvery) / slo.Budget, nil
}

// testRegression drives the native lab through the write-up's incident,
// as the matrix's regression row (TestScenarios runs it): `make lab` works
// without Docker, the baseline pages at the burn the calibration promised,
// the page tells its story, every dashboard query has data, and `make
// lab-switch` to fixed resolves the page. What the compose e2e proves on
// the same files (the profile after the resolve, the before/after diff,
// the monitoring path's faults) is not proved again here; that the fixed
// build under load, and the idle stack, fire nothing is the none row's;
// the pager's web UI is stack/pagerweb's, in a browser. It fills in
// regression, the matrix's row.
//
// bin holds the binaries Build made, copied so that the switch's build of
// the fixed gateway writes over no other lab's running binary. quiet is
// closed once no other row watches its alerts: the browser and the
// backtest wait for it.
func testRegression(t *testing.T, ctx context.Context, root, bin, replay string, regression *result, quiet <-chan struct{}) {
	t0 := time.Now()
	var timeline []string
	say := func(format string, args ...any) {
		line := fmt.Sprintf("t+%-4s %-16s %s", time.Since(t0).Round(time.Second).String(), "regression", fmt.Sprintf(format, args...))
		fmt.Println(line)
		timeline = append(timeline, line)
	}
	own := t.TempDir()
	if err := os.CopyFS(own, os.DirFS(bin)); err != nil {
		t.Fatal(err)
	}
	addrs := freeAddrs(t)
	l, err := Start(ctx, Config{Root: root, Dir: t.TempDir(), Addrs: addrs, Variant: variant.Baseline, Log: os.Stdout, NoLoad: true, Bin: own})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	// The incident starts with the load; the pager's first delta heap
	// profile, of the idle gateway, is the "before" its heap verdict
	// compares the burn with.
	if err := l.WaitHeapBaseline(ctx, GatewayRule, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	// Clear of the burn's first seconds, which Prometheus sees a scrape
	// or two late.
	time.Sleep(10 * time.Second)
	if err := l.StartLoad(ctx); err != nil {
		t.Fatal(err)
	}
	reg, err := scenario.Lookup("regression")
	if err != nil {
		t.Fatal(err)
	}
	fail := func(format string, args ...any) {
		t.Helper()
		regression.err = fmt.Errorf(format, args...)
		for _, name := range []string{Gateway, Loadgen, Pager, Prometheus, Alertmanager, Upstream} {
			fmt.Printf("---- last lines of %s ----\n%s\n", name, l.Tail(name, 15))
		}
		t.Fatalf(format, args...)
	}
	burn := func() string {
		v, err := l.Query(`slo:sli_error:ratio_rate2m{sloth_slo="stream-latency"} / 0.001`)
		if err != nil || len(v) == 0 {
			return "n/a"
		}
		for _, x := range v {
			return fmt.Sprintf("%.1fx", x)
		}
		return ""
	}
	say("lab up (baseline gateway, load running): %v", l.Running())
	if err := sameVersionsAsCompose(root, l.Probe); err != nil {
		t.Fatal(err)
	}
	say("Prometheus and Alertmanager run the versions docker-compose.yml pins")
	loadStart := time.Now()
	// The regression scenario: nothing injected, the baseline build is the
	// fault. Setting it only labels the dashboard; the watch holds the run
	// to the matrix's row from the load's start until the fixed build has
	// run quiet.
	if err := l.SetScenario(ctx, reg.Name); err != nil {
		fail("%v", err)
	}
	w := newWatch(l, reg)
	w.inject(loadStart)
	_, stopWatch := w.follow(ctx)
	defer stopWatch() //nolint:errcheck // a failure's cleanup; the run's end reads it

	// 1. Baseline: a page for the stream-latency SLO.
	var page incident.Incident
	for {
		incs, err := l.Incidents()
		if err == nil {
			for _, inc := range incs {
				if inc.Severity == "page" && inc.SLO == "stream-latency" && inc.Status == "firing" {
					page = inc
				}
			}
		}
		if page.ID != "" {
			break
		}
		if time.Since(loadStart) > pageWithin {
			fail("no page within %s of the baseline load (burn over 2m: %s)", pageWithin, burn())
		}
		time.Sleep(pollEvery)
	}
	say("PAGE fired for %s/%s, %s after the load started; burn over 2m %s", page.AlertName, page.SLO, time.Since(loadStart).Round(time.Second), burn())
	for _, other := range []string{"availability", "ttft"} {
		if on, err := firing(l, other, "page"); err != nil || on {
			fail("the %s SLO must stay silent: firing=%v (%v)", other, on, err)
		}
	}
	alerts, err := l.Alerts()
	if err != nil || !hasAlert(alerts, "stream-latency", "page", "firing") {
		fail("Prometheus does not agree that the page fires: %v %+v", err, alerts)
	}
	say("Prometheus /api/v1/alerts agrees: stream-latency page firing; availability and ttft silent")
	deadline := time.Now().Add(profileWithin)
	for {
		inc, err := l.Incident(page.ID)
		if err != nil {
			fail("pager: %v", err)
		}
		if inc.Profile != nil {
			if inc.Profile.Error != "" {
				fail("profile capture failed: %s", inc.Profile.Error)
			}
			top := inc.Profile.Top[0]
			if !strings.HasSuffix(top.Function, guilty) {
				fail("the page's profile names %s, want %s", top.Function, guilty)
			}
			say("PROFILE at page time: top alloc_space %s (%.1f%%)", top.Function, top.FlatPct)
			words, err := l.CheckTrace(inc)
			if err != nil {
				fail("the page's flight-recorder snapshot: %v", err)
			}
			say("TRACE %s", words)
			break
		}
		if time.Now().After(deadline) {
			fail("no profile on the incident within %s", profileWithin)
		}
		time.Sleep(2 * time.Second)
	}
	// The page tells the whole story: the burn of the pair that fired,
	// the budget, the slowest requests (real ones: each has its gateway
	// log line), the heap's verdict, on the page and in the notification.
	story, err := l.WaitStory(ctx, page.ID, profileWithin)
	if err != nil {
		fail("%v", err)
	}
	told, err := story.Check(guilty, l.Log(Gateway))
	if err != nil {
		fail("the page's story: %v", err)
	}
	if err := story.CheckBurn(); err != nil {
		fail("the page is not the write-up's: %v", err)
	}
	gc, err := story.CheckGC()
	if err != nil {
		fail("the page's mechanism: %v", err)
	}
	told = append(told, "the GC: "+gc)
	for _, line := range told {
		say("PAGE %s", line)
	}
	if err := l.CheckPage(story); err != nil {
		fail("%v", err)
	}
	say("the incident page shows the burn pairs, the burn chart, the budget, the slowest requests and the heap's verdict")
	note, err := l.Notification(ctx, root, "stream-latency", story)
	if err != nil {
		fail("%v", err)
	}
	say("NOTIFICATIONS as burnlab's Alertmanager template renders them (amtool):\n%s", note)
	// The Grafana dashboard's every query returns data from this Prometheus.
	queries := dashboardQueries(t, root)
	var empty []string
	for deadline := time.Now().Add(time.Minute); ; {
		empty = empty[:0]
		for name, q := range queries {
			if v, err := l.Query(strings.ReplaceAll(q, "$__rate_interval", "1m")); err != nil || len(v) == 0 {
				empty = append(empty, fmt.Sprintf("%s (%v)", name, err))
			}
		}
		if len(empty) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(pollEvery)
	}
	if len(empty) > 0 {
		fail("dashboard queries with no data: %v", empty)
	}
	say("dashboard: all %d queries of grafana/dashboards return data from the lab's Prometheus", len(queries))

	// The calibration's expected burn against the measured one, over a 2m
	// window wholly inside the load, after its 10 s ramp.
	time.Sleep(time.Until(loadStart.Add(reg.Observe)))
	want, err := expectedBurn(l.cfg.Shape)
	if err != nil {
		fail("%v", err)
	}
	got, err := l.Query(`slo:sli_error:ratio_rate2m{sloth_slo="stream-latency"} / ` + fmt.Sprint(slo.Budget))
	if err != nil || len(got) != 1 {
		fail("burn over 2m: %v %v", err, got)
	}
	for _, g := range got {
		regression.burn = fmt.Sprintf("stream-latency %.1fx → %.1fx", want, g)
		say("burn over 2m after %s of load: %.1fx; the calibration expected %.1fx", reg.Observe, g, want)
		// NaN (no streams in the window) must fail too.
		if !(math.Abs(g/want-1) <= regressionBound) {
			fail("the baseline burns %.1fx, the calibration expected %.1fx (±%.0f %%)", g, want, 100*regressionBound)
		}
	}

	// 2. Switch to fixed: the page resolves and no new one fires.
	switched := time.Now()
	if err := l.Switch(ctx, variant.Fixed); err != nil {
		fail("switch: %v", err)
	}
	say("switched the gateway to fixed (%s to drain, rebuild and restart)", time.Since(switched).Round(time.Second))
	for {
		inc, err := l.Incident(page.ID)
		if err != nil {
			fail("pager: %v", err)
		}
		if inc.Status == "resolved" {
			break
		}
		if time.Since(switched) > resolveWithin {
			fail("the page did not resolve within %s of the switch (burn over 2m: %s)", resolveWithin, burn())
		}
		time.Sleep(pollEvery)
	}
	resolved := time.Now()
	regression.resolved = fmt.Sprintf("%ds (from the switch)", int(resolved.Sub(switched).Seconds()))
	say("RESOLVED %s after the switch; burn over 2m %s", resolved.Sub(switched).Round(time.Second), burn())
	if err := stopWatch(); err != nil {
		fail("watching the alerts: %v", err)
	}
	regression.fired = []string{w.firedAfter(reg.Fires[0])}
	if v := w.violations(); len(v) > 0 {
		regression.silent = "NO: " + strings.Join(v, "; ")
		fail("alerts the regression must not fire: %s", strings.Join(v, "; "))
	}
	if err := firedOverTheRun(l, reg, time.Since(loadStart)); err != nil {
		regression.silent = "NO: " + err.Error()
		fail("%v", err)
	}
	regression.silent = "yes"
	say("from the load's start to here: only %s (and its ticket) fired, in Prometheus, Alertmanager and the pager", reg.Expected())
	// The page in a browser, once no lab's alerts are watched: Chromium's
	// start takes this 2-core machine's CPU for seconds, which the streams
	// count as latency and late first tokens (see TestScenarios).
	select {
	case <-quiet:
	case <-ctx.Done():
		fail("waiting for the other rows to end: %v", ctx.Err())
	}
	say("every other row has ended")
	if err := inABrowser(ctx, l.Probe, page.ID, "regression", guilty); err != nil {
		fail("%v", err)
	}
	if err := agreesWithBacktest(ctx, l, replay, say); err != nil {
		fail("%v", err)
	}
	// The pager reads the GC's share over the minute after the resolve,
	// once it is over: by now, as a rule, it has.
	after, err := l.WaitGCAfter(ctx, page.ID, 2*time.Minute)
	if err != nil {
		fail("%v", err)
	}
	gcAfter, err := story.CheckGCAfter(after)
	if err != nil {
		fail("the fix's mechanism: %v", err)
	}
	say("GC %s", gcAfter)

	say("done in %s", time.Since(t0).Round(time.Second))
	if dir := os.Getenv(results.EnvDir); dir != "" {
		prom, am, err := l.Versions()
		if err != nil {
			t.Fatal(err)
		}
		if err := results.Write(filepath.Join(dir, "lab-e2e.md"), results.Run{
			Title: "The native lab's end-to-end run", By: "`make e2e SAVE=1` (stack/lab, TestScenarios's regression row)",
			Root: root, Date: t0, Machine: []string{"Prometheus " + prom, "Alertmanager " + am},
			Notes: []string{"each figure is from the regression's start; the baseline gateway pages, make lab-switch to fixed resolves"},
			Body:  strings.Join(timeline, "\n"),
		}); err != nil {
			t.Error(err)
		}
	}
}

// pinned reads the versions docker-compose.yml pins its Prometheus and
// Alertmanager images at.
var pinned = regexp.MustCompile(`image: prom/(prometheus|alertmanager):v([0-9.]+)`)

// sameVersionsAsCompose holds the lab's Prometheus and Alertmanager to the
// images compose runs: one version everywhere (make tools builds them).
func sameVersionsAsCompose(root string, p Probe) error {
	b, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		return err
	}
	want := map[string]string{}
	for _, m := range pinned.FindAllStringSubmatch(string(b), -1) {
		want[m[1]] = m[2]
	}
	prom, am, err := p.Versions()
	if err != nil {
		return err
	}
	if prom != want["prometheus"] || am != want["alertmanager"] {
		return fmt.Errorf("the lab runs Prometheus %s and Alertmanager %s; compose pins %s and %s: run make tools", prom, am, want["prometheus"], want["alertmanager"])
	}
	return nil
}

// dashboardQueries collects every "expr" of the committed dashboards,
// named by the panel title around it.
func dashboardQueries(t *testing.T, root string) map[string]string {
	files, _ := filepath.Glob(filepath.Join(root, "grafana/dashboards/*.json"))
	if len(files) == 0 {
		t.Fatal("no dashboards under grafana/dashboards")
	}
	out := map[string]string{}
	var walk func(v any, title string)
	walk = func(v any, title string) {
		switch v := v.(type) {
		case map[string]any:
			if s, ok := v["title"].(string); ok {
				title = s
			}
			if e, ok := v["expr"].(string); ok && e != "" {
				out[fmt.Sprintf("%s #%d", title, len(out)+1)] = e
			}
			for _, c := range v {
				walk(c, title)
			}
		case []any:
			for _, c := range v {
				walk(c, title)
			}
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d any
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		walk(d, filepath.Base(f))
	}
	return out
}

// inABrowser opens the incident's page in headless Chromium, as the person
// paged would, and checks that what the server rendered draws: the burn
// chart's two lines and threshold inside a chart of some size, a row per
// slow request, the heap's verdict naming want (or saying the heap did not
// change). The screenshot goes to $BURNLAB_SCREENSHOTS (default: a
// temporary directory), named after the run.
func inABrowser(ctx context.Context, p Probe, id, run, want string) error {
	dir := os.Getenv("BURNLAB_SCREENSHOTS")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "burnlab-screenshots"); err != nil {
			return err
		}
	}
	b, err := pagerweb.Open(ctx, dir)
	if err != nil {
		return err
	}
	defer b.Close()
	if err := b.Do("incident-"+run, chromedp.Navigate("http://"+p.Addrs.Pager+"/incidents/"+id), chromedp.WaitVisible(chromedp.CSS("#burn-chart svg"))); err != nil {
		return err
	}
	width, err := pagerweb.Eval[float64](b, `document.querySelector("#burn-chart svg").getBoundingClientRect().width`)
	if err != nil {
		return err
	}
	drawn, err := pagerweb.Eval[int](b, `["path.burn-short, .burn-short path, .burn-short", ".burn-long", ".threshold", ".firing"].filter(s => document.querySelector("#burn-chart " + s) !== null).length`)
	if err != nil {
		return err
	}
	rows, err := pagerweb.Eval[int](b, `document.querySelectorAll("#slowest tbody tr").length`)
	if err != nil {
		return err
	}
	heap, err := b.Text("#heap-change")
	if err != nil {
		return err
	}
	switch {
	case width < 300 || drawn != 4:
		return fmt.Errorf("the browser draws the burn chart %.0f px wide with %d of its 4 parts (short, long, threshold, firing)", width, drawn)
	case rows == 0:
		return errors.New("the browser shows no slow request in #slowest")
	case want != "" && !strings.Contains(heap, want), want == "" && !strings.Contains(heap, "did not change"):
		return fmt.Errorf("the browser's heap section does not say %q:\n%s", cmp.Or(want, "did not change"), heap)
	}
	fmt.Printf("screenshot of the %s incident's page: %s\n", run, filepath.Join(dir, "incident-"+run+".png"))
	return nil
}
