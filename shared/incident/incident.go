// Package incident is the pager's API: the JSON of GET /api/incidents, as
// the pager serves it and as the lab's e2e and the Grafana plugin read it.
package incident

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Profile is what the pager captured from the gateway when a page fired,
// or after it resolved.
type Profile struct {
	File  string     `json:"file,omitempty"` // relative to the data directory
	Total int64      `json:"total_bytes,omitempty"`
	Top   []TopEntry `json:"top,omitempty"`
	Error string     `json:"error,omitempty"`
	// Trace is the flight-recorder snapshot taken with the profile, when
	// the pager has a -trace-url.
	Trace *Trace `json:"trace,omitempty"`
	// TakenAt is when the capture finished; a journal written before it
	// existed gets the time of its record.
	TakenAt time.Time `json:"taken_at,omitzero"`
	// Rule is the pager config's rule that chose the processes profiled.
	Rule string `json:"rule,omitempty"`
	// Instances are the processes profiled, each with its own top or why
	// it has none, when the rule found them through Prometheus or named
	// several: the profile above is their merge.
	Instances []InstanceProfile `json:"instances,omitempty"`
	// Kinds are the profiles the rule takes beside the heap (cpu,
	// goroutine, mutex, block), each of every process, merged.
	Kinds []KindProfile `json:"kinds,omitempty"`
}

// KindProfile is one more kind of profile taken with the heap's.
type KindProfile struct {
	Kind       string            `json:"kind"`
	SampleType string            `json:"sample_type"`
	File       string            `json:"file,omitempty"`
	Total      int64             `json:"total,omitempty"`
	Top        []TopEntry        `json:"top,omitempty"`
	Error      string            `json:"error,omitempty"`
	Instances  []InstanceProfile `json:"instances,omitempty"`
}

// Kind is the profile of kind k, or nil.
func (p *Profile) Kind(k string) *KindProfile {
	for i := range p.Kinds {
		if p.Kinds[i].Kind == k {
			return &p.Kinds[i]
		}
	}
	return nil
}

// InstanceProfile is one process's part of a page's profile.
type InstanceProfile struct {
	Instance string     `json:"instance"`
	URL      string     `json:"url"`
	Total    int64      `json:"total,omitempty"` // in its kind's unit
	Top      []TopEntry `json:"top,omitempty"`
	Error    string     `json:"error,omitempty"`
}

// TopEntry is one function's flat alloc_space.
type TopEntry struct {
	Function string  `json:"function"`
	Flat     int64   `json:"flat_bytes"`
	FlatPct  float64 `json:"flat_pct"`
}

// Kinds of timeline event.
const (
	Firing       = "firing"        // a firing notification
	Resolved     = "resolved"      // a resolved notification
	ProfileTaken = "profile"       // the page-time profile
	ProfileAfter = "profile_after" // the profile taken once the page resolved
	// Superseded ends an incident whose alert Alertmanager sent again
	// with a later start (By), the earlier start's resolve never sent.
	Superseded = "superseded"
	// FactsRead is the page's facts, read when it fired (Facts); Note
	// says them in one line.
	FactsRead = "facts"
	// GCAfterRead is the collector's share read once the page resolved
	// (GCAfter); Note says it.
	GCAfterRead = "gc_after"
)

// Event is one entry of an incident's timeline: what happened, as data.
// The store records it; What says it in words wherever it is shown.
type Event struct {
	At   time.Time `json:"at"`
	Kind string    `json:"kind"`
	// Receiver and BurnRate are a notification's.
	Receiver string `json:"receiver,omitempty"`
	BurnRate string `json:"burn_rate,omitempty"`
	// Top is a profile's top alloc_space function; Error, its failure.
	Top   *TopEntry `json:"top,omitempty"`
	Error string    `json:"error,omitempty"`
	// By is the incident that superseded this one.
	By string `json:"by,omitempty"`
	// Note is the facts' line (Facts.Summary) of a FactsRead event, and
	// the words of a GCAfterRead's.
	Note string `json:"note,omitempty"`
}

// What is the event in words, as the pager's pages and the Grafana plugin
// show it.
func (e Event) What() string {
	switch e.Kind {
	case Firing, Resolved:
		what := strings.ToUpper(e.Kind)
		if e.BurnRate != "" {
			what += " burn " + e.BurnRate
		}
		return what + " (" + e.Receiver + ")"
	case ProfileTaken, ProfileAfter:
		what := "profile"
		if e.Kind == ProfileAfter {
			what = "profile after resolve"
		}
		switch {
		case e.Error != "":
			return what + " failed: " + e.Error
		case e.Top != nil:
			return fmt.Sprintf("%s captured: top alloc_space %s (%.1f%%)", what, e.Top.Function, e.Top.FlatPct)
		}
		return what + " captured"
	case Superseded:
		return "RESOLVED: Alertmanager sent the alert again with a later start, incident " + e.By
	case FactsRead, GCAfterRead:
		return e.Note
	}
	return e.Kind
}

// MarshalJSON adds the words to the facts, so the API's JSON reads as a
// timeline for a person with curl too; decoding ignores them.
func (e Event) MarshalJSON() ([]byte, error) {
	type facts Event // no MarshalJSON: no recursion
	return json.Marshal(struct {
		facts
		What string `json:"what"`
	}{facts(e), e.What()})
}

// String is the timeline line: the time and what happened.
func (e Event) String() string { return e.At.UTC().Format(time.RFC3339) + " " + e.What() }

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
	// Facts are what the pager read when the page fired: the burn of each
	// window pair, the budget, the slowest requests and the change in the
	// heap (facts.go).
	Facts *Facts `json:"facts,omitempty"`
	// GCAfter is the collector's share read once the page resolved, the
	// after of Facts.GC's before and during.
	GCAfter *GCAfter `json:"gc_after,omitempty"`
	// URL is the incident's page in the pager's web UI, absolute with the
	// pager's -external-url.
	URL string `json:"url,omitempty"`
}
