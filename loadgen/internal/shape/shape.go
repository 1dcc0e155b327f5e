// Package shape is the traffic shape the load generator sends: how many
// streams start per second and how long each one is. `loadgen calibrate`
// writes it for the machine at hand; the lab and compose read it.
package shape

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"time"
)

// Shape is a seeded, deterministic stream mix. Long generations are placed
// deterministically — exactly one in every LongEvery streams — because a
// random 1 % over a few hundred streams swings the burn rate between 0x and
// 20x or more, where one-in-a-hundred holds it at 10x.
type Shape struct {
	Rate       float64 `json:"rate"`        // streams started per second
	LongEvery  int     `json:"long_every"`  // one long generation per this many streams; 0: none
	LongEvents int     `json:"long_events"` // events of a long generation
	ShortMin   int     `json:"short_min"`   // fewest events of an ordinary stream
	ShortMax   int     `json:"short_max"`   // most events of an ordinary stream
	Seed       uint64  `json:"seed"`
	// Why records how the shape was chosen (calibration's reasoning).
	Why []string `json:"why,omitempty"`
	// Creep, when set, makes the long generations grow over this long
	// (CreepEvents): the write-up's three days. It is the run's, not the
	// calibrated file's, as the rate a flag overrides is.
	Creep time.Duration `json:"-"`
}

// LongCost is how many times the SLO a long generation of LongEvents takes
// on the baseline build: calibrate chooses LongEvents so, with a margin
// for noise on either side of the threshold.
const LongCost = 2.5

// The write-up's creep: "p99 had quietly climbed from 180 ms to 580 ms
// over three days". The p99 of a mix with one long generation in 100 is
// its shortest long generations, so the creep grows the long ones.
//
// Its figures are costs on a quiet baseline gateway, the calibration's
// (LongEvents takes LongCost SLOs). Under the lab's own load a long
// generation takes 1.5–2x that here (the collector and the other
// streams; 1.5x alone, 2x beside a second lab), so the creep leaves room
// for any such factor from 1.05 to 2.5: at its start the longest takes
// 0.4 SLOs (0.88 at 2.2x), at its end the shortest 0.96.
const (
	// CreepFrom is the quiet cost of the shortest long generation at the
	// creep's start, in SLOs.
	CreepFrom = 0.08
	// CreepSpread is how many times the longest long generation costs the
	// shortest at any moment: the spread that makes the share over the
	// SLO climb over most of the run rather than all at once.
	CreepSpread = 5.0
	// CreepGrowth is how many times every long generation's cost grows
	// over the creep.
	CreepGrowth = 12.0
	// golden is the golden ratio's fractional part: k·golden mod 1 spreads
	// the long generations' places over [0, 1) evenly at every scale, so
	// that each window's share of breaches is the creep's, not luck's.
	golden = 0.6180339887498949
)

// CreepEvents is the length of long generation number k (counting long
// ones only) started at t, from 0 to 1, of the creep. Each long
// generation has a place q in [0, 1) and costs, on a quiet baseline,
//
//	CreepFrom · CreepSpread^q · CreepGrowth^t  SLOs,
//
// so every one grows by the same factor as t rises, and the share over
// the SLO climbs from none to all while the threshold sweeps the spread:
// under a load factor of 1.75 from 14 % of the run to 79 %, the burn from
// 0x to 10x. The baseline's cost is quadratic in the events, so a cost c
// is LongEvents · √(c / LongCost) events.
func (s Shape) CreepEvents(k int, t float64) int {
	_, q := math.Modf(float64(k) * golden)
	cost := CreepFrom * math.Pow(CreepSpread, q) * math.Pow(CreepGrowth, min(max(t, 0), 1))
	return max(1, int(math.Round(float64(s.LongEvents)*math.Sqrt(cost/LongCost))))
}

// Default is the shape used when no calibrated file exists, chosen from
// figures measured on a 2-core VM (baseline cost ≈ 10–25 ns × events²): a
// long generation of 14,000 events takes 2–5 s there (every one breaches),
// an ordinary stream of at most 800 events under 20 ms.
func Default() Shape {
	return Shape{Rate: 25, LongEvery: 100, LongEvents: 14000, ShortMin: 300, ShortMax: 800, Seed: 1,
		Why: []string{"built-in default; run `loadgen calibrate` to fit this machine"}}
}

// Validate rejects shapes that cannot be sent.
func (s Shape) Validate() error {
	switch {
	case s.Rate <= 0:
		return fmt.Errorf("shape: rate must be positive, got %v", s.Rate)
	case s.LongEvery < 0 || s.LongEvery == 1:
		return fmt.Errorf("shape: long_every must be 0 (no long streams) or at least 2, got %d", s.LongEvery)
	case s.LongEvery > 0 && s.LongEvents < 1:
		return fmt.Errorf("shape: long_events must be positive, got %d", s.LongEvents)
	case s.ShortMin < 1 || s.ShortMax < s.ShortMin:
		return fmt.Errorf("shape: need 1 ≤ short_min ≤ short_max, got %d–%d", s.ShortMin, s.ShortMax)
	case s.Creep < 0:
		return fmt.Errorf("shape: creep %s: want 0 (none) or more", s.Creep)
	case s.Creep > 0 && s.LongEvery == 0:
		return errors.New("shape: a creep grows the long generations, and long_every 0 sends none")
	}
	return nil
}

// Events is the length of stream i, and whether it is a long generation.
// The long one ends each block of LongEvery streams, so that no run of
// streams from the start holds more than its share of long ones: a fresh
// stack's first windows hold only the ramp's few streams, and with the
// long one in the middle of the first block it was one stream in 50, a 20x
// burn that could page through the quick pair before the steady 10x did.
func (s Shape) Events(i int) (int, bool) { return s.EventsAt(i, 0) }

// EventsAt is Events for a stream due at, into a creep when Shape.Creep
// is set.
func (s Shape) EventsAt(i int, at time.Duration) (int, bool) {
	if s.LongEvery > 0 && i%s.LongEvery == s.LongEvery-1 {
		if s.Creep > 0 {
			return s.CreepEvents(i/s.LongEvery, at.Seconds()/s.Creep.Seconds()), true
		}
		return s.LongEvents, true
	}
	rng := rand.New(rand.NewPCG(s.Seed, uint64(i))) //nolint:gosec // G115: a stream's index is never negative
	return s.ShortMin + rng.IntN(s.ShortMax-s.ShortMin+1), false
}

// LongShare is the fraction of streams that are long generations.
func (s Shape) LongShare() float64 {
	if s.LongEvery == 0 {
		return 0
	}
	return 1 / float64(s.LongEvery)
}

// Load reads a shape file; a missing file is os.ErrNotExist, so callers can
// fall back to Default.
func Load(path string) (Shape, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Shape{}, fmt.Errorf("shape: %w", err)
	}
	var s Shape
	if err := json.Unmarshal(b, &s); err != nil {
		return Shape{}, fmt.Errorf("shape %s: %w", path, err)
	}
	if err := s.Validate(); err != nil {
		return Shape{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// LoadOrDefault reads path, or returns Default when it does not exist.
func LoadOrDefault(path string) (Shape, bool, error) {
	if path == "" {
		return Default(), false, nil
	}
	s, err := Load(path)
	if errors.Is(err, os.ErrNotExist) {
		return Default(), false, nil
	}
	return s, err == nil, err
}

// Save writes the shape as indented JSON.
func (s Shape) Save(path string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
