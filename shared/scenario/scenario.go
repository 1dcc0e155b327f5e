// Package scenario is the lab's table of named faults: what the synthetic
// upstream injects for each, which gateway build each runs against, the burn
// rate each SLO should show while it is injected — derived from the SLO
// before anything is measured — and the alerts that must fire. The upstream
// injects from it, `make scenario` and the e2e matrix read it, and the
// docs/scenarios.md's scenario table says the same.
package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"burnlab/shared/slo"
	"burnlab/shared/variant"
)

// The SLOs of prometheus/slo/llm-gateway.yml, by their sloth_slo label.
const (
	StreamLatency = "stream-latency"
	Availability  = "availability"
	TTFT          = "ttft"
)

// CompletionLatency is the synthetic provider's own SLO, of
// prometheus/slo/llm-provider.yml: its non-streaming answers to the
// clients that call it directly, which the gateway never carries.
const CompletionLatency = "completion-latency"

// Services are the sloth_service labels of the SLOs: the gateway's and
// the provider's.
var Services = []string{"llm-gateway", "llm-provider"}

// GatewaySLOs are the gateway's three, in its Sloth spec's order.
var GatewaySLOs = []string{StreamLatency, Availability, TTFT}

// SLOs are the gateway's three and the provider's.
var SLOs = append(slices.Clip(GatewaySLOs), CompletionLatency)

// The provider's direct clients, which the load generator plays beside the
// gateway's streams (loadgen -direct): DirectRate non-streaming completions
// a second, every DirectLongEvery-th asking DirectLongTokens words and the
// rest DirectTokens. They are the provider's SLI's traffic in every
// scenario; only provider-regression makes the long ones slow.
//
// 25 a second puts a long answer in every 4 s, so each of the pager's 10 s
// delta heap profiles holds two or three (at 5 a second, every other delta
// held none, and the verdict read "no change" half the time), and one
// answer slowed by a busy machine is 0.3x over 2 minutes, not a burn. A
// long answer is 24,000 words: built with += that copies some 1.3 GB,
// 300 ms and more here, so it stays over 100 ms on a machine three times
// as fast; built right, it takes a few milliseconds.
const (
	DirectRate       = 25
	DirectLongEvery  = 100
	DirectLongTokens = 24000
	DirectTokens     = 300
)

// Severities of the generated alerts (their severity label).
const (
	Page   = "page"
	Ticket = "ticket"
)

// Metric is the upstream's gauge of the active scenario: 1 for the one
// running, 0 for every other name in the table (the label's values are the
// table's names, never a request's).
const Metric = "upstream_scenario_active"

// None is the scenario of a healthy lab.
const None = "none"

// A Fault is what the upstream does to a chosen stream.
type Fault string

// Faults the upstream can inject.
const (
	// NoFault leaves every stream alone.
	NoFault Fault = ""
	// Fail fails the stream: every other chosen one is answered 503, the
	// rest are reset mid-stream.
	Fail Fault = "fail"
	// SlowFirstByte holds the answer back for Delay before its headers.
	SlowFirstByte Fault = "slow_first_byte"
	// HoldEnd holds the stream for Delay before its last event.
	HoldEnd Fault = "hold_end"
	// Regress switches the provider's own code: its non-streaming answers
	// build their text with += (provider.concatText), a quadratic path.
	// No stream is touched.
	Regress Fault = "regress"
)

// A Step is the share of streams the fault hits from After (since the
// scenario was set) until the next step.
type Step struct {
	After time.Duration
	Share float64
}

// Alert is one burn-rate alert: an SLO's page or ticket.
type Alert struct{ SLO, Severity string }

func (a Alert) String() string { return a.SLO + " " + a.Severity }

// Scenario is one row of the table.
type Scenario struct {
	Name  string
	Build variant.Variant // the gateway build it runs against
	What  string          // what is injected, in words
	Fault Fault
	Delay time.Duration // of SlowFirstByte and HoldEnd
	// Steps say which share of streams the fault hits, over time; the
	// upstream spreads them evenly (exactly one in 1/share, not a coin
	// toss, so a short window's burn rate is the share's, not noise).
	Steps []Step
	// MaxEvents, when set, spares streams longer than this: they are
	// neither hit nor counted toward the share.
	MaxEvents int
	// Burn is the burn rate each SLO should show once the fault has run
	// for a whole short window (its last step's, for a climb); Why derives
	// it from the SLO.
	Burn map[string]float64
	Why  string
	// Fires are the alerts that must fire; every other alert of the three
	// SLOs must stay silent, but for the ticket of a paging SLO, which
	// Alertmanager holds while the page fires (see Allowed).
	Fires []Alert
	// Observe is how long the e2e keeps the fault on: long enough for its
	// alerts to fire and for a 2-minute window to lie wholly inside it.
	Observe time.Duration
	// Profile is where `make profile` points while it runs.
	Profile string
}

// Budgets of the four SLOs.
var Budgets = map[string]float64{StreamLatency: slo.Budget, Availability: slo.Budget, TTFT: 1 - slo.TTFTObjective,
	CompletionLatency: 1 - slo.CompletionObjective}

const (
	tailShare = 0.01                    // 1 stream in 100
	tailHold  = 1200 * time.Millisecond // twice the 600 ms threshold
	ttftShare = 0.10                    // 1 stream in 10
	ttftDelay = 400 * time.Millisecond  // over 250 ms, far under 600 ms
	// ttftMaxEvents is above any ordinary stream the calibration chooses
	// (hundreds of events) and below its long generations (thousands).
	ttftMaxEvents = 2000
	failShare     = 0.01
	// creepStep is 30 s. The lab's 1x ticket pair (48m and 8m) reads the
	// whole run while the run is younger than 8 minutes, so the ticket
	// fires once the run's average passes 1x: about a minute into the
	// creep, and resolves once the run's average falls back under 1x,
	// about 4 minutes after the clear. Longer steps would hold the matrix
	// that much longer: the creep is its slowest row.
	creepStep = 30 * time.Second
	// observe keeps a one-step fault on for a 2-minute window wholly inside
	// it, a scrape and a rule evaluation (5 s each) behind, and 20 s more;
	// a page of a 10x burn is at the pager within about 65 s of it.
	observe = 150 * time.Second
)

func burn(share float64, sloName string) float64 { return share / Budgets[sloName] }

// creep climbs one budget's worth of burn (0.1 % of streams) per step.
func creep() []Step {
	var s []Step
	for i := range 4 {
		s = append(s, Step{After: time.Duration(i) * creepStep, Share: float64(i+1) * slo.Budget})
	}
	return s
}

// All is the table, in the order docs/scenarios.md gives it.
func All() []Scenario {
	return []Scenario{
		{
			Name: "regression", Build: variant.Baseline, What: "nothing: the baseline parser's O(n²) transcript",
			Burn: map[string]float64{StreamLatency: burn(tailShare, StreamLatency)},
			Why: fmt.Sprintf("the calibrated shape sends 1 long stream in 100, each over %v in the baseline build: %g / %g = %gx",
				slo.Threshold, tailShare, slo.Budget, burn(tailShare, StreamLatency)),
			Fires:   []Alert{{StreamLatency, Page}},
			Observe: observe,
			Profile: "transcript.(*Baseline).Append tops alloc_space: the gateway is the culprit",
		},
		{
			Name: None, Build: variant.Fixed, What: "nothing",
			Burn:    map[string]float64{},
			Why:     "every stream ends ok within a few ms of the fixed build: 0x everywhere",
			Observe: observe,
			Profile: "nothing stands out",
		},
		{
			Name: "upstream-errors", Build: variant.Fixed, Fault: Fail, Steps: []Step{{Share: failShare}},
			What: "1 stream in 100 fails: every other one answered 503, the rest reset mid-stream",
			Burn: map[string]float64{Availability: burn(failShare, Availability)},
			Why: fmt.Sprintf("availability: %g / %g = %gx, over the slow page pair's 6x. Stream latency counts only streams that ended ok (a failure is availability's), and a 503 has no first token while a reset one had it in time: 0x for both",
				failShare, slo.Budget, burn(failShare, Availability)),
			Fires:   []Alert{{Availability, Page}},
			Observe: observe,
			Profile: "nothing in the gateway: gateway_upstream_errors_total names the reason",
		},
		{
			Name: "slow-first-token", Build: variant.Fixed, Fault: SlowFirstByte, Delay: ttftDelay, Steps: []Step{{Share: ttftShare}},
			// A long generation's own time plus the wait could pass
			// 600 ms and burn stream latency too; 1 stream in 100 is one.
			MaxEvents: ttftMaxEvents,
			What:      fmt.Sprintf("1 ordinary stream in 10 (%d events or fewer) waits %v for the upstream's first byte", ttftMaxEvents, ttftDelay),
			Burn:      map[string]float64{TTFT: burn(ttftShare, TTFT)},
			Why: fmt.Sprintf("TTFT: %g / %g = %gx of the ordinary streams, 9.9x of all with the 1 %% long ones spared (each over %v). An ordinary stream still ends within %v + a few ms, under %v: stream latency 0x",
				ttftShare, Budgets[TTFT], burn(ttftShare, TTFT), slo.TTFTThreshold, ttftDelay, slo.Threshold),
			Fires:   []Alert{{TTFT, Page}},
			Observe: observe,
			Profile: "nothing in the gateway: the wait is the upstream's",
		},
		{
			Name: "upstream-tail", Build: variant.Fixed, Fault: HoldEnd, Delay: tailHold, Steps: []Step{{Share: tailShare}},
			What: fmt.Sprintf("1 stream in 100 held %v by the upstream before its last event", tailHold),
			Burn: map[string]float64{StreamLatency: burn(tailShare, StreamLatency)},
			Why: fmt.Sprintf("stream latency: %g / %g = %gx, the regression's burn with a clean gateway. Nothing fails and first tokens are on time",
				tailShare, slo.Budget, burn(tailShare, StreamLatency)),
			Fires:   []Alert{{StreamLatency, Page}},
			Observe: observe,
			Profile: "nothing in the gateway, the lesson: its profile is clean, so look at the upstream",
		},
		{
			Name: "creep", Build: variant.Fixed, Fault: HoldEnd, Delay: tailHold, Steps: creep(),
			What: fmt.Sprintf("streams held %v at the end, 1 in 1000 more every %v: 1 → 4 in 1000", tailHold, creepStep),
			Burn: map[string]float64{StreamLatency: burn(4*slo.Budget, StreamLatency)},
			Why: fmt.Sprintf("stream latency climbs 1x, 2x, 3x, 4x (k in 1000 / %g): the 1x-over-48m ticket fires once the run's average passes 1x, and 4x never reaches the 6x of the slow page pair",
				slo.Budget),
			Fires: []Alert{{StreamLatency, Ticket}},
			// The last step runs a minute: the ticket is at the pager
			// about 90 s in, and the 2m window then holds 2x, 3x and 4x
			// (3.25x, WindowBurn). A longer last step proves nothing more
			// and delays the resolve: that comes once the 8m window's
			// average falls under 1x, and every minute of 4x is 4 minutes
			// of budget the window must first forget.
			Observe: 3*creepStep + time.Minute,
			Profile: "nothing in the gateway: the tail is the upstream's",
		},
		{
			Name: "provider-regression", Build: variant.Fixed, Fault: Regress,
			What: fmt.Sprintf("the provider's own code regresses: its non-streaming answers build their text with += (O(n²)), so each %d-word answer (1 in %d of its direct clients') takes over %v",
				DirectLongTokens, DirectLongEvery, slo.CompletionThreshold),
			Burn: map[string]float64{CompletionLatency: burn(1.0/DirectLongEvery, CompletionLatency)},
			Why: fmt.Sprintf("completion-latency: 1/%d / %g = %gx; a %d-word answer still takes a millisecond or two. The gateway's streams take the provider's streaming path, which the regression leaves alone: its three SLOs 0x",
				DirectLongEvery, Budgets[CompletionLatency], burn(1.0/DirectLongEvery, CompletionLatency), DirectTokens),
			Fires:   []Alert{{CompletionLatency, Page}},
			Observe: observe,
			Profile: "provider.concatText tops the provider's alloc_space (make profile GATEWAY_ADMIN_URL=http://127.0.0.1:6062): the provider is the culprit, and the gateway's profile is clean",
		},
	}
}

// Expected lists the alerts it must fire, or says nothing.
func (s Scenario) Expected() string {
	if len(s.Fires) == 0 {
		return "nothing"
	}
	var out []string
	for _, a := range s.Fires {
		out = append(out, a.String())
	}
	return strings.Join(out, ", ")
}

// Names lists the table's names.
func Names() []string {
	var n []string
	for _, s := range All() {
		n = append(n, s.Name)
	}
	return n
}

// Lookup finds a scenario by name; the error lists the names there are.
func Lookup(name string) (Scenario, error) {
	for _, s := range All() {
		if s.Name == name {
			return s, nil
		}
	}
	return Scenario{}, fmt.Errorf("no scenario %q: want one of %s", name, strings.Join(Names(), ", "))
}

// Share is the share of streams the fault hits at elapsed since the
// scenario was set.
func (s Scenario) Share(elapsed time.Duration) float64 {
	share := 0.0
	for _, st := range s.Steps {
		if elapsed >= st.After {
			share = st.Share
		}
	}
	return share
}

// WindowBurn is the burn rate slo should show over a window of the given
// length that ends elapsed after the scenario was set: the fault's share
// averaged over the window, over the SLO's budget (Burn is the last
// step's). For a one-step fault wholly inside the window that is Burn; a
// climb's window holds several steps. Seconds before the scenario was set
// count as none, which is what a window shows only if it lies inside the
// load: the e2e measures 150 s or more after the injection, over 2
// minutes. A window of no length is the burn at elapsed. An SLO the
// scenario does not burn shows none, and a scenario without steps (the
// regression's burn is the build's) always shows Burn.
func (s Scenario) WindowBurn(slo string, elapsed, window time.Duration) float64 {
	if _, burns := s.Burn[slo]; !burns || len(s.Steps) == 0 {
		return s.Burn[slo]
	}
	if window <= 0 {
		return s.Share(elapsed) / Budgets[slo]
	}
	// Integrate the step function over [elapsed-window, elapsed], one
	// piece per step boundary inside it.
	from, sum := elapsed-window, 0.0
	for i, st := range s.Steps {
		end := elapsed
		if i+1 < len(s.Steps) {
			end = min(end, s.Steps[i+1].After)
		}
		if start := max(from, st.After); end > start {
			sum += st.Share * (end - start).Seconds()
		}
	}
	return sum / window.Seconds() / Budgets[slo]
}

// WithShare is the scenario with its fault hitting share of the streams
// from the start, and the burn it should show scaled to match. Only a
// one-step scenario with a fault has a share to change; share must be in
// (0, 1].
func (s Scenario) WithShare(share float64) (Scenario, error) {
	if s.Fault == NoFault || len(s.Steps) != 1 {
		return Scenario{}, fmt.Errorf("scenario %s: only a one-step fault takes a share", s.Name)
	}
	if !(share > 0 && share <= 1) {
		return Scenario{}, fmt.Errorf("scenario %s: share %g, want one in (0, 1]", s.Name, share)
	}
	was := s.Steps[0].Share
	burn := make(map[string]float64, len(s.Burn))
	for k, v := range s.Burn {
		burn[k] = v * share / was
	}
	s.Steps, s.Burn = []Step{{Share: share}}, burn
	s.What = fmt.Sprintf("%s, at a share of %g instead of %g", s.What, share, was)
	return s, nil
}

// Allowed says whether an alert may fire during the scenario: one it must
// fire, or the ticket of an SLO it pages. A fresh lab's Prometheus has
// only minutes of data, so a ticket's long window (16m, 48m) holds only
// those minutes and crosses its threshold within seconds of the burn —
// before the page, so it reaches the pager first. Alertmanager holds it
// while the page fires (inhibit_rules), and it stays firing after the
// page resolves, while its 8m window still remembers the burn.
func (s Scenario) Allowed(a Alert) bool {
	return slices.Contains(s.Fires, a) || (a.Severity == Ticket && slices.Contains(s.Fires, Alert{a.SLO, Page}))
}

// Get asks the upstream at base (its http://host:port) which scenario
// runs.
func Get(ctx context.Context, base string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/scenario", nil)
	if err != nil {
		return "", err
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return "", fmt.Errorf("no upstream at %s: %w", base, err)
	}
	defer resp.Body.Close()
	var st struct {
		Scenario string `json:"scenario"`
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("no scenario control at %s/scenario: %s", base, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&st); err != nil {
		return "", fmt.Errorf("the scenario control at %s: %w", base, err)
	}
	return st.Scenario, nil
}

// Set starts the named scenario on the upstream at base (its
// http://host:port), through its control endpoint.
func Set(ctx context.Context, base, name string) error {
	if _, err := Lookup(name); err != nil {
		return err
	}
	return put(ctx, base, name, "")
}

// SetShare starts a one-step scenario with its fault hitting share of
// the streams instead of the table's (see WithShare): the monitoring-path
// tests burn faster than any row, so a page comes through the quick pair.
func SetShare(ctx context.Context, base, name string, share float64) error {
	sc, err := Lookup(name)
	if err != nil {
		return err
	}
	if _, err := sc.WithShare(share); err != nil {
		return err
	}
	return put(ctx, base, name, "?share="+strconv.FormatFloat(share, 'g', -1, 64))
}

func put(ctx context.Context, base, name, query string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, base+"/scenario/"+url.PathEscape(name)+query, nil)
	if err != nil {
		return fmt.Errorf("scenario %s: %w", name, err)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("scenario %s: no upstream at %s: %w", name, base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return fmt.Errorf("scenario %s: the upstream at %s answered %s: %s", name, base, resp.Status, strings.TrimSpace(string(b)))
	}
	return nil
}
