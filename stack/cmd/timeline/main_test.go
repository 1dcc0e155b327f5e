package main

import (
	"flag"
	"strings"
	"testing"
	"time"

	"burnlab/stack/timeline"
)

// Validate names every wrong flag; the lab's own hour says nothing, a
// shorter run says what it costs.
func TestOptions(t *testing.T) {
	fs := flag.NewFlagSet("timeline", flag.ContinueOnError)
	var o options
	o.register(fs)
	if err := fs.Parse([]string{"-variant", "nightly", "-duration", "5m"}); err != nil {
		t.Fatal(err)
	}
	err := o.Validate()
	for _, want := range []string{"-variant", "-duration 5m0s: want at least 12m0s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v; want it to name %s", err, want)
		}
	}
	o = options{variant: "fixed", duration: time.Hour}
	if err := o.Validate(); err != nil || o.meaning() != "" {
		t.Errorf("the lab's hour: %v, %q", err, o.meaning())
	}
	o.duration = 20 * time.Minute
	if err := o.Validate(); err != nil || !strings.Contains(o.meaning(), "3x as fast as the lab's alert windows") {
		t.Errorf("20 minutes: %v, %q", err, o.meaning())
	}
}

// The summary says the ticket's and the page's hours as the hour lines do:
// in the run's own hours, however long it took.
func TestSummaryHoursAreTheRuns(t *testing.T) {
	s := func(v float64) *float64 { return &v }
	var b strings.Builder
	writeSummary(&b, timeline.Result{DurationS: 1200, TicketS: s(400), PageS: s(800)})
	for _, want := range []string{"fired 6m40s into the run: hour 24 of the three days", "fired 13m20s into the run: hour 48", "before the page: 24 hours of the three days"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in:\n%s", want, b.String())
		}
	}
}
