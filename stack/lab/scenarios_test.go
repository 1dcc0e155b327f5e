//go:build e2e

package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"burnlab/shared/proc"
	"burnlab/shared/results"
	"burnlab/shared/scenario"
	"burnlab/shared/variant"
)

// The matrix's bounds, from the injection (fire) and from the clear
// (resolve). A page of a 10x burn is due about a minute after it starts in
// a young lab, whose 4m window holds only the 30 s warm-up and the fault
// (~2.5 min once that window is full), plus scrape, evaluation and
// group_wait; it clears ~1 min after the fault stops (the 2m window under
// 6x). The creep's ticket is due ~1.5 min in (the run's average over 1x)
// and clears once its 8m window, which holds the whole run of a young lab,
// averages under 1x again, ~4 min after the creep stops. Each bound holds
// the full-window time and about half again for a shared 2-core machine.
var (
	firesWithin = map[string]time.Duration{scenario.Page: 5 * time.Minute, scenario.Ticket: 8 * time.Minute}
	clearWithin = map[string]time.Duration{scenario.Page: 5 * time.Minute, scenario.Ticket: 10 * time.Minute}
)

const (
	// warmUp is healthy load before the fault, with nothing firing: eight
	// scrapes, so every SLI series has samples and a rate, and a whole
	// delta heap profile of the loaded gateway that ends 10 s or more
	// before the fault. The load starts as the pager's first delta (of the
	// idle gateway) ends, and a delta is taken every 30 s for 10 s, so the
	// first under load ends 30 s later. The pager puts the burn's start
	// where its short window last counted no error, less a step: up to 9 s
	// before the fault (the recording's lag) and 10 s after. After a
	// warm-up of 30 s that delta ended 0–3 s before the fault, a start
	// before its end made the idle delta the "before", and a page whose
	// heap did not change read as if every function had grown.
	warmUp = 40 * time.Second
	// idleQuiet is how long the none row's stack, its load stopped, must
	// fire nothing: every page pair's short window (the longest is 2m)
	// empty of traffic, one scrape and one evaluation (5 s each) and
	// Alertmanager's group_wait (10 s), and 10 s more.
	idleQuiet = 2*time.Minute + 30*time.Second
)

// A result is one row of the matrix.
type result struct {
	name, expected string
	build          variant.Variant
	fired          []string // per expected alert: seconds from injection to each source
	burn           string   // expected → measured
	silent         string
	resolved       string
	pages          []string // the incidents to open in a browser once no row is watching
	err            error
}

// matrixShape is the traffic of the fixed-build scenarios. Their faults,
// not the build, make the burn, so nothing needs calibrating: the default
// mix at 25 streams/s, 1 long generation in 100, which the fixed build
// streams in milliseconds.
const matrixShape = `{"rate": 25, "long_every": 100, "long_events": 14000, "short_min": 300, "short_max": 800, "seed": 1,
  "why": ["the e2e matrix's fixed shape: the fixed build keeps every stream far under 600 ms"]}`

// TestScenarios runs every scenario of shared/scenario's table and holds
// each to its row: exactly the alerts it must fire, in Prometheus,
// Alertmanager and the pager; every other alert of the three SLOs silent
// throughout; the measured burn near the derived one; and the alerts
// resolved once the fault is cleared.
//
// Each fixed-build row runs in a lab of its own, all at once: a lab is a
// few percent of a core, and each row's time is its windows' (fire, hold,
// clear), so rows one after another on one lab would take the sum of
// those times where side by side they take the longest. The regression
// row (testRegression), whose baseline gateway calibrates its load to
// this machine's CPU, starts once every fixed-build row has cleared its
// fault: it then runs beside the creep's wait for its ticket to resolve
// (its 8m window forgetting the climb, ~4 min) and the none row's idle
// stack, each a fixed gateway at the lab's rate or no traffic at all, and
// not beside any fault's burst. Nothing that takes the CPU for seconds
// (a backtest, Chromium) runs while any row watches its alerts.
func TestScenarios(t *testing.T) {
	root, _ := filepath.Abs("../..")
	shape := filepath.Join(t.TempDir(), "shape.json")
	if err := os.WriteFile(shape, []byte(matrixShape), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	t0 := time.Now()
	var (
		out      sync.Mutex
		timeline []string
	)
	say := func(name, format string, args ...any) {
		out.Lock()
		defer out.Unlock()
		line := fmt.Sprintf("t+%-5s %-16s %s", time.Since(t0).Round(time.Second), name, fmt.Sprintf(format, args...))
		fmt.Println(line)
		timeline = append(timeline, line)
	}
	// Built once, before any lab runs: a lab compiling beside another's
	// warm-up starves its gateway (first tokens over 250 ms).
	bin := filepath.Join(t.TempDir(), "bin")
	if err := Build(ctx, root, bin); err != nil {
		t.Fatal(err)
	}
	replay, err := buildStrategies(ctx, root, bin)
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg         sync.WaitGroup
		outcomes   []*result
		labs       []*Lab
		rows       []scenario.Scenario
		regression *result
	)
	// SCENARIOS=a,b runs only those (make e2e SCENARIOS=…).
	only := strings.FieldsFunc(os.Getenv("SCENARIOS"), func(r rune) bool { return r == ',' || r == ' ' })
	for _, sc := range scenario.All() {
		if len(only) > 0 && !slices.Contains(only, sc.Name) {
			continue
		}
		if sc.Build != variant.Fixed {
			regression = &result{name: sc.Name, build: sc.Build, expected: sc.Expected(), silent: "—", resolved: "—", burn: "—"}
			continue
		}
		r := &result{name: sc.Name, build: sc.Build, expected: sc.Expected()}
		outcomes = append(outcomes, r)
		dir := t.TempDir()
		l, err := Start(ctx, Config{Root: root, Dir: dir, Addrs: freeAddrs(t), Variant: sc.Build, Shape: shape, Log: io.Discard, Bin: bin, NoLoad: true})
		if err != nil {
			t.Fatalf("%s: %v", sc.Name, err)
		}
		defer l.Stop()
		say(sc.Name, "lab up in %s", dir)
		labs, rows = append(labs, l), append(rows, sc)
	}
	// Every lab is up before any load starts, so no start-up work overlaps
	// a warm-up.
	cleared := make(chan struct{}, len(labs))
	for i, l := range labs {
		sc, r := rows[i], outcomes[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			var once sync.Once
			clearedOnce := func() { once.Do(func() { cleared <- struct{}{} }) }
			defer clearedOnce() // a row that fails before its clear
			defer l.StopLoad()  // the lab stays up for the browser
			if r.err = l.StartLoad(ctx); r.err != nil {
				return
			}
			r.err = runScenario(ctx, l, sc, r, clearedOnce, func(format string, args ...any) { say(sc.Name, format, args...) })
			if r.err != nil {
				say(sc.Name, "FAILED: %v", r.err)
				for _, name := range []string{Gateway, Upstream, Prometheus, Alertmanager, Pager} {
					say(sc.Name, "---- last lines of %s ----\n%s", name, l.Tail(name, 8))
				}
			}
		}()
	}
	ended := make(chan struct{})
	go func() { wg.Wait(); close(ended) }()
	if regression != nil {
		for range labs {
			<-cleared
		}
		say(regression.name, "starting once every fixed-build row has cleared its fault")
		if !t.Run(regression.name, func(t *testing.T) { testRegression(t, ctx, root, bin, replay, regression, ended) }) && regression.err == nil {
			regression.err = errors.New("failed before its run began: see its log")
		}
	}
	<-ended
	// The backtest and the pages in a browser, once no row watches its
	// alerts: each takes this 2-core machine's CPU for seconds, which every
	// lab's streams would count. One Chromium start (3 s) beside a baseline
	// lab held 23 streams' first tokens over 250 ms, where the lab alone
	// had none in 5,304, and stretched ordinary streams past 600 ms.
	for i, r := range outcomes {
		if r.err == nil {
			r.err = agreesWithBacktest(ctx, labs[i], replay, func(format string, args ...any) { say(r.name, format, args...) })
		}
		for _, id := range r.pages {
			if err := inABrowser(ctx, labs[i].Probe, id, r.name, ""); err != nil && r.err == nil {
				r.err = err
			}
		}
		labs[i].Stop()
	}
	if regression != nil {
		outcomes = append([]*result{regression}, outcomes...)
	}
	var matrix strings.Builder
	printMatrix(io.MultiWriter(os.Stdout, &matrix), outcomes)
	for _, r := range outcomes {
		if r.err != nil {
			t.Errorf("%s: %v", r.name, r.err)
		}
	}
	if dir := os.Getenv(results.EnvDir); dir != "" && !t.Failed() {
		if err := results.Write(filepath.Join(dir, "scenarios-e2e.md"), results.Run{
			Title: "The scenario matrix", By: "`make e2e SAVE=1` (stack/lab, TestScenarios)",
			Root: root, Date: t0,
			Notes: []string{"each lab runs one fixed-build scenario, all at once; the regression's starts once they have cleared their faults; times are from the fault's injection or clear",
				"the table, then the timeline of every lab"},
			Body: strings.TrimLeft(matrix.String(), "\n") + "\n" + strings.Join(timeline, "\n"),
		}); err != nil {
			t.Error(err)
		}
	}
}

// runScenario: warm up, inject, see the alerts fire everywhere, hold the
// fault for its Observe time, measure the burn, clear, see them resolve.
func runScenario(ctx context.Context, l *Lab, sc scenario.Scenario, r *result, cleared func(), say func(string, ...any)) error {
	started := time.Now()
	w := newWatch(l, sc)
	ended, stop := w.follow(ctx)
	defer stop() //nolint:errcheck // a failure's cleanup; settle reads it
	// wait returns when cond holds, or fails at the deadline or on a read
	// error; with no cond it waits d.
	wait := func(d time.Duration, what string, cond func() bool) error {
		for deadline := time.Now().Add(d); cond == nil || !cond(); {
			if time.Now().After(deadline) {
				if cond == nil {
					return nil
				}
				return fmt.Errorf("%s: not within %s", what, d)
			}
			select {
			case <-ended:
				if err := stop(); err != nil {
					return err
				}
				return fmt.Errorf("%s: the watch ended: %w", what, ctx.Err())
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
		}
		return nil
	}
	settle := func() error {
		if err := stop(); err != nil {
			return err
		}
		r.silent = "yes"
		if v := w.violations(); len(v) > 0 {
			r.silent = "NO: " + strings.Join(v, "; ")
			return fmt.Errorf("alerts it must not fire: %s", strings.Join(v, "; "))
		}
		return nil
	}

	if err := wait(warmUp, "warm-up", nil); err != nil {
		return err
	}
	injected := time.Now()
	w.inject(injected)
	if err := l.SetScenario(ctx, sc.Name); err != nil {
		return err
	}
	say("injected after %s of healthy load: %s", warmUp, sc.What)
	for _, a := range sc.Fires {
		if err := wait(firesWithin[a.Severity], a.String()+" firing in Prometheus, Alertmanager and the pager", func() bool { return w.everywhere(a, true) }); err != nil {
			r.fired = append(r.fired, "not within "+firesWithin[a.Severity].String())
			return err
		}
		r.fired = append(r.fired, w.firedAfter(a))
		say("FIRED %s: %s", a, w.firedAfter(a))
	}
	// A stream-latency page of a fixed build tells its story, and its
	// heap verdict is that the gateway's heap did not change: every fault
	// here is the upstream's.
	var pages []string
	for _, a := range sc.Fires {
		if a.SLO != scenario.StreamLatency || a.Severity != scenario.Page {
			continue
		}
		id, err := tellsItsStory(ctx, l, a, say)
		if err != nil {
			return err
		}
		pages = append(pages, id)
	}
	for _, a := range sc.Fires {
		if a.SLO == scenario.CompletionLatency && a.Severity == scenario.Page {
			told, err := l.CheckProviderPage(ctx, injected, 90*time.Second)
			if err != nil {
				return err
			}
			for _, line := range told {
				say("PAGE %s", line)
			}
		}
		if a.Severity == scenario.Ticket {
			if err := ticketCarriesItsVerdict(ctx, l, a, say); err != nil {
				return err
			}
		}
	}
	if err := wait(time.Until(injected.Add(sc.Observe)), "observe", nil); err != nil {
		return err
	}
	burn, err := measureBurn(l, sc, time.Since(injected))
	r.burn = burn
	if err != nil {
		return err
	}
	say("burn over 2m after %s: %s", sc.Observe, burn)
	r.pages = pages
	clearedAt := time.Now()
	if err := l.SetScenario(ctx, scenario.None); err != nil {
		return err
	}
	cleared()
	var took []string
	for _, a := range sc.Fires {
		if err := wait(clearWithin[a.Severity], a.String()+" resolved in Prometheus, Alertmanager and the pager", func() bool {
			return w.everywhere(a, false) && pagerResolved(l, a)
		}); err != nil {
			r.resolved = "not within " + clearWithin[a.Severity].String()
			return err
		}
		took = append(took, fmt.Sprintf("%ds", int(time.Since(clearedAt).Seconds())))
	}
	r.resolved = strings.Join(took, ", ")
	if len(sc.Fires) == 0 {
		r.resolved = "—"
	}
	say("cleared; resolved after %s", r.resolved)
	if len(sc.Fires) == 0 {
		// The stack with no traffic: nothing starts firing.
		l.StopLoad()
		say("load stopped")
		if err := wait(idleQuiet, "idle", nil); err != nil {
			return err
		}
		say("no traffic for %s: nothing fired", idleQuiet)
	}
	if err := settle(); err != nil {
		return err
	}
	if err := firedOverTheRun(l, sc, time.Since(started)+time.Minute); err != nil {
		return err
	}
	return pagesOnce(l, sc)
}

// buildStrategies builds the strategies backtest (tools/strategies, its
// own module, out of go.work) into dir.
func buildStrategies(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "strategies")
	build := proc.Build{Dir: filepath.Join(root, "tools", "strategies"), Out: bin, Pkgs: []string{"./cmd/strategies"}, Env: []string{"GOWORK=off"}}
	if err := build.Run(ctx); err != nil {
		return "", err
	}
	return bin, nil
}

// agreesWithBacktest replays the run's own gateway samples through the
// strategies backtest (tools/strategies: the pinned Prometheus's rule
// engine, Sloth's lab rules) and holds every SLO's page and ticket to
// what this lab's Prometheus did: each fired within one scrape and one
// evaluation of the replay's time, or neither fired. The backtest's
// synthetic incidents start from a clean history, which a fresh lab does
// not have; its samples are the same, so the engine must agree.
func agreesWithBacktest(ctx context.Context, l *Lab, replay string, say func(string, ...any)) error {
	root := l.cfg.Root
	// The backtest replays the gateway's spec (tools/strategies); the
	// provider's SLO is not in it.
	for _, o := range scenario.GatewaySLOs {
		cmd := exec.CommandContext(ctx, replay, "-root", root, "-sloth", filepath.Join(root, "bin", "sloth"),
			"-windows", "prometheus/slo/windows/lab", "-replay", "http://"+l.cfg.Addrs.Prometheus, "-slo", o, "-since", "1h")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		say("backtest replay of %s: %s", o, strings.Join(strings.Fields(string(out)), " "))
		if err != nil {
			return fmt.Errorf("backtest replay of %s: %w: %s", o, err, strings.TrimSpace(stderr.String()))
		}
	}
	return nil
}

func printMatrix(w io.Writer, rs []*result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nscenario\tbuild\texpected\tfired (from injection: prom, am, pager)\tburn 2m (expected → measured)\tothers silent\tresolved (from clear)\tresult")
	for _, r := range rs {
		res := "ok"
		if r.err != nil {
			res = "FAIL"
		}
		fired := strings.Join(r.fired, "; ")
		if fired == "" {
			fired = "—"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.name, r.build, r.expected, fired, r.burn, r.silent, r.resolved, res)
	}
	_ = tw.Flush() // stdout and a buffer
}

// tellsItsStory finds the firing page of a in the pager, holds its
// story to a fixed build's (the pair that fired, the budget, real slow
// requests, and a heap that did not change) and its notifications to it,
// and returns its ID.
func tellsItsStory(ctx context.Context, l *Lab, a scenario.Alert, say func(string, ...any)) (string, error) {
	incs, err := l.Incidents()
	if err != nil {
		return "", err
	}
	for _, inc := range incs {
		if inc.SLO != a.SLO || inc.Severity != a.Severity || inc.Status != "firing" {
			continue
		}
		story, err := l.WaitStory(ctx, inc.ID, 90*time.Second)
		if err != nil {
			return "", err
		}
		told, err := story.Check("", l.Log(Gateway))
		if err != nil {
			return "", fmt.Errorf("the page's story: %w", err)
		}
		for _, line := range told {
			say("PAGE %s", line)
		}
		if err := l.CheckPage(story); err != nil {
			return "", err
		}
		note, err := l.Notification(ctx, l.cfg.Root, a.SLO, story)
		if err != nil {
			return "", err
		}
		say("NOTIFICATIONS (amtool):\n%s", note)
		return inc.ID, nil
	}
	return "", fmt.Errorf("no firing %s in the pager", a)
}

// ticketCarriesItsVerdict holds a ticket to being diagnosed as a page is:
// its facts carry how the heap's function grows with the streams' length,
// the verdict a creep's ticket is read for. The build here is the fixed
// one, whose largest function grows linearly or whose lengths varied too
// little to tell, so the check is that a verdict is there and names its
// function; `make timeline` holds the baseline's to (*Baseline).Append.
func ticketCarriesItsVerdict(ctx context.Context, l *Lab, a scenario.Alert, say func(string, ...any)) error {
	const within = 90 * time.Second
	for deadline := time.Now().Add(within); ; {
		incs, err := l.Incidents()
		if err != nil {
			return err
		}
		for _, inc := range incs {
			if inc.SLO != a.SLO || inc.Severity != a.Severity || inc.Status != "firing" || inc.Facts == nil {
				continue
			}
			h := inc.Facts.Heap
			if h == nil || h.Growth == nil || h.Growth.Function == "" || h.Growth.Words == "" {
				return fmt.Errorf("the ticket's facts carry no growth verdict: heap %+v, not read %q", h, inc.Facts.Errors)
			}
			say("TICKET verdict: %s", h.Growth.Words)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no firing %s with its facts in the pager within %s", a, within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}
