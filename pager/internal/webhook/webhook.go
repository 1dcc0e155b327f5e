// Package webhook is the pager's HTTP side: it accepts Alertmanager webhook
// notifications (payload version 4), stores them durably, tells the on-call
// in one log line per alert, and on a new page or ticket (store.Diagnosed)
// captures the gateway's heap profile so the alert arrives with the
// answer; once it resolves it captures a second one from the same source,
// the "after" of a before/after comparison. Alerts and resolves close
// together share one fetch (see shot), so an alert storm does not load the
// gateway it diagnoses. A new page or ticket also gets its facts: the
// burn, the budget and the slowest requests read from Prometheus, and what
// changed in the heap. A ticket is diagnosed as a page is because it is
// the earlier chance: the write-up's slow burn ticketed a day before it
// paged.
//
// By concern: webhook.go receives and validates notifications and stores
// them; capture.go takes the profiles (shots, their windows and fetches);
// facts.go reads a page's facts; api.go serves the incidents API and the
// profile files. Durable writes are the store's (package store).
package webhook

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"burnlab/pager/internal/heapdelta"
	"burnlab/pager/internal/promfacts"
	"burnlab/pager/internal/store"
	"burnlab/pager/internal/targets"
	"burnlab/shared/amwebhook"
	"burnlab/shared/bearer"
	"burnlab/shared/openai"
)

// payload is Alertmanager's webhook body.
type payload amwebhook.Message

// DefaultMaxBody is the largest payload the pager takes, 32 MiB.
// Alertmanager sends a group whole, and does not retry a 4xx, so a group
// refused as too large would be lost; the limit is stated instead, and
// alertmanager.yml's max_alerts (4,000) keeps every group under it with
// room to spare: 8 KiB an alert, four times what one of this repo's Sloth
// alerts weighs (about 2 KiB, most of it the rule's expression in the
// generator URL). Past it the pager answers 503, which Alertmanager
// retries and counts as failed.
const DefaultMaxBody = 32 << 20

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

// Config is what a Handler needs.
type Config struct {
	Store *store.Store
	Log   zerolog.Logger
	// Token, when set, must arrive as `Authorization: Bearer <token>`
	// (Alertmanager's http_config.authorization), the scheme in any case
	// (bearer.Token).
	Token string
	// Targets says which processes an alert's captures profile (package
	// targets). Nil: the flags' one process, ProfileURL, TraceURL and
	// GCJob, for every alert (targets.Default).
	Targets *targets.Config
	// Discovery lists Prometheus's scrape targets, for the rules that
	// find their processes through it: v1.API.
	Discovery targets.Discovery
	// ProfileURL is the gateway's pprof allocs endpoint; empty disables
	// profile capture. Only without Targets.
	ProfileURL     string
	ProfileTimeout time.Duration
	// TraceURL (only without Targets) is the gateway's flight-recorder snapshot
	// (service.FlightRecorderPath), taken with each profile; empty takes
	// none.
	TraceURL string
	// ProfileWindow is how long one fetch of the profile serves (see
	// shot): every capture asked for within it shares that profile, and no
	// second fetch starts within it. 0 fetches for each capture;
	// DefaultProfileWindow is the pager's default.
	ProfileWindow time.Duration
	// MaxFetches bounds the profile fetches in flight at once; default
	// DefaultMaxFetches.
	MaxFetches int
	Client     *http.Client
	// MaxBody is the largest payload taken; default DefaultMaxBody.
	MaxBody int64
	// ExternalURL is the pager's base URL as a person's browser reaches it
	// (no trailing slash); with it the API and the log lines carry each
	// incident's page.
	ExternalURL string
	// Prometheus is where a new page's facts are read (facts.go); nil
	// reads none from it, and the facts say so.
	Prometheus *promfacts.Client
	// Deltas holds the gateway's delta heap profiles, which a new page's
	// facts compare; nil compares none.
	Deltas Deltas
	// GCJob (only without Targets) is the Prometheus job of the process ProfileURL profiles,
	// whose garbage collector's share of CPU a new page's facts read;
	// empty reads none.
	GCJob string
	// FactsTimeout bounds the Prometheus reads of one page's facts, and
	// each post of its finding; default DefaultFactsTimeout.
	FactsTimeout time.Duration
	// Alertmanagers are the base URLs of the Alertmanagers a page's heap
	// finding is posted to (findings.go): all of an HA set's; none posts
	// none.
	Alertmanagers []string
}

// Handler serves the webhook endpoints and the incidents API.
type Handler struct {
	cfg           Config
	mux           *http.ServeMux
	notifications *prometheus.CounterVec
	duplicates    prometheus.Counter
	truncated     prometheus.Counter
	profiles      *prometheus.CounterVec
	fetches       *prometheus.CounterVec
	findings      *prometheus.CounterVec
	trace         traceMetrics
	captures      sync.WaitGroup
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
	// stored, when set (by a test), is called with each notification's
	// new alerts once they are stored, before they are announced.
	stored func([]store.Accepted)
}

// New registers the pager's metrics on reg and returns its Handler.
func New(cfg Config, reg prometheus.Registerer) *Handler {
	if cfg.MaxBody == 0 {
		cfg.MaxBody = DefaultMaxBody
	}
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
	cfg.ExternalURL = strings.TrimRight(cfg.ExternalURL, "/")
	rules := targets.Default(cfg.ProfileURL, cfg.TraceURL, cfg.GCJob)
	if cfg.Targets != nil {
		rules = *cfg.Targets
	}
	h := &Handler{
		cfg:          cfg,
		rules:        rules,
		last:         map[string]*shot{},
		mux:          http.NewServeMux(),
		pageCaptures: map[string]chan struct{}{},
		clock:        heapdelta.RealClock{},
		fetching:     make(chan struct{}, cfg.MaxFetches),
		notifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pager_notifications_total", Help: "Alert notifications accepted (retries excluded), by severity (page, ticket or other) and status.",
		}, []string{"severity", "status"}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pager_duplicate_notifications_total", Help: "Alert notifications dropped as repeats of ones already stored.",
		}),
		truncated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pager_truncated_alerts_total", Help: "Alerts Alertmanager left out of notifications past its webhook's max_alerts (truncatedAlerts): never received.",
		}),
		profiles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pager_profiles_total", Help: "Heap profiles recorded on incidents, by when (page, or after the page resolved) and result; incidents within one window share a fetch.",
		}, []string{"when", "result"}),
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pager_profile_fetches_total", Help: "Heap profiles fetched from -profile-url, by result: at most one per -profile-window.",
		}, []string{"result"}),
		findings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pager_findings_posted_total", Help: "Posts of a page's heap finding to an Alertmanager of -alertmanager-urls, by result.",
		}, []string{"result"}),
	}
	reg.MustRegister(h.notifications, h.duplicates, h.truncated, h.profiles, h.fetches, h.findings)
	h.trace = newTraceMetrics(reg)
	for _, r := range []string{"ok", "error"} {
		h.fetches.WithLabelValues(r)
		h.findings.WithLabelValues(r)
	}
	for _, sev := range []string{"page", "ticket", "other"} {
		for _, st := range []string{"firing", "resolved"} {
			h.notifications.WithLabelValues(sev, st)
		}
	}
	h.captureCtx, h.stopCaptures = context.WithCancel(context.Background())
	h.waits, h.stopWaits = context.WithCancel(context.Background())
	h.mux.HandleFunc("/webhook/page", h.webhook("page"))
	h.mux.HandleFunc("/webhook/ticket", h.webhook("ticket"))
	h.mux.HandleFunc("GET /api/incidents", h.listIncidents)
	h.mux.HandleFunc("GET /api/incidents/{id}", h.getIncident)
	h.mux.HandleFunc("GET /api/incidents/{id}/profile", h.getProfile)
	h.mux.HandleFunc("GET /api/incidents/{id}/delta/{which}", h.getDelta)
	h.mux.HandleFunc("GET /api/incidents/{id}/trace", h.getTrace)
	h.mux.HandleFunc("GET /incidents/{id}/trace", h.getTrace)
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Close waits for profile fetches in progress or waiting for a turn,
// cancelling them after the context ends; a shot still waiting for its
// window is called off at once, and the captures it serves record that.
func (h *Handler) Close(ctx context.Context) {
	h.stopWaits()
	done := make(chan struct{})
	go func() { h.captures.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		h.stopCaptures()
		<-done
	}
}

// fail answers in the error shape every burnlab process uses (OpenAI's).
func fail(w http.ResponseWriter, status int, msg string) {
	kind := "invalid_request_error"
	switch {
	case status == http.StatusUnauthorized:
		kind = "authentication_error"
	case status >= 500:
		kind = "server_error"
	}
	openai.WriteError(w, status, kind, msg)
}

func (h *Handler) webhook(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			fail(w, http.StatusMethodNotAllowed, "use POST with an Alertmanager webhook payload")
			return
		}
		if h.cfg.Token != "" {
			got := bearer.Token(r.Header.Values("Authorization"))
			if subtle.ConstantTimeCompare([]byte(got), []byte(h.cfg.Token)) != 1 {
				fail(w, http.StatusUnauthorized, "missing or wrong bearer token")
				return
			}
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBody))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				// Not a 413: the payload may well be valid, and
				// Alertmanager would drop the whole group for good.
				h.cfg.Log.Error().Int64("limit_bytes", tooBig.Limit).Str("endpoint", kind).
					Msg("payload over the pager's limit refused with 503: lower max_alerts in alertmanager.yml")
				fail(w, http.StatusServiceUnavailable, fmt.Sprintf("payload over %d bytes, the pager's limit: lower the webhook's max_alerts in alertmanager.yml", tooBig.Limit))
				return
			}
			// The body was cut short (the server's read timeout midway
			// through a large group, a reset): nothing says the payload
			// is bad, and Alertmanager drops a 4xx, so a 503 it retries.
			h.cfg.Log.Warn().Err(err).Str("endpoint", kind).Msg("payload read cut short, refused with 503 for Alertmanager to retry")
			fail(w, http.StatusServiceUnavailable, "reading payload: "+err.Error()+"; retry")
			return
		}
		var p payload
		if err := json.Unmarshal(body, &p); err != nil {
			fail(w, http.StatusBadRequest, "payload is not JSON: "+err.Error())
			return
		}
		if err := p.validate(); err != nil {
			fail(w, http.StatusBadRequest, err.Error())
			return
		}
		receiver := p.Receiver
		if receiver == "" {
			receiver = kind
		}
		// The pager's own findings (findings.go) come back from
		// Alertmanager, routed as their pages are: they are no pages, and
		// are neither stored nor announced.
		alerts := slices.DeleteFunc(slices.Clone(p.Alerts), isFinding)
		findings := len(p.Alerts) - len(alerts)
		accepted, captures, err := h.keep(receiver, kind, alerts)
		if err != nil {
			// Not stored, so not acknowledged: Alertmanager retries.
			h.cfg.Log.Error().Err(err).Msg("could not store notification")
			fail(w, http.StatusServiceUnavailable, "could not store the notification; retry")
			return
		}
		h.duplicates.Add(float64(len(alerts) - len(accepted)))
		if p.TruncatedAlerts > 0 {
			h.truncated.Add(float64(p.TruncatedAlerts))
			h.cfg.Log.Warn().Uint64("truncated_alerts", p.TruncatedAlerts).Int("alerts", len(p.Alerts)).Str("group", p.GroupKey).
				Msg("Alertmanager left alerts of this group out (max_alerts): they are not here")
		}
		if h.stored != nil {
			h.stored(accepted)
		}
		for i, a := range accepted {
			h.announce(a, captures[i])
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]int{"accepted": len(accepted), "duplicates": len(alerts) - len(accepted), "findings": findings})
	}
}

// keep stores a notification's alerts and registers their captures in one
// step: a resolve stored after its page finds the page's capture to wait
// for, however the two requests run.
func (h *Handler) keep(receiver, kind string, alerts []store.Alert) ([]store.Accepted, []capture, error) {
	if len(alerts) == 0 {
		return nil, nil, nil
	}
	h.ordering.Lock()
	defer h.ordering.Unlock()
	accepted, err := h.cfg.Store.AddNotification(receiver, kind, alerts, time.Now())
	if err != nil {
		return nil, nil, err
	}
	return accepted, h.register(accepted), nil
}

// validate refuses a payload Alertmanager would not send: one alert that
// fails refuses the whole group, so only what Alertmanager always sets is
// checked. A fingerprint that is not Alertmanager's is refused, since it
// names the incident and its profile's file; a missing alertname label is
// not (Alertmanager does not require one): store.AlertName names it.
func (p *payload) validate() error {
	if p.Version != "4" {
		return fmt.Errorf("unsupported webhook payload version %q: this pager reads version 4", p.Version)
	}
	if len(p.Alerts) == 0 {
		return errors.New("payload has no alerts")
	}
	for i, a := range p.Alerts {
		switch {
		case a.Fingerprint == "":
			return fmt.Errorf("alert %d has no fingerprint", i)
		case !validFingerprint(a.Fingerprint):
			return fmt.Errorf("alert %d has fingerprint %.40q, want Alertmanager's: 16 lowercase hex digits", i, a.Fingerprint)
		case a.Status != "firing" && a.Status != "resolved":
			return fmt.Errorf("alert %d has status %q, want firing or resolved", i, a.Status)
		case a.StartsAt.IsZero():
			return fmt.Errorf("alert %d has no startsAt", i)
		}
	}
	return nil
}

// validFingerprint says whether fp is one Alertmanager sends: a label
// set's 64-bit hash as 16 lowercase hex digits. Nothing else is taken,
// because the fingerprint names the incident and the incident names its
// profile's file.
func validFingerprint(fp string) bool {
	if len(fp) != 16 {
		return false
	}
	for _, c := range []byte(fp) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// severityLabel bounds the severity label of the pager's metrics: a label
// value taken as sent would let any client add a series per request.
func severityLabel(severity string) string {
	switch severity {
	case "page", "ticket":
		return severity
	}
	return "other"
}

// announce is the on-call's line: PAGE, TICKET or RESOLVED; then it starts
// the alert's capture and, for a new page or ticket, the reading of its
// facts.
func (h *Handler) announce(a store.Accepted, c capture) {
	severity := a.Severity
	h.notifications.WithLabelValues(severityLabel(severity), a.Alert.Status).Inc()
	msg := strings.ToUpper(severity)
	level := zerolog.WarnLevel
	if a.Alert.Status == "resolved" {
		msg, level = "RESOLVED", zerolog.InfoLevel
	}
	h.cfg.Log.WithLevel(level).
		Str("alertname", store.AlertName(&a.Alert)).
		Str("slo", a.Alert.Labels["sloth_slo"]).
		Str("severity", severity).
		Str("burn_rate", a.Alert.Annotations["burn_rate"]).
		Time("since", a.Alert.StartsAt).
		Str("incident", a.Incident).
		Str("summary", a.Alert.Annotations["summary"]).
		Str("url", h.IncidentURL(a.Incident)).
		Msg(msg)
	if c.shot != nil {
		h.captures.Go(func() {
			defer func() {
				h.mu.Lock()
				delete(h.pageCaptures, a.Incident)
				h.mu.Unlock()
				close(c.done)
			}()
			h.record(a, "page", c.shot)
		})
	}
	if a.Fired && (h.cfg.Prometheus != nil || h.cfg.Deltas != nil) {
		h.captures.Go(func() { h.readFacts(a) })
	}
	if a.Cleared {
		h.captures.Go(func() { h.postFinding(a.Incident) })
	}
	if a.Cleared && h.cfg.Prometheus != nil {
		h.captures.Go(func() { h.readGCAfter(a) })
	}
	if c.after {
		h.captures.Go(func() {
			if c.pending != nil {
				select {
				case <-c.pending:
				case <-h.captureCtx.Done():
					return
				}
			}
			h.captureAfter(a)
		})
	}
}
