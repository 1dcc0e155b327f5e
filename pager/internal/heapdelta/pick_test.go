package heapdelta

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// window is a delta sample over [from, to], seconds after t0; Pick reads
// only the times.
func window(from, to int) Sample {
	return Sample{From: t0.Add(time.Duration(from) * time.Second), To: t0.Add(time.Duration(to) * time.Second)}
}

func TestPick(t *testing.T) {
	// The burn runs from t0+300 s to t0+600 s, when the alert fired;
	// deltas may end up to Slack (30 s) later, at t0+630 s.
	burnStart, fired := t0.Add(300*time.Second), t0.Add(600*time.Second)
	for _, c := range []struct {
		name           string
		samples        []Sample
		before, during Sample
		reason         []string // all in the reason; none when ok
	}{
		{
			name:    "every 30 s",
			samples: []Sample{window(240, 250), window(270, 280), window(300, 310), window(570, 580), window(600, 610), window(630, 640)},
			before:  window(270, 280), during: window(600, 610),
		},
		{
			name:    "boundaries: ends at the burn's start; ends at fired+Slack",
			samples: []Sample{window(290, 300), window(620, 630), window(621, 631)},
			before:  window(290, 300), during: window(620, 630),
		},
		{
			name:    "in any order",
			samples: []Sample{window(620, 630), window(100, 110), window(290, 300), window(400, 410)},
			before:  window(290, 300), during: window(620, 630),
		},
		{
			name:    "only one across the burn's start: it stands for the burn",
			samples: []Sample{window(200, 210), window(295, 305), window(640, 650)},
			before:  window(200, 210), during: window(295, 305),
		},
		{
			name:    "inside is preferred to a newer one across the start",
			samples: []Sample{window(200, 210), window(301, 311), window(295, 305)},
			before:  window(200, 210), during: window(301, 311),
		},
		{
			name:    "nothing from before",
			samples: []Sample{window(365, 375), window(395, 405)},
			reason:  []string{"no delta profile from before the burn (it began at 12:05:00 UTC): the oldest the pager holds was taken at 12:06:15 UTC, inside the burn window"},
		},
		{
			name:    "nothing from before: the oldest straddles the start",
			samples: []Sample{window(295, 305)},
			reason:  []string{"taken at 12:05:05 UTC, across the burn's start"},
		},
		{
			name:    "nothing from during: the pager stopped",
			samples: []Sample{window(200, 210), window(230, 240)},
			reason:  []string{"no delta profile from during the burn (12:05:00 UTC to 12:10:00 UTC): the newest the pager holds by then was taken at 12:04:00 UTC, before the burn"},
		},
		{
			name:    "nothing before or during: all taken later",
			samples: []Sample{window(700, 710)},
			reason: []string{
				"the oldest the pager holds was taken at 12:11:50 UTC, after the burn window",
				"; no delta profile from during the burn (12:05:00 UTC to 12:10:00 UTC): every one the pager holds was taken after 12:10:30 UTC",
			},
		},
		{
			name:   "none at all",
			reason: []string{"the pager holds no delta profiles"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := slices.Clone(c.samples)
			before, during, reason, ok := Pick(c.samples, burnStart, fired)
			if !slices.EqualFunc(in, c.samples, func(a, b Sample) bool { return a.From.Equal(b.From) && a.To.Equal(b.To) }) {
				t.Error("Pick changed its samples")
			}
			if ok != (c.reason == nil) {
				t.Fatalf("ok %v, reason %q", ok, reason)
			}
			for _, r := range c.reason {
				if !strings.Contains(reason, r) {
					t.Errorf("reason %q\nwant it to say %q", reason, r)
				}
			}
			if !before.To.Equal(c.before.To) || !before.From.Equal(c.before.From) || !during.To.Equal(c.during.To) || !during.From.Equal(c.during.From) {
				t.Errorf("picked before %s-%s during %s-%s, want %s-%s and %s-%s",
					before.From.Sub(t0), before.To.Sub(t0), during.From.Sub(t0), during.To.Sub(t0),
					c.before.From.Sub(t0), c.before.To.Sub(t0), c.during.From.Sub(t0), c.during.To.Sub(t0))
			}
		})
	}
	if _, _, reason, ok := Pick([]Sample{window(0, 10)}, fired, burnStart); ok || !strings.Contains(reason, "burn window is empty") {
		t.Errorf("a burn that starts after it fired: %v, %q", ok, reason)
	}
}
