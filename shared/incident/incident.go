// Package incident is the pager's API: the JSON of GET /api/incidents, as
// the pager serves it and as the lab's e2e and the Grafana plugin read it.
package incident

import "time"

// Profile is what the pager captured from the gateway when a page fired,
// or after it resolved.
type Profile struct {
	File  string     `json:"file,omitempty"` // relative to the data directory
	Total int64      `json:"total_bytes,omitempty"`
	Top   []TopEntry `json:"top,omitempty"`
	Error string     `json:"error,omitempty"`
	// TakenAt is when the capture finished; a journal written before it
	// existed gets the time of its record.
	TakenAt time.Time `json:"taken_at,omitzero"`
}

// TopEntry is one function's flat alloc_space.
type TopEntry struct {
	Function string  `json:"function"`
	Flat     int64   `json:"flat_bytes"`
	FlatPct  float64 `json:"flat_pct"`
}

// Event is one line of an incident's timeline.
type Event struct {
	At   time.Time `json:"at"`
	What string    `json:"what"`
}

// Incident is the life of one alert: from its first firing notification to
// its resolution, identified by fingerprint and start.
type Incident struct {
	ID          string            `json:"id"`
	AlertName   string            `json:"alertname"`
	SLO         string            `json:"slo,omitempty"`
	Severity    string            `json:"severity"`
	Status      string            `json:"status"`
	StartsAt    time.Time         `json:"startsAt"`
	EndsAt      *time.Time        `json:"endsAt,omitempty"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	// BurnRate is the burn_rate annotation of the first firing
	// notification: how fast the budget burned when it paged.
	BurnRate string   `json:"burn_rate,omitempty"`
	Timeline []Event  `json:"timeline"`
	Profile  *Profile `json:"profile,omitempty"`
	// After is the profile taken from the same source once the page
	// resolved: the other side of the before/after comparison.
	After *Profile `json:"after_profile,omitempty"`
	// URL is the incident's page in the pager's web UI, absolute with the
	// pager's -external-url.
	URL string `json:"url,omitempty"`
}
