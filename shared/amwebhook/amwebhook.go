// Package amwebhook is Alertmanager's webhook body (version 4): what the
// pager receives, journals and acts on, and what the lab renders with
// amtool's templates to check the page a receiver would send. One
// definition, so the two cannot drift.
package amwebhook

import "time"

// Message is a webhook body: one notification of an alert group.
type Message struct {
	Version  string  `json:"version"`
	GroupKey string  `json:"groupKey"`
	Status   string  `json:"status"`
	Receiver string  `json:"receiver"`
	Alerts   []Alert `json:"alerts"`
	// TruncatedAlerts is how many alerts of the group Alertmanager left
	// out, past its webhook's max_alerts: they never reach the receiver.
	TruncatedAlerts uint64 `json:"truncatedAlerts"`
}

// Alert is one alert of a Message. Alertmanager's v2 API holds the same
// fields but for Status, an object there.
type Alert struct {
	Status       string            `json:"status"`
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Fingerprint  string            `json:"fingerprint"`
}
