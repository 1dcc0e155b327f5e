package lab

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"burnlab/shared/scenario"
)

// Where an alert is seen: Prometheus's /api/v1/alerts, Alertmanager's
// /api/v2/alerts, the pager's firing incidents (by the endpoint that
// received them).
const (
	inPrometheus   = "prometheus"
	inAlertmanager = "alertmanager"
	inPager        = "pager"
)

var (
	sources = []string{inPrometheus, inAlertmanager, inPager}
	short   = map[string]string{inPrometheus: "prom", inAlertmanager: "am", inPager: "pager"}
)

// A watch follows one lab's burn-rate alerts through a scenario: when each
// was first seen where, which are on now, and every alert the scenario
// does not allow — before the fault is injected, nothing is allowed.
type watch struct {
	l  *Lab
	sc scenario.Scenario

	mu       sync.Mutex
	injected time.Time
	first    map[string]time.Time // source|alert → first seen
	on       map[string]bool      // source|alert → seen at the last poll
	bad      []string
	badSeen  map[string]bool
}

func newWatch(l *Lab, sc scenario.Scenario) *watch {
	return &watch{l: l, sc: sc, first: map[string]time.Time{}, on: map[string]bool{}, badSeen: map[string]bool{}}
}

func key(source string, a scenario.Alert) string { return source + "|" + a.String() }

func (w *watch) inject(at time.Time) {
	w.mu.Lock()
	w.injected = at
	w.mu.Unlock()
}

// poll reads the three sources once. A source that cannot be read is an
// error, never a silent one.
func (w *watch) poll() error {
	now := time.Now()
	seen := map[string]bool{}
	// An alert of the service but of no one SLO (the SLI no-data alert)
	// goes by its name: no scenario allows it.
	name := func(slo, alertname string) string {
		if slo == "" {
			return alertname
		}
		return slo
	}
	mark := func(source string, labels map[string]string) {
		if slices.Contains(scenario.Services, labels["sloth_service"]) {
			seen[key(source, scenario.Alert{SLO: name(labels["sloth_slo"], labels["alertname"]), Severity: labels["severity"]})] = true
		}
	}
	alerts, err := w.l.Alerts()
	if err != nil {
		return fmt.Errorf("prometheus: %w", err)
	}
	// Only firing alerts: a pending one (the no-data alert in Prometheus's
	// first seconds, before Sloth's recordings have two samples, waiting
	// out its for:) is never sent.
	for _, a := range alerts {
		if a.State == "firing" {
			mark(inPrometheus, a.Labels)
		}
	}
	held, err := w.l.AMAlerts()
	if err != nil {
		return fmt.Errorf("alertmanager: %w", err)
	}
	for _, a := range held {
		mark(inAlertmanager, a.Labels)
	}
	incs, err := w.l.Incidents()
	if err != nil {
		return fmt.Errorf("pager: %w", err)
	}
	var misrouted []string
	for _, inc := range incs {
		a := scenario.Alert{SLO: name(inc.SLO, inc.AlertName), Severity: inc.Severity}
		if inc.Status == "firing" {
			seen[key(inPager, a)] = true
		}
		// alertmanager.yml's receiver pager-<x> posts to /webhook/<x>.
		for _, e := range inc.Timeline {
			if e.Receiver != "" && e.Receiver != "pager-"+inc.Severity {
				misrouted = append(misrouted, fmt.Sprintf("%s reached the pager through %s", a, e.Receiver))
			}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range misrouted {
		w.flag(m, m)
	}
	for k := range seen {
		if _, ok := w.first[k]; !ok {
			w.first[k] = now
		}
		source, alert, _ := strings.Cut(k, "|")
		slo, severity, _ := strings.Cut(alert, " ")
		if w.injected.IsZero() || !w.sc.Allowed(scenario.Alert{SLO: slo, Severity: severity}) {
			w.flag(k, fmt.Sprintf("%s in %s at %s", alert, source, w.at(now)))
		}
	}
	w.on = seen
	return nil
}

// flag records a violation once per what.
func (w *watch) flag(what, say string) {
	if !w.badSeen[what] {
		w.badSeen[what] = true
		w.bad = append(w.bad, say)
	}
}

// at says when, from the injection.
func (w *watch) at(t time.Time) string {
	if w.injected.IsZero() {
		return "before the fault"
	}
	return "t+" + t.Sub(w.injected).Round(time.Second).String()
}

// everywhere says whether a is on in all three sources (up) or in none
// (!up).
func (w *watch) everywhere(a scenario.Alert, up bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range sources {
		if w.on[key(s, a)] != up {
			return false
		}
	}
	return true
}

// firedAfter says how long after the injection a was first seen in each
// source.
func (w *watch) firedAfter(a scenario.Alert) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var parts []string
	for _, s := range sources {
		if t, ok := w.first[key(s, a)]; ok {
			parts = append(parts, fmt.Sprintf("%s %ds", short[s], int(t.Sub(w.injected).Seconds())))
		}
	}
	return strings.Join(parts, ", ")
}

// violations are the alerts seen that the scenario does not allow, each
// once.
func (w *watch) violations() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.bad)
}

// watchEvery is how often a followed watch polls.
const watchEvery = 5 * time.Second

// follow polls until stop; the first read error ends it early, closing
// ended. stop returns that error.
func (w *watch) follow(ctx context.Context) (ended <-chan struct{}, stop func() error) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		for {
			if err = w.poll(); err != nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(watchEvery):
			}
		}
	}()
	return done, func() error { cancel(); <-done; return err }
}
