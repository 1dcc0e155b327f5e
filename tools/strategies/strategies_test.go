package strategies

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"burnlab/shared/scenario"
)

const specPath = "../../prometheus/slo/llm-gateway.yml"

// slothBin is the pinned Sloth CLI; `make strategies` builds it and says
// where in SLOTH.
func slothBin(t *testing.T) string {
	t.Helper()
	p := os.Getenv("SLOTH")
	if p == "" {
		p = "../../bin/sloth"
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no Sloth CLI at %s (make strategies builds it into bin/): %v", p, err)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

func lab(t *testing.T) Windows {
	t.Helper()
	w, err := LoadWindows("../../prometheus/slo/windows/lab", 5*time.Second, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func load(t *testing.T, name string) (Spec, SLO) {
	t.Helper()
	s, err := LoadSpec(specPath)
	if err != nil {
		t.Fatal(err)
	}
	o, err := s.SLO(name)
	if err != nil {
		t.Fatal(err)
	}
	return s, o
}

// Production is typed in from Sloth's built-in table: Sloth's rules for
// it must have exactly these windows and factors.
func TestProductionIsSlothsTable(t *testing.T) {
	spec, o := load(t, scenario.StreamLatency)
	w := Production()
	groups, err := spec.Sloth(context.Background(), slothBin(t), w, o.Name)
	if err != nil {
		t.Fatal(err)
	}
	var alerts []string
	for _, g := range groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				alerts = append(alerts, r.Labels["severity"]+": "+r.Expr)
			}
		}
	}
	all := strings.Join(alerts, "\n")
	for _, p := range w.Pairs {
		for _, win := range []time.Duration{p.Short, p.Long} {
			want := regexp.MustCompile(`slo:sli_error:ratio_rate` + dur(win) + `\{[^}]*\} > \(` + regexp.QuoteMeta(num(p.Factor)) + ` \*`)
			if !want.MatchString(all) {
				t.Errorf("%s: Sloth's rules have no %s window at %gx:\n%s", p.Name, dur(win), p.Factor, all)
			}
		}
	}
}

// The expected values are the workbook's formulas: a constant burn b from
// a clean history fires a window W with threshold k at W·k/b and resets
// W·(1 − k/b) after the fault ends; a multiwindow pair is its long
// window's to fire and its short window's to reset.
// productionStrategies are every strategy of the stream-latency SLO under
// the production windows, by key.
func productionStrategies(t *testing.T) (SLO, Windows, map[string]Strategy) {
	t.Helper()
	spec, o := load(t, scenario.StreamLatency)
	w := Production()
	ss, err := All(context.Background(), slothBin(t), spec, o, w)
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]Strategy{}
	for _, s := range ss {
		byKey[s.Key] = s
	}
	return o, w, byKey
}

func TestExpectIsTheWorkbooksArithmetic(t *testing.T) {
	o, w, byKey := productionStrategies(t)
	const b = 10.0
	in := Incident{Name: "constant", SLO: o.Name, Phases: []scenario.Step{{Share: b * o.Budget}}, Duration: 12 * time.Hour}
	start, end := w.Longest(), w.Longest()+in.Duration+w.Longest()+2*time.Hour
	hours := func(h float64) time.Duration { return time.Duration(h * float64(time.Hour)) }
	for _, tc := range []struct {
		strategy       string
		fire, reset    time.Duration
		detected       string
		budgetSpentPct float64
	}{
		// The 1h/14.4x pair never fires at 10x; the 6h/6x pair fires at
		// 6h·6/10 = 3.6h, spending 10·3.6h/720h = 5 % of the budget. The
		// last to reset is the 3d/6h ticket at 1x, with its short window:
		// 6h·(1 − 1/10).
		{"6-multiwindow", hours(3.6), hours(6 * 0.9), scenario.Page, 5},
		// Approach 5 resets with its slowest long window, the 3-day
		// ticket at 1x: 3d·(1 − 1/10).
		{"5-multi", hours(3.6), hours(72 * 0.9), scenario.Page, 5},
		// Approach 2: 36h·1/10 and 36h·(1 − 1/10).
		{"2-window", hours(3.6), hours(36 * 0.9), scenario.Page, 5},
		// Approach 1: 10m·1/10.
		{"1-target", time.Minute, 9 * time.Minute, scenario.Page, 10 * 1.0 / 60 / 720 * 100},
	} {
		got := Expect(byKey[tc.strategy], Case{Windows: w, SLO: o, Incident: in, Traffic: Traffic{Rate: 25}}, start, end, time.Second)
		if got.Detected != tc.detected || got.Detection == nil || absDur(*got.Detection-tc.fire) > 2*time.Second {
			t.Errorf("%s: expected %s at %s, the arithmetic says %s at %s", tc.strategy, got.Detected, ptr(got.Detection), tc.detected, tc.fire)
			continue
		}
		if got.Reset == nil || absDur(*got.Reset-tc.reset) > 2*time.Second {
			t.Errorf("%s: expected reset %s, the arithmetic says %s", tc.strategy, ptr(got.Reset), tc.reset)
		}
		if s := *got.BudgetSpent * 100; s < tc.budgetSpentPct*0.99 || s > tc.budgetSpentPct*1.01 {
			t.Errorf("%s: expected %.4g %% of the budget spent, the arithmetic says %.4g %%", tc.strategy, s, tc.budgetSpentPct)
		}
	}
	if got := Expect(byKey["4-burn"], Case{Windows: w, SLO: o, Incident: in, Traffic: Traffic{Rate: 25}}, start, end, time.Second); got.Detected != "nothing" {
		t.Errorf("4-burn: 36x never fires at 10x, expected says %s", got.Detected)
	}
}

// The write-up's three days tickets before it pages, by the arithmetic of
// its staircase: in hour i the burn is 10(i+1)/72. The 3d/6h ticket at 1x
// reads the mean since a clean start, (10/72)·h(h+1)/2 over 72 h, which
// passes 1 at h(h+1) = 1036.8: h = 31.7 h. The 6h/30m page at 6x needs the
// 30-minute burn over 6x (hour 43 on, 6.11x) and the 6-hour mean over it,
// which comes at 45.7 h. So the ticket leads the page by 14 h.
func TestTheWriteupTicketsBeforeItPages(t *testing.T) {
	o, w, byKey := productionStrategies(t)
	in := writeup(w, o.Budget)
	if in.Duration != 72*time.Hour || len(in.Phases) != writeupSteps || in.Share(71*time.Hour) != 10*o.Budget {
		t.Fatalf("the write-up's incident: %s over %d steps, ending at a share of %g: want 72h, %d steps, %g", in.Duration, len(in.Phases), in.Share(71*time.Hour), writeupSteps, 10*o.Budget)
	}
	start := w.Longest()
	got := Expect(byKey[Shipped], Case{Windows: w, SLO: o, Incident: in, Traffic: Traffic{Rate: 25}}, start, start+in.Duration+w.Longest(), time.Minute)
	hours := func(h float64) time.Duration { return time.Duration(h * float64(time.Hour)) }
	for _, c := range []struct {
		what string
		at   *time.Duration
		want time.Duration
	}{{"ticket", got.FirstTicket, hours(31.7)}, {"page", got.FirstPage, hours(45.7)}} {
		if c.at == nil || absDur(*c.at-c.want) > 3*time.Minute {
			t.Errorf("the shipped rules' first %s at %s, the arithmetic says %s", c.what, ptr(c.at), c.want)
		}
	}
	if led, ok := lead(got); !ok || absDur(led-14*time.Hour) > 5*time.Minute {
		t.Errorf("the ticket's lead: %s (%v), want 14h", led, ok)
	}
	if d := detection(got); !strings.HasPrefix(d, "T 1d7h4") || !strings.Contains(d, ", P 1d21h4") || !strings.HasSuffix(d, "(14h lead)") {
		t.Errorf("the cell reads %q, want the ticket, the page and the lead", d)
	}
}

func ptr(d *time.Duration) string {
	if d == nil {
		return "never"
	}
	return d.String()
}

// The backtest is Prometheus's rule engine on exact shares, the expected
// value the same rules as arithmetic: at the lab's traffic they must agree
// on every cell, within one scrape and one evaluation.
func TestBacktestAgreesWithTheArithmetic(t *testing.T) {
	spec, _ := load(t, scenario.StreamLatency)
	w := lab(t)
	tab, err := Run(context.Background(), Config{Spec: spec, Windows: []Windows{w}, Sloth: slothBin(t), Workers: 2, Seed: 1,
		Traffic: []Traffic{{Name: "lab", Rate: 25}}, Incidents: []string{"regression", "upstream-errors", "slow-first-token", "creep", "spike"}})
	if err != nil {
		t.Fatal(err)
	}
	tol := w.Scrape + w.Eval
	checked := 0
	for _, c := range tab.Cells {
		if c.Incident == HealthyName {
			if c.FalsePagesPerWeek != 0 && c.Strategy == "6-multiwindow" {
				t.Errorf("the shipped rules paged %g times in a healthy week at the lab's traffic", c.FalsePagesPerWeek)
			}
			continue
		}
		m, e := c.Measured, c.Expected
		if m.Detected != e.Detected {
			t.Errorf("%s on %s: measured %s, expected %s", c.Strategy, c.Incident, m.Detected, e.Detected)
			continue
		}
		for _, d := range []struct {
			what string
			m, e *time.Duration
		}{{"detection", m.Detection, e.Detection}, {"reset", m.Reset, e.Reset}} {
			if (d.m == nil) != (d.e == nil) || (d.m != nil && absDur(*d.m-*d.e) > tol) {
				t.Errorf("%s on %s: %s measured %s, expected %s (within %s)", c.Strategy, c.Incident, d.what, ptr(d.m), ptr(d.e), tol)
			}
			checked++
		}
	}
	if checked < 40 {
		t.Fatalf("only %d figures compared", checked)
	}
}

// breaking multiplies every threshold a rule compares with by 100.
var threshold = regexp.MustCompile(`([<>]=?\s*\(?)([0-9]+(?:\.[0-9]+)?)`)

func breakRules(ss []Strategy) []Strategy {
	var out []Strategy
	for _, s := range ss {
		b := s
		b.Groups = nil
		for _, g := range s.Groups {
			g.Rules = append(g.Rules[:0:0], g.Rules...)
			for i, r := range g.Rules {
				if r.Alert == "" {
					continue
				}
				g.Rules[i].Expr = threshold.ReplaceAllStringFunc(r.Expr, func(m string) string {
					sub := threshold.FindStringSubmatch(m)
					v, _ := strconv.ParseFloat(sub[2], 64)
					return sub[1] + num(v*100)
				})
				g.Rules[i].For = 0
			}
			b.Groups = append(b.Groups, g)
		}
		out = append(out, b)
	}
	return out
}

// Each strategy's rule matters: with its thresholds raised a
// hundredfold, a cell it fired in goes silent. Two faults of the test's
// own make the naive alerts and approach 4 fire at all: 5 % of streams
// failing (a 50x burn; 2.5 % 503s) and 5 % slow (p99 over 600 ms).
func TestEveryRuleMatters(t *testing.T) {
	spec, _ := load(t, scenario.StreamLatency)
	w := lab(t)
	ctx := context.Background()
	fired := map[string]bool{}
	for _, in := range []Incident{
		{Name: "outage", SLO: scenario.Availability, Phases: []scenario.Step{{Share: 0.05}}, Duration: 10 * time.Minute},
		{Name: "tail", SLO: scenario.StreamLatency, Phases: []scenario.Step{{Share: 0.05}}, Duration: 10 * time.Minute},
	} {
		o, err := spec.SLO(in.SLO)
		if err != nil {
			t.Fatal(err)
		}
		ss, err := All(ctx, slothBin(t), spec, o, w)
		if err != nil {
			t.Fatal(err)
		}
		tr := Traffic{Name: "lab", Rate: 25}
		whole, err := Backtest(ctx, Case{Windows: w, SLO: o, Incident: in, Traffic: tr}, ss, 1)
		if err != nil {
			t.Fatal(err)
		}
		broken, err := Backtest(ctx, Case{Windows: w, SLO: o, Incident: in, Traffic: tr}, breakRules(ss), 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range ss {
			if len(whole.Spans[s.Key]) == 0 {
				continue
			}
			fired[s.Key] = true
			if len(broken.Spans[s.Key]) != 0 {
				t.Errorf("%s on %s: still fires with its thresholds raised a hundredfold: %+v", s.Key, in.Name, broken.Spans[s.Key])
			}
		}
	}
	for _, k := range []string{"naive-5xx", "naive-p99", "1-target", "2-window", "3-duration", "4-burn", "5-multi", "6-multiwindow", "6-unguarded", "6-guard-short"} {
		if !fired[k] {
			t.Errorf("%s fired on no incident: nothing shows its rule matters", k)
		}
	}
}

// The minimum-traffic guard (prometheus/rulegen/guard), through the engine: at a
// stream a second one slow stream pages through Sloth's pairs alone (the
// 1-minute window holds 60 streams, so it reads 16.7x), and through
// neither guard; a real 10x burn at the same traffic still pages through
// the shipped rules.
func TestTheGuardKeepsOneSlowStreamFromPaging(t *testing.T) {
	spec, _ := load(t, scenario.StreamLatency)
	w := lab(t)
	ctx := context.Background()
	o, err := spec.SLO(scenario.StreamLatency)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := All(ctx, slothBin(t), spec, o, w)
	if err != nil {
		t.Fatal(err)
	}
	// The replay of a live run evaluates the shipped strategy alone: it
	// is found by its key, and holds Sloth's recordings and the guard's.
	shipped, err := ByKey(ss, Shipped)
	if err != nil {
		t.Fatal(err)
	}
	var records []string
	for _, g := range shipped.Groups {
		for _, r := range g.Rules {
			records = append(records, r.Record)
		}
	}
	if !slices.Contains(records, "slo:sli_error:ratio_rate4m") || !slices.Contains(records, "slo:sli_events:increase4m") {
		t.Errorf("the shipped strategy records %q: want Sloth's error ratios and the guard's events", records)
	}
	if _, err := ByKey(ss, "7-none"); err == nil {
		t.Error("ByKey found a strategy that is not there")
	}
	tr := Traffic{Name: "1/s exact", Rate: 1}
	one := Incident{Name: "one slow stream", SLO: scenario.StreamLatency, Phases: []scenario.Step{{Share: 1}}, Duration: time.Second}
	h, err := Backtest(ctx, Case{Windows: w, SLO: o, Incident: one, Traffic: tr}, ss, 1)
	if err != nil {
		t.Fatal(err)
	}
	if pages(h.Spans["6-unguarded"]) == 0 {
		t.Error("Sloth's unguarded pairs did not page on one slow stream at 1/s: the test shows no guard at work")
	}
	for _, k := range []string{Shipped, "6-guard-short"} {
		if len(h.Spans[k]) != 0 {
			t.Errorf("%s fired on one slow stream at 1/s: %+v", k, h.Spans[k])
		}
	}
	burn := Incident{Name: "10x", SLO: scenario.StreamLatency, Phases: []scenario.Step{{Share: 10 * o.Budget}}, Duration: 10 * time.Minute}
	h, err = Backtest(ctx, Case{Windows: w, SLO: o, Incident: burn, Traffic: tr}, ss, 1)
	if err != nil {
		t.Fatal(err)
	}
	if pages(h.Spans[Shipped]) == 0 {
		t.Errorf("the shipped rules missed a 10x burn at 1/s: %+v", h.Spans[Shipped])
	}
}
