package pproftop

import (
	"bytes"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
)

var sink [][]byte

//go:noinline
func allocateALot() {
	for range 2000 {
		sink = append(sink, make([]byte, 4096))
	}
	sink = nil
}

// A real heap profile of this process must name the function that
// allocated, with shares that add up.
func TestTopOfARealHeapProfile(t *testing.T) {
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
			found = e.Flat > 4<<20 && e == top[0]
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
