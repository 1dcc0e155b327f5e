package pproftop

import (
	"bytes"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
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
// gives about 16 samples and the estimate is often off by half. Recording
// every allocation makes the figure exact and the test deterministic.
func TestTopOfARealHeapProfile(t *testing.T) {
	defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
	runtime.MemProfileRate = 1
	allocateALot()
	runtime.GC()
	var buf bytes.Buffer
	if err := pprof.Lookup("allocs").WriteTo(&buf, 0); err != nil {
		t.Fatal(err)
	}
	p, err := Parse(&buf)
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
	if _, err := Parse(strings.NewReader("not a profile")); err == nil {
		t.Error("garbage must not parse")
	}
}
