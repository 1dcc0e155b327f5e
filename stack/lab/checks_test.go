package lab

import (
	"fmt"
	"math"
	"strings"
	"time"

	"burnlab/shared/scenario"
)

// The e2e's checks. Each returns the error of reading the pager or
// Prometheus: a check that cannot read must fail, never pass as "silent".

func firing(l *Lab, slo, severity string) (bool, error) {
	alerts, err := l.Alerts()
	if err != nil {
		return false, err
	}
	return hasAlert(alerts, slo, severity, "firing"), nil
}

func hasAlert(alerts []Alert, slo, severity, state string) bool {
	for _, a := range alerts {
		if a.Labels["sloth_slo"] == slo && a.Labels["severity"] == severity && a.State == state {
			return true
		}
	}
	return false
}

// The scenario matrix's checks.

const (
	// burnBound is how far the measured burn may be from the expected:
	// shares are exact, so only a 2m window's edges (±1 stream of 30 at
	// 10x) and the scrape move it.
	burnBound = 0.3
	// quietBurn bounds an SLO the scenario leaves alone: 0x is derived,
	// but a busy machine may push a stream or two of 3,000 over a
	// threshold, and under 1x (the lowest ticket factor) no alert acts.
	quietBurn = 1.0
	minRate   = 20.0 // streams/s of the matrix's shape (25) that end ok
)

// firedOverTheRun catches what the 5 s polls could miss — an alert that
// fired and cleared between two — in Prometheus's ALERTS series over the
// last run and in every incident the pager holds.
func firedOverTheRun(l *Lab, sc scenario.Scenario, run time.Duration) error {
	fired, err := l.Series(fmt.Sprintf(`max by (alertname, sloth_slo, severity) (max_over_time(ALERTS{sloth_service=~"`+strings.Join(scenario.Services, "|")+`",alertstate="firing"}[%ds]))`, int(run.Seconds())))
	if err != nil {
		return err
	}
	var bad []string
	for _, labels := range fired {
		slo := labels["sloth_slo"]
		if slo == "" {
			slo = labels["alertname"] // the no-data alert, of no one SLO
		}
		a := scenario.Alert{SLO: slo, Severity: labels["severity"]}
		if !sc.Allowed(a) {
			bad = append(bad, a.String()+" in Prometheus's ALERTS")
		}
	}
	incs, err := l.Incidents()
	if err != nil {
		return fmt.Errorf("pager: %w", err)
	}
	for _, inc := range incs {
		if a := (scenario.Alert{SLO: inc.SLO, Severity: inc.Severity}); !sc.Allowed(a) {
			bad = append(bad, a.String()+" in the pager")
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("fired over the run: %s", strings.Join(bad, "; "))
	}
	return nil
}

// pagerResolved: the pager holds an incident for a, and none of a's is
// firing.
func pagerResolved(l *Lab, a scenario.Alert) bool {
	incs, err := l.Incidents()
	if err != nil {
		return false // the watch reports read errors
	}
	found := false
	for _, inc := range incs {
		if inc.SLO == a.SLO && inc.Severity == a.Severity {
			if inc.Status == "firing" {
				return false
			}
			found = true
		}
	}
	return found
}

// pagesOnce: Alertmanager sent one page per incident — one page in the
// pager for each SLO the scenario pages, none for any other.
func pagesOnce(l *Lab, sc scenario.Scenario) error {
	incs, err := l.Incidents()
	if err != nil {
		return fmt.Errorf("pager: %w", err)
	}
	pages := map[string]int{}
	for _, inc := range incs {
		if inc.Severity == scenario.Page {
			pages[inc.SLO]++
		}
	}
	for _, slo := range scenario.SLOs {
		want := 0
		if sc.Allowed(scenario.Alert{SLO: slo, Severity: scenario.Page}) {
			want = 1
		}
		if pages[slo] != want {
			return fmt.Errorf("the pager holds %d pages for %s, want %d", pages[slo], slo, want)
		}
	}
	return nil
}

// measureBurn reads each SLO's burn over the 2m window, elapsed after the
// scenario was set, and holds each to the scenario's expectation for that
// window (0 where none is stated). The recorded ratio lags by up to a
// scrape and an evaluation (10 s): for the creep's climb, the one row
// whose window is not flat, that moves the expectation by 8 %, well inside
// burnBound.
func measureBurn(l *Lab, sc scenario.Scenario, elapsed time.Duration) (string, error) {
	// A stalled load fires nothing and burns nothing: the streams must
	// flow at the shape's rate for any row to mean something.
	v, err := l.Query(`sum(rate(gateway_stream_duration_seconds_count{outcome="ok"}[2m]))`)
	if err != nil {
		return "", err
	}
	for _, rate := range v {
		if !(rate >= minRate) {
			return "", fmt.Errorf("%.1f streams/s ended ok over 2m, want %.0f or more (the shape's 25)", rate, minRate)
		}
	}
	if len(v) != 1 {
		return "", fmt.Errorf("no streams counted over 2m")
	}
	var said []string
	var errs []string
	for _, slo := range scenario.SLOs {
		v, err := l.Query(`slo:sli_error:ratio_rate2m{sloth_slo="` + slo + `"}`)
		if err != nil {
			return "", err
		}
		if len(v) == 0 {
			// Availability's error counter has no series until a stream
			// fails: no series is 0 only while streams are counted.
			if v, err = l.Query(`sum(rate(gateway_stream_duration_seconds_count[2m])) > 0`); err != nil || len(v) != 1 {
				return "", fmt.Errorf("%s: no error ratio over 2m, and no streams counted (%v)", slo, err)
			}
			v = map[string]float64{"": 0}
		}
		if len(v) != 1 {
			return "", fmt.Errorf("%s: %d series over 2m, want 1", slo, len(v))
		}
		var got float64
		for _, x := range v {
			got = x / scenario.Budgets[slo]
		}
		if math.IsNaN(got) {
			return "", fmt.Errorf("%s: the error ratio over 2m is NaN: no streams counted", slo)
		}
		want := sc.WindowBurn(slo, elapsed, 2*time.Minute)
		switch {
		case want == 0 && got >= quietBurn:
			errs = append(errs, fmt.Sprintf("%s burns %.1fx, want under %.0fx", slo, got, quietBurn))
		case want > 0 && math.Abs(got/want-1) > burnBound:
			errs = append(errs, fmt.Sprintf("%s burns %.1fx, want %.1fx (±%.0f %%)", slo, got, want, 100*burnBound))
		}
		if want > 0 || got > 0 {
			said = append(said, fmt.Sprintf("%s %.1fx → %.1fx", slo, want, got))
		}
	}
	if len(said) == 0 {
		said = []string{"0x everywhere"}
	}
	if len(errs) > 0 {
		return strings.Join(said, ", "), fmt.Errorf("burn: %s", strings.Join(errs, "; "))
	}
	return strings.Join(said, ", "), nil
}
