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

// The creep grows every long generation with the run. Whatever the load
// factor between 1.05 and 2.5 (how much longer than on a quiet gateway a
// stream takes under load), none breaches at the start and all do at the
// end; between, the share over the SLO is the same in every stretch of a
// hundred long generations, not only on average.
func TestTheCreepsBreachesClimbEvenly(t *testing.T) {
	s := Default()
	cost := func(n int) float64 { // on a quiet baseline, in SLOs
		r := float64(n) / float64(s.LongEvents)
		return LongCost * r * r
	}
	for _, factor := range []float64{1.05, 1.75, 2.5} {
		last := -1
		for _, p := range []float64{0, 0.25, 0.5, 0.75, 1} {
			whole := 0
			var blocks []int
			for from := 0; from < 1000; from += 100 {
				breach := 0
				for k := from; k < from+100; k++ {
					c := cost(s.CreepEvents(k, p))
					if factor*c > 1 {
						breach++
					}
					if later := cost(s.CreepEvents(k, p+0.05)); p < 1 && later <= c {
						t.Fatalf("long generation %d does not grow: %.3f SLOs at %.2f, %.3f later", k, c, p, later)
					}
				}
				whole += breach
				blocks = append(blocks, breach)
			}
			for i, b := range blocks {
				if math.Abs(float64(b)-float64(whole)/10) > 2 {
					t.Errorf("load factor %.2f, %.0f %% into the creep: long generations %d–%d breach %d in 100, the whole %.1f", factor, 100*p, 100*i, 100*i+99, b, float64(whole)/10)
				}
			}
			switch {
			case p == 0 && whole > 0:
				t.Errorf("load factor %.2f: %d of 1000 long generations breach at the start", factor, whole)
			case p == 1 && whole < 1000:
				t.Errorf("load factor %.2f: only %d of 1000 long generations breach at the end", factor, whole)
			case whole < last:
				t.Errorf("load factor %.2f: the breaches fell from %d to %d at %.0f %%", factor, last, whole, 100*p)
			}
			last = whole
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
