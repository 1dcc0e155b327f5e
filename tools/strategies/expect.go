package strategies

import (
	"time"

	"burnlab/prometheus/rulegen/guard"
	"burnlab/shared/scenario"
)

// An Outcome is what one strategy did with one incident: the severity that
// fired (page over ticket), how long after the fault began it first fired
// at that severity, how long after the fault ended its last alert
// resolved, and the share of the period's error budget spent by the time
// it fired; and when it first ticketed and first paged, which for a slow
// burn are a lead time apart. A nil time is "never": not detected, or
// still firing when the run ended.
type Outcome struct {
	Detected               string
	Detection              *time.Duration
	Reset                  *time.Duration
	BudgetSpent            *float64
	FirstTicket, FirstPage *time.Duration
}

// outcome reads an Outcome from firing spans. bad(a, b) is the share of
// the period's budget spent between two times.
func outcome(spans []Span, start, faultEnd time.Duration, bad func(a, b time.Duration) float64) Outcome {
	o := Outcome{Detected: "nothing"}
	for _, s := range spans {
		first := &o.FirstTicket
		if s.Severity == scenario.Page {
			first = &o.FirstPage
		}
		if d := s.From - start; s.From >= start && (*first == nil || d < **first) {
			*first = &d
		}
	}
	for _, sev := range []string{scenario.Page, scenario.Ticket} {
		for _, s := range spans {
			if s.Severity == sev && s.From >= start && (o.Detection == nil || s.From-start < *o.Detection) {
				d := s.From - start
				spent := bad(start, s.From)
				o.Detected, o.Detection, o.BudgetSpent = sev, &d, &spent
			}
		}
		if o.Detection != nil {
			break
		}
	}
	if o.Detection == nil {
		return o
	}
	var last time.Duration
	for _, s := range spans {
		if s.Open {
			return o
		}
		last = max(last, s.To)
	}
	r := max(0, last-faultEnd)
	o.Reset = &r
	return o
}

// Expect is what the workbook's arithmetic predicts: each condition's
// signal is the exact mean of the fault's share over each window, from a
// clean history, compared with its threshold, held for its For — on a
// grid of dt, with no scrapes, no evaluation interval and no
// randomness. For a constant burn b from a clean history it is the
// workbook's formula: a window W with threshold k fires at W·k/b and
// resets W·(1 − k/b) after the fault ends. A guarded condition fires only
// when rate streams a second fill its guard's window with the least it
// asks for.
func Expect(s Strategy, c Case, start, end, dt time.Duration) Outcome {
	in, budget, rate, period := c.Incident, c.SLO.Budget, c.Traffic.Rate, c.Windows.Period
	n := int(end/dt) + 1
	cum := make([]float64, n+1) // cum[i]: ∫ share over [0, i s)
	for i := range n {
		cum[i+1] = cum[i] + in.Share(time.Duration(i)*dt-start)*dt.Seconds()
	}
	mean := func(t, w time.Duration) float64 {
		i, j := max(0, int((t-w)/dt)), int(t/dt)
		return (cum[j] - cum[i]) / w.Seconds()
	}
	scale := func(c Condition) float64 {
		switch {
		case c.Signal == Burn:
			return 1 / budget
		case c.Signal == Share5xx && in.SLO == scenario.Availability:
			return 0.5 // every other failure is a 503
		case c.Signal == ShareSlow && in.SLO == scenario.StreamLatency:
			return 1
		}
		return 0
	}
	var spans []Span
	for _, c := range s.Conditions {
		k := scale(c)
		if c.Guard > 0 && rate*c.Guard.Seconds() < guard.MinEvents(c.Threshold, budget) {
			continue
		}
		var since time.Duration = -1
		firing := false
		for i := range n {
			t := time.Duration(i) * dt
			on := true
			for _, w := range c.Windows {
				v := mean(t, w) * k
				// A share spread exactly on the threshold is on it, not
				// over it, whatever the sums' last bits say.
				if v < c.Threshold*(1-1e-9) || (c.Strict && v <= c.Threshold*(1+1e-9)) {
					on = false
				}
			}
			switch {
			case on && since < 0:
				since = t
			case !on:
				if firing {
					spans[len(spans)-1].To = t
				}
				since, firing = -1, false
			}
			if on && !firing && t-since >= c.For {
				firing = true
				spans = append(spans, Span{Severity: c.Severity, From: t, To: end, Open: true})
			}
		}
	}
	for i := range spans {
		if spans[i].To < end {
			spans[i].Open = false
		}
	}
	spent := func(a, b time.Duration) float64 {
		return (cum[int(b/dt)] - cum[int(a/dt)]) / budget / period.Seconds()
	}
	return outcome(spans, start, start+in.Duration, spent)
}
