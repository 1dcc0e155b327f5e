package pproftop

import (
	"bytes"
	"compress/gzip"
	"errors"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

var sink [][]byte

const allocations, allocationSize = 2000, 4096

//go:noinline
func allocateALot() {
	for range allocations {
		sink = append(sink, make([]byte, allocationSize))
	}
	sink = nil
}

// A real heap profile of this process must name the function that
// allocated, with shares that add up.
//
// The runtime samples one allocation per 512 KiB on average, so 8 MiB
// gives about 16 samples and the estimate is often off by half: every one
// of allocateALot's allocations is recorded (MemProfileRate 1 while it
// runs), which the profile, written at the default rate, scales up as if
// sampled, so its figure is certain to be at least what it allocated. The
// allocs profile is cumulative over the process's life, so what earlier
// tests and earlier runs (-count=20) allocated is in it too, and reading
// a profile of every allocation recorded is itself the largest allocation
// by the second run (19 failures in 20): the test reads the difference
// from a profile taken just before (profile.Merge with it scaled by -1,
// as the pager's delta heap profiles are).
func TestTopOfARealHeapProfile(t *testing.T) {
	heap := func() *profile.Profile {
		t.Helper()
		var buf bytes.Buffer
		if err := pprof.Lookup("allocs").WriteTo(&buf, 0); err != nil {
			t.Fatal(err)
		}
		_, p, err := Read(&buf, MaxBytes)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	before := heap()
	rate := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	allocateALot()
	runtime.MemProfileRate = rate
	runtime.GC()
	before.Scale(-1)
	p, err := profile.Merge([]*profile.Profile{before, heap()})
	if err != nil {
		t.Fatal(err)
	}
	top, total, err := Top(p, "alloc_space", 5)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	var sum int64
	for _, e := range top {
		sum += e.Flat
		if strings.HasSuffix(e.Function, "pproftop.allocateALot") {
			found = e.Flat >= allocations*allocationSize && e == top[0]
		}
		if e.Cum < e.Flat {
			t.Errorf("%s: cum %d < flat %d", e.Function, e.Cum, e.Flat)
		}
	}
	if !found || sum > total || total <= 0 {
		t.Fatalf("top %+v of total %d", top, total)
	}
	if _, _, err := Top(p, "no_such_type", 1); err == nil {
		t.Error("an unknown sample type must be an error")
	}
	if _, _, err := Read(strings.NewReader("not a profile"), MaxBytes); err == nil {
		t.Error("garbage must not parse")
	}
}

// A decompression bomb: a little gzip that inflates far past the limit is
// refused after inflating no more than the limit, not parsed whole.
func TestReadRefusesADecompressionBomb(t *testing.T) {
	const limit = 1 << 20
	var bomb bytes.Buffer
	zw := gzip.NewWriter(&bomb)
	zeros := make([]byte, 1<<20)
	for range 64 { // 64 MiB of zeros: 64 KiB of gzip
		zw.Write(zeros)
	}
	zw.Close()
	var twice bytes.Buffer
	zw = gzip.NewWriter(&twice)
	zw.Write(bomb.Bytes())
	zw.Close()
	for name, c := range map[string]struct {
		raw  []byte
		want string
	}{
		"bomb":           {bomb.Bytes(), "inflate to over"},
		"gzipped twice":  {twice.Bytes(), "gzipped twice"},
		"over the limit": {make([]byte, limit+1), "over 1048576 bytes"},
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, _, err := Read(bytes.NewReader(c.raw), limit)
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want one saying %q", name, err, c.want)
		}
		// TotalAlloc counts every byte allocated, exactly (it is no
		// sample). Reading and inflating to the limit allocates a few
		// times the limit (ReadAll doubles its buffer); the whole bomb
		// would be 64 times it.
		if got := after.TotalAlloc - before.TotalAlloc; got > 8*limit {
			t.Errorf("%s: %d bytes allocated, want at most %d", name, got, 8*limit)
		}
	}
}

// Bytes alone do not bound what a parsed profile holds: an empty sample is
// two bytes and an object. A profile of more fields than MaxFields is
// refused before it is parsed, gzipped or not.
func TestReadRefusesAProfileOfTooManyFields(t *testing.T) {
	empties := bytes.Repeat([]byte{0x12, 0x00}, MaxFields+1)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(empties)
	zw.Close()
	for name, raw := range map[string][]byte{"raw": empties, "gzipped": gz.Bytes()} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, _, err := Read(bytes.NewReader(raw), 8<<20)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "fields") {
			t.Errorf("%s: err %v, want too many fields", name, err)
		}
		// Parsed, a million samples would be over 100 MB of objects.
		if got := after.TotalAlloc - before.TotalAlloc; got > 32<<20 {
			t.Errorf("%s: %d bytes allocated, want at most %d", name, got, 32<<20)
		}
	}
	if err := countFields([]byte("not a protobuf message at all")); err != nil {
		t.Errorf("text is the parser's to judge: %v", err)
	}
}
