package shape

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
