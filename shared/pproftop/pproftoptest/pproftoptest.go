// Package pproftoptest makes real heap profiles for tests of the code that
// reads them (the pager's capture, its web UI, the Grafana plugin): the
// test process allocates most of its garbage in one known function, so a
// test can check that the function tops the profile, as the write-up's
// (*Baseline).Append tops the gateway's.
package pproftoptest

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/pprof"
	"testing"

	"github.com/google/pprof/profile"
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

// HeapProfile returns a real allocs profile of the test process: what it
// allocated while AllocateLikeTheBaseline ran, as the difference from a
// profile taken just before (profile.Merge with that one scaled by -1).
// The allocs profile is cumulative over the process's life, so a whole one
// holds what every earlier test allocated: under -count=20 the webhook
// tests' io.ReadAll of large bodies (580 MB a run) outgrew the 32 MiB by
// the second run. The difference holds the 32 MiB and what writing the
// first profile allocated (its parse waits until after), well under a
// MiB. At the runtime's one sample per 512 KiB the 32 MiB draw about 64
// samples and the rest about 2; the function falls from the top only if
// it draws no more than the rest, a chance far under 10⁻¹⁰.
func HeapProfile(t testing.TB) []byte {
	t.Helper()
	return deltaOver(t, AllocateLikeTheBaseline)
}

// IdleProfile is HeapProfile of a process that allocates nothing in
// between: the "before" of a burn, or the "after" of a fix. A test that
// compares a HeapProfile with one must use this, not a second
// HeapProfile: two draws of the same 64 samples differ by chance, and
// their difference holds the allocator, or not, by chance (equal about
// one time in 30).
func IdleProfile(t testing.TB) []byte {
	t.Helper()
	return deltaOver(t, func() {})
}

// deltaOver is the allocs profile of what the process allocated while
// work ran.
func deltaOver(t testing.TB, work func()) []byte {
	t.Helper()
	write := func() []byte {
		var buf bytes.Buffer
		if err := pprof.Lookup("allocs").WriteTo(&buf, 0); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	before := write()
	work()
	runtime.GC()
	after := write()
	var ps []*profile.Profile
	for i, raw := range [][]byte{before, after} {
		p, err := profile.ParseData(raw)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			p.Scale(-1)
		}
		ps = append(ps, p)
	}
	delta, err := profile.Merge(ps)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := delta.Write(&out); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
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

// Server is a process's pprof endpoint on loopback, as a gateway's
// /debug/pprof/allocs: it serves HeapProfile, taken once, to every
// request, until the test ends. It returns the profile's URL.
func Server(t testing.TB) string {
	t.Helper()
	prof := HeapProfile(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(prof) }))
	t.Cleanup(srv.Close)
	return srv.URL + "/debug/pprof/allocs"
}
