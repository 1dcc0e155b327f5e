// Package shape is the traffic shape the load generator sends: how many
// streams start per second and how long each one is. `loadgen calibrate`
// writes it for the machine at hand; the lab and compose read it.
package shape

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
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
	}
	return nil
}

// Events is the length of stream i, and whether it is a long generation.
// The long one ends each block of LongEvery streams, so that no run of
// streams from the start holds more than its share of long ones: a fresh
// stack's first windows hold only the ramp's few streams, and with the
// long one in the middle of the first block it was one stream in 50, a 20x
// burn that could page through the quick pair before the steady 10x did.
func (s Shape) Events(i int) (int, bool) {
	if s.LongEvery > 0 && i%s.LongEvery == s.LongEvery-1 {
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
