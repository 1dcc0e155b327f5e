// Package lifecycle is what the pager does with each alert it accepted:
// on a new page or ticket (store.Diagnosed) it captures the heap profile
// of the processes the alert's rule names (capture.go, package targets),
// so the alert arrives with the answer, and reads its facts: the burn, the
// budget and the slowest requests from Prometheus, what changed in the
// heap, the GC (facts.go); it posts the heap's verdict to Alertmanager
// (findings.go); once the alert resolves it captures a second profile, the
// "after" of a before/after comparison, and reads the GC again. Alerts and
// resolves close together share one fetch (see shot), so an alert storm
// does not load the process it diagnoses. A ticket is diagnosed as a page
// is because it is the earlier chance: the write-up's slow burn ticketed a
// day before it paged.
//
// Every result is written to the store through journal, the one place
// that writes them, and every piece of work runs beside the webhook,
// which has answered Alertmanager by then: a slow or dead target,
// Prometheus or Alertmanager never delays a page.
package lifecycle

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"burnlab/pager/internal/heapdelta"
	"burnlab/pager/internal/promfacts"
	"burnlab/pager/internal/store"
	"burnlab/pager/internal/targets"
	"burnlab/pager/internal/web"
)

// DefaultProfileWindow is the pager's window of one profile fetch: an alert
// storm of 2,000 pages in 20 s made 2,000 fetches of the gateway's heap
// profile, 8.5 s of its CPU, and one of its probe streams missed the
// 600 ms SLO. The profile counts allocations since the gateway's process
// started, so one taken a minute before a page tells the same story.
const DefaultProfileWindow = time.Minute

// DefaultMaxFetches bounds the profile fetches in flight: with a window
// there is rarely more than one, without one (a window of 0) captures wait
// for a turn rather than pile onto the gateway.
const DefaultMaxFetches = 2

// Config is what a Lifecycle needs.
type Config struct {
	Store *store.Store
	Log   zerolog.Logger
	// Targets says which processes an alert's captures profile (package
	// targets). Nil: the flags' one process, ProfileURL, TraceURL and
	// GCJob, for every alert (targets.Default).
	Targets *targets.Config
	// Discovery lists Prometheus's scrape targets, for the rules that
	// find their processes through it: v1.API.
	Discovery targets.Discovery
	// ProfileURL (only without Targets) is the gateway's pprof allocs
	// endpoint; empty disables profile capture.
	ProfileURL     string
	ProfileTimeout time.Duration
	// TraceURL (only without Targets) is the gateway's flight-recorder
	// snapshot (service.FlightRecorderPath), taken with each profile;
	// empty takes none.
	TraceURL string
	// ProfileWindow is how long one fetch of the profile serves (see
	// shot): every capture asked for within it shares that profile, and no
	// second fetch starts within it. 0 fetches for each capture;
	// DefaultProfileWindow is the pager's default.
	ProfileWindow time.Duration
	// MaxFetches bounds the shots in flight at once; default
	// DefaultMaxFetches.
	MaxFetches int
	Client     *http.Client
	// ExternalURL is the pager's base URL as a person's browser reaches it
	// (no trailing slash): a finding links to its incident's page.
	ExternalURL string
	// Prometheus is where a new page's facts are read (facts.go); nil
	// reads none from it, and the facts say so.
	Prometheus *promfacts.Client
	// Deltas holds the delta heap profiles taken at ProfileURL, which a
	// new page's facts compare, without Targets; nil compares none.
	Deltas Deltas
	// RuleDeltas hold, by rule name, the delta heap profiles of each
	// sampled rule of Targets (targets.Rule.Sampled).
	RuleDeltas map[string]Deltas
	// GCJob (only without Targets) is the Prometheus job of the process
	// ProfileURL profiles, whose garbage collector's share of CPU a new
	// page's facts read; empty reads none.
	GCJob string
	// FactsTimeout bounds the Prometheus reads of one page's facts, and
	// each post of its finding; default DefaultFactsTimeout.
	FactsTimeout time.Duration
	// Alertmanagers are the base URLs of the Alertmanagers a page's heap
	// finding is posted to (findings.go): all of an HA set's; none posts
	// none.
	Alertmanagers []string
	// Clock is the lifecycle's time; nil is the real one. Tests move a
	// fake one on.
	Clock heapdelta.Clock
	// OnStored, when set (by a test), is called with each notification's
	// new alerts once they are stored, before their work starts.
	OnStored func([]store.Accepted)
}

// Lifecycle acts on the alerts the webhook accepted.
type Lifecycle struct {
	cfg      Config
	profiles *prometheus.CounterVec
	fetches  *prometheus.CounterVec
	findings *prometheus.CounterVec
	trace    traceMetrics
	captures sync.WaitGroup
	// captureCtx ends the fetches in flight and those waiting for a turn;
	// waits ends the waits of shots for their window.
	captureCtx   context.Context
	stopCaptures context.CancelFunc
	waits        context.Context
	stopWaits    context.CancelFunc
	clock        heapdelta.Clock
	// fetching holds a token per shot in flight (MaxFetches).
	fetching chan struct{}
	// rules are Targets', or the flags' one rule.
	rules targets.Config
	// mu guards pageCaptures and last.
	mu sync.Mutex
	// pageCaptures holds, per incident, a channel closed when its page-time
	// capture ends: a resolve arriving meanwhile waits for it, so the
	// after profile is never taken before the one it is compared with.
	pageCaptures map[string]chan struct{}
	// last is each rule's newest shot, started or waiting for its window.
	last map[string]*shot
	// findingMu holds an incident's finding from its read to its post
	// (postFinding): one lock of these per incident, by its ID's hash, so
	// a slow Alertmanager holds up only the incidents that share it.
	findingMu [16]sync.Mutex
	// ordering is held while a notification is stored and its captures
	// registered (register).
	ordering sync.Mutex
}

// New registers the lifecycle's metrics on reg and returns it.
func New(cfg Config, reg prometheus.Registerer) *Lifecycle {
	if cfg.ProfileTimeout == 0 {
		cfg.ProfileTimeout = 30 * time.Second
	}
	if cfg.MaxFetches <= 0 {
		cfg.MaxFetches = DefaultMaxFetches
	}
	if cfg.FactsTimeout <= 0 {
		cfg.FactsTimeout = DefaultFactsTimeout
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	if cfg.Clock == nil {
		cfg.Clock = heapdelta.RealClock{}
	}
	rules := targets.Default(cfg.ProfileURL, cfg.TraceURL, cfg.GCJob)
	if cfg.Targets != nil {
		rules = *cfg.Targets
	}
	l := &Lifecycle{
		cfg:          cfg,
		rules:        rules,
		last:         map[string]*shot{},
		pageCaptures: map[string]chan struct{}{},
		clock:        cfg.Clock,
		fetching:     make(chan struct{}, cfg.MaxFetches),
		profiles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pager_profiles_total", Help: "Heap profiles recorded on incidents, by when (page, or after the page resolved) and result; incidents within one window share a fetch.",
		}, []string{"when", "result"}),
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pager_profile_fetches_total", Help: "Heap profile captures (each of every process of a rule), by result: at most one per rule per -profile-window.",
		}, []string{"result"}),
		findings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pager_findings_posted_total", Help: "Posts of a page's heap finding to an Alertmanager of -alertmanager-urls, by result.",
		}, []string{"result"}),
	}
	reg.MustRegister(l.profiles, l.fetches, l.findings)
	l.trace = newTraceMetrics(reg)
	for _, r := range []string{"ok", "error"} {
		l.fetches.WithLabelValues(r)
		l.findings.WithLabelValues(r)
	}
	l.captureCtx, l.stopCaptures = context.WithCancel(context.Background())
	l.waits, l.stopWaits = context.WithCancel(context.Background())
	return l
}

// Accept stores a notification's alerts and registers their captures in
// one step, so a resolve stored after its page finds the page's capture to
// wait for however the two requests run, then starts each new alert's
// work. It returns the alerts that were news (store.AddNotification); an
// error means nothing was stored, and the notification must not be
// acknowledged.
func (l *Lifecycle) Accept(receiver, kind string, alerts []store.Alert) ([]store.Accepted, error) {
	if len(alerts) == 0 {
		return nil, nil
	}
	l.ordering.Lock()
	accepted, err := l.cfg.Store.AddNotification(receiver, kind, alerts, time.Now())
	var captures []capture
	if err == nil {
		captures = l.register(accepted)
	}
	l.ordering.Unlock()
	if err != nil {
		return nil, err
	}
	if l.cfg.OnStored != nil {
		l.cfg.OnStored(accepted)
	}
	for i, a := range accepted {
		l.act(a, captures[i])
	}
	return accepted, nil
}

// act starts an accepted alert's work: its capture and, for a new page or
// ticket, the reading of its facts; for a resolve, the finding's end, the
// GC after and the profile after.
func (l *Lifecycle) act(a store.Accepted, c capture) {
	if c.shot != nil {
		l.captures.Go(func() {
			defer func() {
				l.mu.Lock()
				delete(l.pageCaptures, a.Incident)
				l.mu.Unlock()
				close(c.done)
			}()
			l.record(a, "page", c.shot)
		})
	}
	if a.Fired && (l.cfg.Prometheus != nil || l.cfg.Deltas != nil || len(l.cfg.RuleDeltas) > 0) {
		l.captures.Go(func() { l.readFacts(a) })
	}
	if a.Cleared {
		l.captures.Go(func() { l.postFinding(a.Incident) })
	}
	if a.Cleared && l.cfg.Prometheus != nil {
		l.captures.Go(func() { l.readGCAfter(a) })
	}
	if c.after {
		l.captures.Go(func() {
			if c.pending != nil {
				select {
				case <-c.pending:
				case <-l.captureCtx.Done():
					return
				}
			}
			l.captureAfter(a)
		})
	}
}

// journal writes one result of an incident's lifecycle to the store (a
// profile, the facts, the GC after): the one place results are written,
// so one that cannot be is logged alike, whatever it is.
func (l *Lifecycle) journal(id, what string, write func(at time.Time) error) bool {
	if err := write(time.Now()); err != nil {
		l.cfg.Log.Error().Err(err).Str("incident", id).Str("what", what).Msg("could not store the incident's " + what)
		return false
	}
	return true
}

// incidentURL is an incident's page, for a finding's link.
func (l *Lifecycle) incidentURL(id string) string { return web.IncidentURL(l.cfg.ExternalURL, id) }

// Close waits for the work in progress or waiting for a turn, cancelling
// it after the context ends; a shot still waiting for its window is
// called off at once, and the captures it serves record that.
func (l *Lifecycle) Close(ctx context.Context) {
	l.stopWaits()
	done := make(chan struct{})
	go func() { l.captures.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		l.stopCaptures()
		<-done
	}
}
