// Package pproftop ranks the functions of a pprof profile the way
// `go tool pprof -top` does, so a program can ask what the write-up asked
// by hand: which function allocates the most (flat alloc_space)?
package pproftop

import (
	"cmp"
	"fmt"
	"io"
	"slices"

	"github.com/google/pprof/profile"
)

// Entry is one function's share of a sample type.
type Entry struct {
	Function string  `json:"function"`
	Flat     int64   `json:"flat"`
	FlatPct  float64 `json:"flat_pct"`
	Cum      int64   `json:"cum"`
}

// Parse reads a profile in any format pprof accepts (gzipped proto too).
func Parse(r io.Reader) (*profile.Profile, error) {
	p, err := profile.Parse(r)
	if err != nil {
		return nil, fmt.Errorf("pproftop: %w", err)
	}
	return p, nil
}

// Top returns the n functions with the largest flat value of sampleType
// (e.g. "alloc_space"), with the total over all samples. Flat goes to the
// innermost frame, inlined frames included, as in pprof's -top.
func Top(p *profile.Profile, sampleType string, n int) ([]Entry, int64, error) {
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == sampleType {
			idx = i
		}
	}
	if idx < 0 {
		return nil, 0, fmt.Errorf("pproftop: profile has no %q samples", sampleType)
	}
	flat, cum := map[string]int64{}, map[string]int64{}
	var total int64
	for _, s := range p.Sample {
		v := s.Value[idx]
		total += v
		seen := map[string]bool{}
		for li, loc := range s.Location {
			for lj, line := range loc.Line {
				if line.Function == nil {
					continue
				}
				name := line.Function.Name
				if li == 0 && lj == 0 {
					flat[name] += v
				}
				if !seen[name] {
					seen[name] = true
					cum[name] += v
				}
			}
		}
	}
	entries := make([]Entry, 0, len(flat))
	for name, f := range flat {
		e := Entry{Function: name, Flat: f, Cum: cum[name]}
		if total > 0 {
			e.FlatPct = 100 * float64(f) / float64(total)
		}
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b Entry) int {
		return cmp.Or(cmp.Compare(b.Flat, a.Flat), cmp.Compare(a.Function, b.Function))
	})
	return entries[:min(n, len(entries))], total, nil
}
