// Package pproftop ranks the functions of a pprof profile the way
// `go tool pprof -top` does, so a program can ask what the write-up asked
// by hand: which function allocates the most (flat alloc_space)?
package pproftop

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/google/pprof/profile"
	"google.golang.org/protobuf/encoding/protowire"
)

// Entry is one function's share of a sample type.
type Entry struct {
	Function string  `json:"function"`
	Flat     int64   `json:"flat"`
	FlatPct  float64 `json:"flat_pct"`
	Cum      int64   `json:"cum"`
}

// MaxBytes is the default bound of Read: a profile larger than 64 MiB,
// compressed or inflated, is refused. A Go service's heap profile is some
// tens to hundreds of KB; this is far past any real one and still small
// enough that a hostile target cannot exhaust the reader's memory.
const MaxBytes = 64 << 20

// ErrTooLarge is a profile past Read's limit.
var ErrTooLarge = errors.New("pproftop: profile too large")

// Read reads a profile in any format pprof accepts (gzipped proto too) from
// r, and returns its bytes as read and the profile. Neither what it reads
// nor what that inflates to may pass limit bytes: profile.Parse inflates a
// gzipped profile without a bound, so a target serving 1 MiB of gzip that
// inflates to 1 GiB took the reader to gigabytes. Here the inflated bytes
// are read through a limit first, and profile.ParseData gets a profile
// that is no longer gzipped (one gzipped twice is refused: ParseData would
// inflate the inner one unbounded). What Read holds at once is the bytes
// read, the inflated bytes and the parsed profile: a few times limit at
// most.
func Read(r io.Reader, limit int64) (raw []byte, p *profile.Profile, err error) {
	raw, err = io.ReadAll(io.LimitReader(r, limit+1))
	switch {
	case err != nil:
		return nil, nil, fmt.Errorf("pproftop: reading the profile: %w", err)
	case int64(len(raw)) > limit:
		return nil, nil, fmt.Errorf("%w: over %d bytes", ErrTooLarge, limit)
	}
	data := raw
	if isGzip(raw) {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, nil, fmt.Errorf("pproftop: %w", err)
		}
		if data, err = io.ReadAll(io.LimitReader(zr, limit+1)); err != nil {
			return nil, nil, fmt.Errorf("pproftop: inflating the profile: %w", err)
		}
		switch {
		case int64(len(data)) > limit:
			return nil, nil, fmt.Errorf("%w: %d bytes of gzip inflate to over %d bytes", ErrTooLarge, len(raw), limit)
		case isGzip(data):
			return nil, nil, errors.New("pproftop: a profile gzipped twice, which no profiler writes")
		}
	}
	if err := countFields(data); err != nil {
		return nil, nil, err
	}
	if p, err = profile.ParseData(data); err != nil {
		return nil, nil, fmt.Errorf("pproftop: %w", err)
	}
	return raw, p, nil
}

// MaxFields bounds the fields of a profile's top-level message: its
// samples, locations, functions, mappings and strings. The parser makes an
// object of each, so bytes alone do not bound its memory: 64 MiB of
// two-byte empty samples would be 32 million of them, gigabytes parsed. A
// Go service's heap profile has some tens of thousands.
const MaxFields = 1 << 20

// countFields refuses a profile with more than MaxFields top-level fields,
// before it is parsed. Data that is no protobuf message is left to the
// parser, which reads the legacy text formats too.
func countFields(data []byte) error {
	n := 0
	for len(data) > 0 {
		_, _, size := protowire.ConsumeField(data)
		if size < 0 {
			return nil
		}
		if n++; n > MaxFields {
			return fmt.Errorf("%w: over %d fields (samples, locations, functions, strings)", ErrTooLarge, MaxFields)
		}
		data = data[size:]
	}
	return nil
}

func isGzip(b []byte) bool { return len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b }

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
