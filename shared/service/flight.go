package service

import (
	"fmt"
	"net/http"
	"runtime/trace"
	"sync"
	"time"
)

// FlightRecorderPath is where the admin listener serves the flight
// recorder's snapshot.
const FlightRecorderPath = "/debug/flightrecorder"

// A request a service wants found in a snapshot runs in a trace task of
// type TraceTask (runtime/trace.NewTask) that logs its request ID under the
// category TraceRequestID, when it begins and again when it ends: a
// snapshot that begins after the request did still finds it by the second.
const (
	TraceTask      = "request"
	TraceRequestID = "request_id"
)

// FlightRecorder keeps the last seconds of the process's execution trace in
// memory (runtime/trace.FlightRecorder): per goroutine, when it ran, waited
// for a CPU, blocked on the network or was drafted into the garbage
// collector's mark assist. A pager asks for a snapshot when an alert fires,
// so the trace of the seconds before the page survives it. Tracing costs a
// little CPU on every goroutine switch and system call, all the time:
// docs/performance.md has the measured cost.
type FlightRecorder struct {
	fr *trace.FlightRecorder
	// mu lets one snapshot be written at a time, as WriteTo requires; a
	// second request waits for the first rather than failing.
	mu sync.Mutex
}

// StartFlightRecorder starts recording a window of at least minAge of
// trace, and at most maxBytes of it, whichever is smaller.
func StartFlightRecorder(minAge time.Duration, maxBytes uint64) (*FlightRecorder, error) {
	if minAge <= 0 || maxBytes == 0 {
		return nil, fmt.Errorf("flight recorder: window %s and size %d must both be positive", minAge, maxBytes)
	}
	fr := trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: minAge, MaxBytes: maxBytes})
	if err := fr.Start(); err != nil {
		return nil, fmt.Errorf("flight recorder: %w", err)
	}
	return &FlightRecorder{fr: fr}, nil
}

// Stop ends the recording; snapshots asked for later fail.
func (f *FlightRecorder) Stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fr.Stop()
}

// ServeHTTP writes a snapshot of the window, a trace `go tool trace` opens.
func (f *FlightRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "use GET", http.StatusMethodNotAllowed)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.fr.Enabled() {
		http.Error(w, "the flight recorder is stopped", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="flightrecorder.trace"`)
	if _, err := f.fr.WriteTo(w); err != nil {
		// Headers may be out already: all that is left is to cut the
		// response short, so the reader sees a broken trace, not a whole one.
		panic(http.ErrAbortHandler)
	}
}
