// Package webhook is the pager's receiving side: it accepts Alertmanager
// webhook notifications (payload version 4), checks them, has the
// lifecycle store them durably (Sink; an error is a 503 Alertmanager
// retries), tells the on-call in one log line per alert, and answers.
// What the pager then does with each alert is package lifecycle's; the
// incidents' API and pages are package web's.
package webhook

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"burnlab/pager/internal/lifecycle"
	"burnlab/pager/internal/store"
	"burnlab/pager/internal/web"
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

// Sink stores the alerts of a notification and acts on them: the
// lifecycle (lifecycle.Lifecycle.Accept). It returns those that were news;
// an error means none was stored.
type Sink interface {
	Accept(receiver, kind string, alerts []store.Alert) ([]store.Accepted, error)
}

// Config is what a Handler needs.
type Config struct {
	Sink Sink
	Log  zerolog.Logger
	// Token, when set, must arrive as `Authorization: Bearer <token>`
	// (Alertmanager's http_config.authorization), the scheme in any case
	// (bearer.Token).
	Token string
	// MaxBody is the largest payload taken; default DefaultMaxBody.
	MaxBody int64
	// ExternalURL is the pager's base URL as a person's browser reaches it
	// (no trailing slash); with it the log lines carry each incident's
	// page.
	ExternalURL string
}

// Handler serves the webhook endpoints.
type Handler struct {
	cfg           Config
	mux           *http.ServeMux
	notifications *prometheus.CounterVec
	duplicates    prometheus.Counter
	truncated     prometheus.Counter
}

// New registers the receiver's metrics on reg and returns its Handler.
func New(cfg Config, reg prometheus.Registerer) *Handler {
	if cfg.MaxBody == 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	h := &Handler{
		cfg: cfg,
		mux: http.NewServeMux(),
		notifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pager_notifications_total", Help: "Alert notifications accepted (retries excluded), by severity (page, ticket or other) and status.",
		}, []string{"severity", "status"}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pager_duplicate_notifications_total", Help: "Alert notifications dropped as repeats of ones already stored.",
		}),
		truncated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pager_truncated_alerts_total", Help: "Alerts Alertmanager left out of notifications past its webhook's max_alerts (truncatedAlerts): never received.",
		}),
	}
	reg.MustRegister(h.notifications, h.duplicates, h.truncated)
	for _, sev := range []string{"page", "ticket", "other"} {
		for _, st := range []string{"firing", "resolved"} {
			h.notifications.WithLabelValues(sev, st)
		}
	}
	h.mux.HandleFunc("/webhook/page", h.webhook("page"))
	h.mux.HandleFunc("/webhook/ticket", h.webhook("ticket"))
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

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
		// The pager's own findings (lifecycle.IsFinding) come back from
		// Alertmanager, routed as their pages are: they are no pages, and
		// are neither stored nor announced.
		alerts := slices.DeleteFunc(slices.Clone(p.Alerts), lifecycle.IsFinding)
		findings := len(p.Alerts) - len(alerts)
		accepted, err := h.cfg.Sink.Accept(receiver, kind, alerts)
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
		for _, a := range accepted {
			h.announce(a)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]int{"accepted": len(accepted), "duplicates": len(alerts) - len(accepted), "findings": findings})
	}
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
		case !store.ValidFingerprint(a.Fingerprint):
			return fmt.Errorf("alert %d has fingerprint %.40q, want Alertmanager's: 16 lowercase hex digits", i, a.Fingerprint)
		case a.Status != "firing" && a.Status != "resolved":
			return fmt.Errorf("alert %d has status %q, want firing or resolved", i, a.Status)
		case a.StartsAt.IsZero():
			return fmt.Errorf("alert %d has no startsAt", i)
		}
	}
	return nil
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

// announce is the on-call's line: PAGE, TICKET or RESOLVED.
func (h *Handler) announce(a store.Accepted) {
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
		Str("url", web.IncidentURL(h.cfg.ExternalURL, a.Incident)).
		Msg(msg)
}
