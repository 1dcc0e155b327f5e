// Package pproftoptest makes real heap profiles for tests of the code that
// reads them (the pager's capture, its web UI, the Grafana plugin): the
// test process allocates most of its garbage in one known function, so a
// test can check that the function tops the profile, as the write-up's
// (*Baseline).Append tops the gateway's.
package pproftoptest

import (
	"bytes"
	"compress/gzip"
	"runtime"
	"runtime/pprof"
	"testing"
)

// Allocator is the name pprof gives AllocateLikeTheBaseline: a test checks
// that a profile's top function ends with it.
const Allocator = "pproftoptest.AllocateLikeTheBaseline"

var sink [][]byte

// AllocateLikeTheBaseline allocates 32 MiB in 8 KiB pieces and lets them
// go, so it is the top alloc_space function of any profile of the test
// process taken afterwards. It is kept out of line so pprof names it.
//
//go:noinline
func AllocateLikeTheBaseline() {
	for range 4000 {
		sink = append(sink, make([]byte, 8192))
	}
	sink = nil
}

// HeapProfile returns a real allocs profile of the test process, in which
// AllocateLikeTheBaseline made most of the garbage.
func HeapProfile(t testing.TB) []byte {
	t.Helper()
	AllocateLikeTheBaseline()
	runtime.GC()
	var buf bytes.Buffer
	if err := pprof.Lookup("allocs").WriteTo(&buf, 0); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Bomb is a decompression bomb served as a profile: inflated bytes of
// zeros, gzipped to about a thousandth of that.
func Bomb(t testing.TB, inflated int) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zeros := make([]byte, 1<<20)
	for left := inflated; left > 0; left -= len(zeros) {
		if _, err := zw.Write(zeros[:min(left, len(zeros))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
