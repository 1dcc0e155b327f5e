package incident

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Facts are what the pager reads once, when a page fires, so the person
// paged finds the answers to their first questions on the incident:
// how fast the budget burned over each window pair of the alert (Pairs),
// how much budget is left and how long it lasts at that burn (Budget),
// which requests were slowest (Slowest), and what changed in the
// gateway's heap (Heap). The burn and the budget are read from Prometheus
// as of the alert's start, the moment its rule found the burn, not as of
// whenever the notification arrived; whatever could not be read is said in
// Errors, in words.
type Facts struct {
	// TakenAt is when the pager finished reading them.
	TakenAt time.Time `json:"taken_at"`
	// Pairs is each window pair of the alert's burn_windows annotation,
	// in its order, with the burn over its two windows.
	Pairs []PairBurn `json:"pairs"`
	// Pair is the index in Pairs of the pair the budget, the slowest
	// requests and the heap are read over: the first that fired or, with
	// none over its factor, the slowest (the longest long window); -1
	// with no pairs.
	Pair   int     `json:"pair"`
	Budget *Budget `json:"budget,omitempty"`
	// BurnFrom is the start of the burn window: a scrape before the last
	// moment, within twice Pair's long window before the alert's start,
	// that its short window was not burning (at most 1x, or no traffic);
	// the alert's start less the long window when Prometheus cannot tell.
	// The slowest requests and the heap's delta "during" are looked for
	// between it and the alert's start, the delta "before" before it.
	BurnFrom time.Time `json:"burn_from,omitzero"`
	// ExemplarQuery is the series selector whose exemplars were asked for
	// (the alert's exemplars annotation); "" when the alert names none.
	ExemplarQuery string `json:"exemplar_query,omitempty"`
	// Slowest are the slowest requests of the burn window, slowest
	// first, at most ten, one per request ID.
	Slowest []Exemplar  `json:"slowest"`
	Heap    *HeapChange `json:"heap,omitempty"`
	// GC is how much of the process's CPU the garbage collector took
	// during the burn window and before it.
	GC *GC `json:"gc,omitempty"`
	// Errors says what could not be read, and why.
	Errors []string `json:"errors,omitempty"`
}

// PairBurn is one window pair of a multi-window burn-rate alert and the
// burn over each of its windows when the alert fired. A burn rate is the
// error ratio over a window divided by the error budget: 1 spends exactly
// the budget over the SLO period.
type PairBurn struct {
	// Short and Long are the windows as Prometheus writes durations: "2m".
	Short string `json:"short"`
	Long  string `json:"long"`
	// ShortBurn and LongBurn are null when Prometheus had no figure: no
	// traffic in the window (0/0), or no series.
	ShortBurn *float64 `json:"short_burn"`
	LongBurn  *float64 `json:"long_burn"`
	Factor    float64  `json:"factor"`
	// Fired is whether both burns are over Factor: the pair the alert
	// fired through.
	Fired bool `json:"fired"`
}

// Windows is the pair as the burn_windows annotation writes it.
func (p PairBurn) Windows() string {
	return fmt.Sprintf("%s/%s over %sx", p.Short, p.Long, Number(p.Factor))
}

// Budget is the SLO's error budget when the alert fired.
//
//	spent % = 100 × the bad events of the period so far ÷ the bad events
//	          the budget allows in the whole period (shared/slo.SpentExpr:
//	          the part of the period before the history counts as no error)
//	left %  = 100 − spent %
//	runs out in = (left % / 100) × period / b
//
// where b is the burn over the long window of the pair that fired (or of
// the slowest pair, with none over its factor): at that burn, what is left
// lasts that long. There is none to run out with nothing left, and it
// never runs out at a burn of 0.
type Budget struct {
	SpentPct float64 `json:"spent_pct"`
	LeftPct  float64 `json:"left_pct"`
	// Period is the SLO period as Prometheus writes durations ("10h",
	// "30d"); "" when Prometheus had no slo:time_period:days.
	Period        string  `json:"period,omitempty"`
	PeriodSeconds float64 `json:"period_seconds,omitempty"`
	// History is how much of the period the figures rest on
	// (shared/slo.HistoryExpr), as Prometheus writes durations; "" when
	// unknown. Under the period, spent is of a period mostly not yet seen.
	History        string  `json:"history,omitempty"`
	HistorySeconds float64 `json:"history_seconds,omitempty"`
	// Burn is b, over the window BurnWindow; null when unknown.
	Burn       *float64 `json:"burn"`
	BurnWindow string   `json:"burn_window,omitempty"`
	// RunsOutSeconds is null when it does not run out, or cannot be
	// told; RunsOut says it in words either way ("9h41m3s", "none left",
	// "not at this burn").
	RunsOutSeconds *float64 `json:"runs_out_seconds"`
	RunsOut        string   `json:"runs_out"`
}

// Exemplar is one request Prometheus kept as an exemplar of a latency
// histogram: the gateway attaches its request ID and tenant.
type Exemplar struct {
	RequestID string    `json:"request_id"`
	Tenant    string    `json:"tenant"`
	Seconds   float64   `json:"seconds"`
	At        time.Time `json:"at"`
}

// HeapChange is how the gateway's allocation changed from a short delta
// heap profile taken before the burn to one taken during it.
type HeapChange struct {
	// Changed is whether a function's allocation rate grew past the
	// threshold; Function is that function, and Before and During its
	// flat alloc_space rates in bytes per second.
	Changed     bool      `json:"changed"`
	Function    string    `json:"function,omitempty"`
	Words       string    `json:"words,omitempty"`
	Before      float64   `json:"before"`
	During      float64   `json:"during"`
	TotalBefore float64   `json:"total_before"`
	TotalDuring float64   `json:"total_during"`
	Threshold   float64   `json:"threshold,omitempty"`
	BeforeFrom  time.Time `json:"before_from,omitzero"`
	BeforeTo    time.Time `json:"before_to,omitzero"`
	DuringFrom  time.Time `json:"during_from,omitzero"`
	DuringTo    time.Time `json:"during_to,omitzero"`
	// BeforeFile and DuringFile are the two delta profiles, relative to
	// the data directory like Profile.File.
	BeforeFile string `json:"before_file,omitempty"`
	DuringFile string `json:"during_file,omitempty"`
	// Growth is how a function's bytes per stream grow with the stream's
	// length, fitted over the pager's delta profiles: Function's when it
	// changed, else the largest's (a creep changes nothing suddenly); nil
	// when the pager holds no delta.
	Growth *Growth `json:"growth,omitempty"`
	// Error is why there is no comparison.
	Error string `json:"error,omitempty"`
}

// Growth is how a function's bytes per stream grow with the stream's
// length n (events), fitted as n^Exponent over the delta heap profiles the
// pager holds and the streams the gateway counted in each of their
// windows. Words says the verdict, or plainly why the data cannot carry
// one (too few windows, too little spread in n, no power law).
type Growth struct {
	// Function is the function fitted, in full.
	Function string `json:"function"`
	Fitted   bool   `json:"fitted"`
	// Exponent is k in bytes per stream ∝ n^k, StdErr its standard error,
	// and R2 how much of the windows' bytes (their logarithm) the fitted
	// law explains.
	Exponent float64 `json:"exponent,omitempty"`
	StdErr   float64 `json:"std_err,omitempty"`
	R2       float64 `json:"r2,omitempty"`
	// Windows is how many delta windows the fit read, Spread how many
	// times their largest mean place of an event, Σ(2i-1)/Σ1 (over whole
	// streams Σn²/Σn, the length-weighted mean length), is their smallest.
	Windows int     `json:"windows"`
	Spread  float64 `json:"spread,omitempty"`
	Words   string  `json:"words,omitempty"`
	// Error is why nothing was fitted: the stream counts could not be read.
	Error string `json:"error,omitempty"`
}

// GC is the garbage collector's share of a process's CPU, and its pace,
// over the burn window (During) and as long a window before it (Before),
// read from the Go runtime metrics its Prometheus job exports. Shares are
// fractions 0–1 of the CPU the process used; the p99s are in seconds. A
// nil figure is one Prometheus had no value for.
type GC struct {
	Job                                        string    `json:"job"`
	CPUShareBefore                             *float64  `json:"cpu_share_before"`
	CPUShareDuring                             *float64  `json:"cpu_share_during"`
	AssistShareBefore                          *float64  `json:"assist_share_before"`
	AssistShareDuring                          *float64  `json:"assist_share_during"`
	CyclesPerSecondBefore                      *float64  `json:"cycles_per_second_before"`
	CyclesPerSecondDuring                      *float64  `json:"cycles_per_second_during"`
	PauseP99Before                             *float64  `json:"pause_p99_seconds_before"`
	PauseP99During                             *float64  `json:"pause_p99_seconds_during"`
	SchedLatencyP99Before                      *float64  `json:"sched_latency_p99_seconds_before"`
	SchedLatencyP99During                      *float64  `json:"sched_latency_p99_seconds_during"`
	BeforeFrom, BeforeTo, DuringFrom, DuringTo time.Time `json:"-"`
	Words                                      string    `json:"words,omitempty"`
	// Error is what could not be read.
	Error string `json:"error,omitempty"`
}

// GCAfter is the collector's share of the process's CPU once the page
// resolved, over the minute after the resolve: with the fix deployed, the
// share falls back from the burn's.
type GCAfter struct {
	Job         string    `json:"job"`
	From        time.Time `json:"from"`
	To          time.Time `json:"to"`
	CPUShare    *float64  `json:"cpu_share"`
	AssistShare *float64  `json:"assist_share"`
	Words       string    `json:"words,omitempty"`
	Error       string    `json:"error,omitempty"`
}

// Say is the after-view in words: "after the resolve GC took 6% of
// gateway's CPU, mark assist 0%".
func (g *GCAfter) Say() string {
	if g.CPUShare == nil {
		return "after the resolve: no GC figures for job " + g.Job + " in Prometheus"
	}
	assist := "n/a"
	if g.AssistShare != nil {
		assist = fmt.Sprintf("%.0f%%", 100**g.AssistShare)
	}
	return fmt.Sprintf("after the resolve GC took %.0f%% of %s's CPU, mark assist %s", 100**g.CPUShare, g.Job, assist)
}

// Say is the figures in words, as the page and the notification say them:
// "GC took 61% of gateway's CPU during the burn (4% before); mark assist,
// which runs on the request goroutines, 23% (1% before); 12.3 GC cycles/s
// (0.4 before); scheduling latency p99 9.1 ms (200 µs before)".
func (g *GC) Say() string {
	pct := func(x *float64) string {
		if x == nil {
			return "n/a"
		}
		return fmt.Sprintf("%.0f%%", 100**x)
	}
	ms := func(x *float64) string {
		switch {
		case x == nil:
			return "n/a"
		case *x < 0.001:
			return fmt.Sprintf("%.0f µs", 1e6**x)
		}
		return fmt.Sprintf("%.1f ms", 1000**x)
	}
	rate := func(x *float64) string {
		if x == nil {
			return "n/a"
		}
		return fmt.Sprintf("%.1f", *x)
	}
	if g.CPUShareDuring == nil && g.CPUShareBefore == nil {
		return "no GC figures for job " + g.Job + " in Prometheus"
	}
	return fmt.Sprintf("GC took %s of %s's CPU during the burn (%s before); mark assist, which runs on the request goroutines, %s (%s before); "+
		"%s GC cycles/s (%s before); stop-the-world pause p99 %s (%s before); scheduling latency p99 %s (%s before)",
		pct(g.CPUShareDuring), g.Job, pct(g.CPUShareBefore), pct(g.AssistShareDuring), pct(g.AssistShareBefore),
		rate(g.CyclesPerSecondDuring), rate(g.CyclesPerSecondBefore), ms(g.PauseP99During), ms(g.PauseP99Before),
		ms(g.SchedLatencyP99During), ms(g.SchedLatencyP99Before))
}

// Chosen is the pair the budget, the slowest requests and the heap were
// read over (Pair), if any.
func (f *Facts) Chosen() (PairBurn, bool) {
	if f == nil || f.Pair < 0 || f.Pair >= len(f.Pairs) {
		return PairBurn{}, false
	}
	return f.Pairs[f.Pair], true
}

// Words is the budget as the page says it: "7.1% of the 10h budget spent
// over the last 4m, 92.9% left", naming the history only while it is
// shorter than the period.
func (b *Budget) Words() string {
	of := "the budget"
	if b.Period != "" {
		of = "the " + b.Period + " budget"
	}
	over := ""
	if b.History != "" && b.HistorySeconds < b.PeriodSeconds {
		over = " over the last " + b.History
	}
	return fmt.Sprintf("%.1f%% of %s spent%s, %.1f%% left", b.SpentPct, of, over, b.LeftPct)
}

// Summary is the facts in one line, for the timeline and the log.
func (f *Facts) Summary() string {
	var parts []string
	from := "facts read"
	if f.Budget != nil || len(f.Slowest) > 0 || slices.ContainsFunc(f.Pairs, func(p PairBurn) bool { return p.ShortBurn != nil || p.LongBurn != nil }) {
		from = "facts read from Prometheus"
	}
	if p, ok := f.Chosen(); ok {
		burns := fmt.Sprintf("%s %s and %s %s", p.Short, Burn(p.ShortBurn), p.Long, Burn(p.LongBurn))
		if p.Fired {
			parts = append(parts, fmt.Sprintf("fired through %s: %s", p.Windows(), burns))
		} else {
			parts = append(parts, fmt.Sprintf("no pair over its factor; %s: %s", p.Windows(), burns))
		}
	}
	if b := f.Budget; b != nil {
		parts = append(parts, b.Words()+", runs out: "+b.RunsOut)
	}
	if n := len(f.Slowest); n > 0 {
		parts = append(parts, fmt.Sprintf("slowest request %.3f s (%d listed)", f.Slowest[0].Seconds, n))
	}
	if h := f.Heap; h != nil {
		if h.Error != "" {
			parts = append(parts, "heap not compared")
		} else {
			parts = append(parts, "heap: "+h.Words)
		}
		if g := h.Growth; g != nil && g.Words != "" {
			parts = append(parts, "growth: "+g.Words)
		}
	}
	if g := f.GC; g != nil && g.Error == "" {
		parts = append(parts, g.Words)
	}
	if n := len(f.Errors); n > 0 {
		parts = append(parts, fmt.Sprintf("%d not read: %s", n, strings.Join(f.Errors, "; ")))
	}
	if len(parts) == 0 {
		return from + ": none"
	}
	return from + ": " + strings.Join(parts, "; ")
}

// Burn is a burn rate as a page shows it: "8.1x", or "no data".
func Burn(v *float64) string {
	if v == nil {
		return "no data"
	}
	return fmt.Sprintf("%.1fx", *v)
}

// Number is f without trailing zeros: 14.4, 6.
func Number(f float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", f), "0"), ".")
}
