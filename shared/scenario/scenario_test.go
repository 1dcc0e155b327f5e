package scenario

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"burnlab/shared/variant"
)

// The burn-rate factors of prometheus/slo/windows/lab: a page needs 6x (slow
// pair) or 14.4x, a ticket 1x (slow pair) or 3x.
const (
	pageFactor   = 6.0
	ticketFactor = 1.0
)

// Each row's stated burn must follow from its fault and the SLO's budget,
// and sit on the side of each alert's threshold its expectation says: a
// page over 6x, a ticket-only creep over 1x and under 6x, silence at 0.
func TestEachRowsBurnFollowsFromItsFaultAndFiresWhatItSays(t *testing.T) {
	names := map[string]bool{}
	for _, sc := range All() {
		if names[sc.Name] {
			t.Errorf("%s twice", sc.Name)
		}
		names[sc.Name] = true
		if _, err := variant.Parse(string(sc.Build)); err != nil {
			t.Errorf("%s: build %q", sc.Name, sc.Build)
		}
		if sc.Fault == Regress {
			// The share is the direct clients' long answers, each slow.
			if got, want := sc.Burn[CompletionLatency], 1.0/DirectLongEvery/Budgets[CompletionLatency]; len(sc.Steps) != 0 || got != want {
				t.Errorf("%s: steps %v and burn %v, want none and %v", sc.Name, sc.Steps, got, want)
			}
		} else if sc.Fault != NoFault {
			last := sc.Steps[len(sc.Steps)-1].Share
			for _, a := range sc.Fires {
				if got, want := sc.Burn[a.SLO], last/Budgets[a.SLO]; got != want {
					t.Errorf("%s: %s burn %v, but its last share %v over the budget is %v", sc.Name, a.SLO, got, last, want)
				}
			}
		}
		for _, slo := range SLOs {
			burn := sc.Burn[slo]
			page, ticket := Alert{slo, Page}, Alert{slo, Ticket}
			switch {
			case slices.Contains(sc.Fires, page) && burn < pageFactor:
				t.Errorf("%s must page %s at %vx, under the %vx of the slow page pair", sc.Name, slo, burn, pageFactor)
			case slices.Contains(sc.Fires, ticket) && (burn < ticketFactor || burn >= pageFactor):
				t.Errorf("%s must ticket %s and never page, at %vx", sc.Name, slo, burn)
			case !sc.Allowed(page) && !sc.Allowed(ticket) && burn != 0:
				t.Errorf("%s keeps %s silent but states a %vx burn", sc.Name, slo, burn)
			}
		}
		if sc.Observe <= 2*time.Minute {
			t.Errorf("%s observes %v: a 2-minute window must fit inside it", sc.Name, sc.Observe)
		}
	}
	for _, want := range []string{"regression", None, "upstream-errors", "slow-first-token", "upstream-tail", "creep", "provider-regression"} {
		if !names[want] {
			t.Errorf("no %s scenario", want)
		}
	}
}

func TestCreepClimbsStepByStep(t *testing.T) {
	sc, err := Lookup("creep")
	if err != nil {
		t.Fatal(err)
	}
	var burns []float64
	for _, at := range []time.Duration{0, creepStep - time.Second, creepStep, 2 * creepStep, 3 * creepStep, time.Hour} {
		burns = append(burns, sc.Share(at)/Budgets[StreamLatency])
	}
	if !slices.Equal(burns, []float64{1, 1, 2, 3, 4, 4}) {
		t.Fatalf("the creep's burn over time: %v", burns)
	}
}

func TestAllowedIsWhatFiresAndAPagesOwnTicket(t *testing.T) {
	tail, _ := Lookup("upstream-tail")
	creep, _ := Lookup("creep")
	for _, c := range []struct {
		sc   Scenario
		a    Alert
		want bool
	}{
		{tail, Alert{StreamLatency, Page}, true},
		{tail, Alert{StreamLatency, Ticket}, true},
		{tail, Alert{TTFT, Ticket}, false},
		{tail, Alert{Availability, Page}, false},
		{creep, Alert{StreamLatency, Ticket}, true},
		{creep, Alert{StreamLatency, Page}, false},
	} {
		if got := c.sc.Allowed(c.a); got != c.want {
			t.Errorf("%s allows %s: %v, want %v", c.sc.Name, c.a, got, c.want)
		}
	}
	if _, err := Lookup("<script>"); err == nil || !strings.Contains(err.Error(), "upstream-tail") {
		t.Fatalf("an unknown name: %v", err)
	}
}

// TestWindowBurnAveragesTheStepsInTheWindow holds the e2e's expectation
// to the steps' arithmetic: a flat fault shows its Burn once the window
// lies inside it, a part of it before then, and the creep's window at its
// clear holds a minute of 4x, 30 s of 3x and 30 s of 2x.
func TestWindowBurnAveragesTheStepsInTheWindow(t *testing.T) {
	get := func(name string) Scenario {
		sc, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		return sc
	}
	tail, creep, reg := get("upstream-tail"), get("creep"), get("regression")
	for _, c := range []struct {
		sc             Scenario
		elapsed, width time.Duration
		want           float64
	}{
		{tail, tail.Observe, 2 * time.Minute, 10},
		{tail, time.Minute, 2 * time.Minute, 5}, // half the window before the injection
		{tail, 0, 2 * time.Minute, 0},
		{creep, creep.Observe, 2 * time.Minute, (2*30 + 3*30 + 4*60) / 120.0},
		{creep, 30 * time.Second, 30 * time.Second, 1},
		{creep, 10 * time.Minute, 2 * time.Minute, 4},
		{reg, time.Minute, 2 * time.Minute, reg.Burn[StreamLatency]},
		{creep, 45 * time.Second, 0, 2}, // no window: the burn at that instant
		{Scenario{Steps: []Step{{Share: 0.01}, {After: time.Minute}}, Burn: map[string]float64{StreamLatency: 10}},
			2 * time.Minute, 2 * time.Minute, 5}, // a fault that stops after a minute
	} {
		if got := c.sc.WindowBurn(StreamLatency, c.elapsed, c.width); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s over %v at %v: %vx, want %vx", c.sc.Name, c.width, c.elapsed, got, c.want)
		}
	}
	if got := tail.WindowBurn(Availability, tail.Observe, 2*time.Minute); got != 0 {
		t.Errorf("upstream-tail burns availability at %vx; it burns only stream latency", got)
	}
}
