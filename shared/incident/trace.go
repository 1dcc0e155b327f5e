package incident

import (
	"fmt"
	"strings"
	"time"
)

// Trace is a flight-recorder snapshot taken with a profile: the last
// seconds of the profiled process's execution trace, kept as a file `go
// tool trace` opens, and where its slowest requests' time went.
type Trace struct {
	File         string  `json:"file,omitempty"` // relative to the data directory
	Bytes        int64   `json:"bytes"`
	FetchSeconds float64 `json:"fetch_seconds"`
	// From and To are the wall-clock times the snapshot covers.
	From time.Time `json:"from,omitzero"`
	To   time.Time `json:"to,omitzero"`
	// Requests are the snapshot's slowest requests, slowest first.
	Requests []RequestTime `json:"requests,omitempty"`
	Error    string        `json:"error,omitempty"`
}

// Seconds is how much time the snapshot covers.
func (t *Trace) Seconds() float64 { return t.To.Sub(t.From).Seconds() }

// Find returns the request with the ID, if the snapshot holds it.
func (t *Trace) Find(requestID string) (RequestTime, bool) {
	if t == nil || requestID == "" {
		return RequestTime{}, false
	}
	for _, r := range t.Requests {
		if r.RequestID == requestID {
			return r, true
		}
	}
	return RequestTime{}, false
}

// RequestTime splits the wall time of one request the snapshot holds by
// what its goroutine was doing. The parts add up to Seconds.
type RequestTime struct {
	RequestID string `json:"request_id"`
	// Seconds is the request's wall time within the snapshot; Began and
	// Ended say whether its start and its end are in it (a request that
	// began before the snapshot shows only its end).
	Seconds float64 `json:"seconds"`
	Began   bool    `json:"began"`
	Ended   bool    `json:"ended"`
	// Running is time on a CPU doing the request's own work; Assist on a
	// CPU, or waiting, in the collector's mark assist, the marking a
	// goroutine that allocates is drafted into; Runnable ready but waiting
	// for a CPU; Network blocked on a socket; Other the rest (system calls,
	// locks, waiting for the collector's stop-the-world).
	Running  float64 `json:"running_seconds"`
	Assist   float64 `json:"assist_seconds"`
	Runnable float64 `json:"runnable_seconds"`
	Network  float64 `json:"network_seconds"`
	Other    float64 `json:"other_seconds"`
}

// Words says the split: "1.35 s = 38 % running, 29 % mark assist, 25 %
// waiting for a CPU, 8 % network, 0 % other", with the part the snapshot
// could not see named.
func (r RequestTime) Words() string {
	if r.Seconds <= 0 {
		return "no time seen in the snapshot"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%.3f s = ", r.Seconds)
	parts := []struct {
		v    float64
		name string
	}{{r.Running, "running"}, {r.Assist, "mark assist"}, {r.Runnable, "waiting for a CPU"}, {r.Network, "network"}, {r.Other, "other"}}
	for i, p := range parts {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%.0f %% %s", 100*p.v/r.Seconds, p.name)
	}
	switch {
	case !r.Began && !r.Ended:
		b.WriteString(" (began before the snapshot and was still running at its end)")
	case !r.Began:
		b.WriteString(" (began before the snapshot: its end only)")
	case !r.Ended:
		b.WriteString(" (still running at the snapshot's end)")
	}
	return b.String()
}
