//go:build unix

package heapdelta

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/pprof"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"burnlab/shared/pproftop"
)

// BenchmarkDeltaCapture measures what one delta costs the process that
// serves it: the CPU of one allocs?seconds=1 capture, and the profile's
// size. The served process is this one, with an allocation load running
// (about 3 MB/s, in a few functions), so the CPU of a capture is the
// process's CPU over the capture minus its CPU over an interval as long
// with only the load (just after, or every other time just before): the
// load's share cancels out, and what is left is
// the two heap snapshots, their parsing and merging, and the profile
// written (and this process's client reading it, a small part). Bytes
// allocated are counted the same way. The load's garbage collections make
// single figures noisy, so the median is reported; each iteration takes
// two seconds; run it with -benchtime=20x.
//
// A heap profile holds one record per distinct allocating stack ever
// sampled since the process started, and a snapshot's cost grows with
// them; the later cases first add 256, then 2,048 stacks of about 30
// frames, as a long-running gateway accumulates, and report how many the
// profile then holds.
//
//	go test -run '^$' -bench DeltaCapture -benchtime 20x ./pager/internal/heapdelta/
func BenchmarkDeltaCapture(b *testing.B) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { allocationLoad(ctx) })
	defer func() { stop(); wg.Wait() }()

	for _, stacks := range []int{0, 256, 2048} {
		b.Run(fmt.Sprintf("stacks=+%d", stacks), func(b *testing.B) {
			if stacks > 0 {
				addStacks(stacks)
			}
			var costs, allocs []float64
			var size int
			for i := 0; b.Loop(); i++ {
				// Idle first every other time, so a drift in the load's
				// CPU does not bias the difference one way.
				var capture, idle time.Duration
				if i%2 == 1 {
					idle = idleCPU(b, time.Second)
				}
				a0, c0, began := allocated(), processCPU(b), time.Now()
				raw := get(b, srv.URL+"/debug/pprof/allocs?seconds=1")
				took := time.Since(began)
				capture = processCPU(b) - c0
				// The load's 3 MB/s is left out as the CPU's idle share is.
				allocs = append(allocs, (float64(allocated()-a0)-3e6*took.Seconds())/1e6)
				if i%2 == 0 {
					idle = idleCPU(b, took)
				}
				costs = append(costs, (capture-idle).Seconds()*1e3)
				size = len(raw)
			}
			_, p, err := pproftop.Read(bytes.NewReader(get(b, srv.URL+"/debug/pprof/allocs")), pproftop.MaxBytes)
			if err != nil {
				b.Fatal(err)
			}
			slices.Sort(costs)
			slices.Sort(allocs)
			b.Logf("CPU per capture, ms, sorted: %.1f", costs)
			b.ReportMetric(costs[len(costs)/2], "cpu-ms/capture")
			b.ReportMetric(allocs[len(allocs)/2], "alloc-MB/capture")
			b.ReportMetric(float64(size)/1e3, "kB/profile")
			b.ReportMetric(float64(len(p.Sample)), "stacks")
			b.ReportMetric(0, "ns/op") // an op is a second by design
		})
	}
}

// idleCPU is the CPU this process uses over d while it only runs its
// load.
func idleCPU(b *testing.B, d time.Duration) time.Duration {
	c := processCPU(b)
	time.Sleep(d)
	return processCPU(b) - c
}

// allocated is the bytes this process has allocated on the heap.
func allocated() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// processCPU is the CPU this process has used, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func get(b *testing.B, url string) []byte {
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("%s: %s, %v", url, resp.Status, err)
	}
	return raw
}

// The load's functions return what they allocate, which puts it on the
// heap.

//go:noinline
func loadA() []byte { return make([]byte, 1024) }

//go:noinline
func loadB() []byte { return make([]byte, 1024) }

//go:noinline
func loadC() []byte { return make([]byte, 1024) }

// allocationLoad allocates about 3 MB/s, 1 KiB at a time from three
// functions, until ctx ends: a steady load, so that its CPU over two
// equal intervals is about equal.
func allocationLoad(ctx context.Context) {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	var kept []byte
	defer func() { runtime.KeepAlive(kept) }()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			for i := range 3 {
				switch i {
				case 0:
					kept = loadA()
				case 1:
					kept = loadB()
				default:
					kept = loadC()
				}
			}
		}
	}
}

// addStacks makes n distinct allocating stacks (n a power of 2) and,
// recording every allocation meanwhile, puts each in the heap profile.
func addStacks(n int) {
	defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
	runtime.MemProfileRate = 1
	depth := 0
	for 1<<depth < n {
		depth++
	}
	for path := range uint(n) {
		runtime.KeepAlive(branch(depth, path))
	}
	runtime.GC()
	runtime.GC() // the profile is published as of a completed cycle
}

//go:noinline
func branch(depth int, path uint) []byte {
	switch {
	case depth == 0:
		return make([]byte, 64)
	case path&1 == 0:
		return left(depth-1, path>>1)
	default:
		return right(depth-1, path>>1)
	}
}

//go:noinline
func left(depth int, path uint) []byte { return branch(depth, path) }

//go:noinline
func right(depth int, path uint) []byte { return branch(depth, path) }
