package shape

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestExactlyOneLongPerBlockAndSeededLengths(t *testing.T) {
	s := Default()
	long := 0
	for i := range 1000 {
		n, isLong := s.Events(i)
		if isLong {
			long++
			if n != s.LongEvents {
				t.Fatalf("long stream of %d events", n)
			}
		} else if n < s.ShortMin || n > s.ShortMax {
			t.Fatalf("short stream of %d events", n)
		}
		if again, _ := s.Events(i); again != n {
			t.Fatal("lengths must be deterministic")
		}
	}
	if long != 10 {
		t.Fatalf("%d long streams in 1000, want exactly 10", long)
	}
	// No run of streams from the first holds more than its share.
	long = 0
	for i := range 1000 {
		if _, isLong := s.Events(i); isLong {
			long++
		}
		if long*s.LongEvery > i+1 {
			t.Fatalf("%d long streams among the first %d, over one in %d", long, i+1, s.LongEvery)
		}
	}
}

func TestSaveLoadAndFallback(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "shape.json")
	want := Default()
	want.Rate = 7.5
	if err := want.Save(path); err != nil {
		t.Fatal(err)
	}
	got, calibrated, err := LoadOrDefault(path)
	if err != nil || !calibrated || got.Rate != 7.5 || got.LongEvents != want.LongEvents {
		t.Fatalf("%+v %v %v", got, calibrated, err)
	}
	got, calibrated, err = LoadOrDefault(filepath.Join(dir, "absent.json"))
	if err != nil || calibrated || got.Rate != Default().Rate {
		t.Fatalf("absent file: %+v %v %v", got, calibrated, err)
	}
	os.WriteFile(path, []byte(`{"rate":-1,"short_min":1,"short_max":1}`), 0o644)
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "rate") {
		t.Fatalf("bad shape: %v", err)
	}
	os.WriteFile(path, []byte(`not json`), 0o644)
	if _, _, err := LoadOrDefault(path); err == nil || errors.Is(err, os.ErrNotExist) {
		t.Fatalf("garbage must be an error, not a fallback: %v", err)
	}
}

// The creep grows every long generation with the run, and the share of
// them the baseline's quadratic cost puts over the SLO climbs evenly from
// none to all, in every stretch of a hundred of them, not only on average.
func TestTheCreepsBreachesClimbEvenly(t *testing.T) {
	s := Default()
	cost := func(n int) float64 { // on the baseline, in SLOs
		r := float64(n) / float64(s.LongEvents)
		return LongCost * r * r
	}
	for _, p := range []float64{0, 0.05, 0.09, 0.1, 0.25, 0.5, 0.9, 1} {
		for from := 0; from < 1000; from += 100 {
			breach, shortest := 0, math.Inf(1)
			for k := from; k < from+100; k++ {
				c := cost(s.CreepEvents(k, p))
				if c > 1 {
					breach++
				}
				shortest = min(shortest, c)
				if later := cost(s.CreepEvents(k, p+0.05)); p < 1 && later <= c {
					t.Fatalf("long generation %d does not grow: %.3f SLOs at %.2f, %.3f later", k, c, p, later)
				}
			}
			if want := 100 * max(0, (1+CreepLead)*p-CreepLead); math.Abs(float64(breach)-want) > 2 || want == 0 && breach > 0 {
				t.Errorf("at %.0f %% of the creep, %d of long generations %d–%d breach, want %.0f", 100*p, breach, from, from+99, want)
			}
			if p == 0 && shortest > 0 && maxCost(s, from) > 0.9 {
				t.Errorf("at the start a long generation takes %.2f SLOs: within 10 %% of the threshold", maxCost(s, from))
			}
			if p == 0 && math.Abs(shortest-CreepFrom) > 0.02 {
				t.Errorf("the shortest long generation at the start takes %.2f SLOs, want the write-up's %.1f", shortest, CreepFrom)
			}
		}
	}
	// A stream's length follows its due time through EventsAt.
	s.Creep = time.Hour
	first, _ := s.EventsAt(s.LongEvery-1, 0)
	last, long := s.EventsAt(s.LongEvery-1, time.Hour)
	if !long || first != s.CreepEvents(0, 0) || last != s.CreepEvents(0, 1) || last <= first {
		t.Errorf("long generation 0: %d events at the start, %d at the end (long %v)", first, last, long)
	}
	if n, _ := s.EventsAt(s.LongEvery-1, 2*time.Hour); n != last {
		t.Errorf("past the creep's end a long generation stays at its end: %d, want %d", n, last)
	}
	s.LongEvery = 0
	if err := s.Validate(); err == nil {
		t.Error("a creep with no long generations validates")
	}
}

// maxCost is the longest of long generations from to from+99 at the
// creep's start, in SLOs on the baseline.
func maxCost(s Shape, from int) float64 {
	most := 0
	for k := from; k < from+100; k++ {
		most = max(most, s.CreepEvents(k, 0))
	}
	r := float64(most) / float64(s.LongEvents)
	return LongCost * r * r
}
