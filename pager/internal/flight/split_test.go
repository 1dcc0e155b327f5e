package flight

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http/httptest"
	"runtime/trace"
	"strings"
	"testing"
	"time"

	"burnlab/shared/service"
)

// A real flight recorder, served as the gateway serves it, records two
// requests: one that computes and then waits on a socket and has ended, one
// still blocked when the snapshot is taken. Split finds both by their IDs
// and puts the socket wait under network and the loop under running.
func TestSplitFindsRequestsAndTheirNetworkWait(t *testing.T) {
	fr, err := service.StartFlightRecorder(5*time.Second, 16<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Stop()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const wait = 150 * time.Millisecond
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		time.Sleep(wait)
		c.Write([]byte("x"))
	}()

	request := func(id string, work func()) {
		ctx, task := trace.NewTask(context.Background(), service.TraceTask)
		trace.Log(ctx, service.TraceRequestID, id)
		work()
		trace.Log(ctx, service.TraceRequestID, id)
		task.End()
	}
	var spun int
	request("ended-one", func() {
		for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
			spun++
		}
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		io.ReadFull(c, make([]byte, 1))
	})
	release, inFlight := make(chan struct{}), make(chan struct{})
	go request("in-flight", func() { close(inFlight); <-release })
	<-inFlight
	time.Sleep(10 * time.Millisecond) // so it is blocked, not about to be

	srv := httptest.NewServer(fr)
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || len(raw) == 0 {
		t.Fatalf("snapshot: %d bytes, %v", len(raw), err)
	}

	from, to, reqs, err := Split(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if !from.Before(to) || time.Since(to) > time.Minute || to.After(time.Now()) {
		t.Errorf("the snapshot covers %s to %s, not the last seconds", from, to)
	}
	found := map[string]bool{}
	for _, r := range reqs {
		found[r.RequestID] = true
		sum := r.Running + r.Assist + r.Runnable + r.Network + r.Other
		if d := sum - r.Seconds; d > 1e-6 || d < -1e-6 {
			t.Errorf("%s: the parts add up to %.6f s of %.6f s", r.RequestID, sum, r.Seconds)
		}
		switch r.RequestID {
		case "ended-one":
			if !r.Began || !r.Ended || r.Network < 0.8*wait.Seconds() || r.Running < 0.02 {
				t.Errorf("ended-one: %+v: want its start and end, ≥ %s on the network and its 50 ms loop running", r, wait*8/10)
			}
			if !strings.Contains(r.Words(), "% network") {
				t.Errorf("words: %s", r.Words())
			}
		case "in-flight":
			if !r.Began || r.Ended || r.Seconds < 0.005 {
				t.Errorf("in-flight: %+v: want it begun and not ended", r)
			}
			if !strings.Contains(r.Words(), "still running") {
				t.Errorf("words: %s", r.Words())
			}
		}
	}
	if !found["ended-one"] || !found["in-flight"] {
		t.Fatalf("requests found: %+v", reqs)
	}
	_ = spun
}

// What is not a trace is an error, never a panic.
func TestSplitRejectsWhatIsNotATrace(t *testing.T) {
	for _, in := range []string{"", "not a trace", "go 1.26 trace\x00\x00\x00" + strings.Repeat("\xff", 64)} {
		if _, _, _, err := Split(strings.NewReader(in)); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}

// FuzzSplit feeds Split cut and flipped snapshots of a real recorder:
// whatever it reads, it returns, with an error or without, and never
// panics (go test -fuzz FuzzSplit -fuzzminimizetime 0s
// ./pager/internal/flight: minimizing a 1 MiB input takes minutes, in
// which the fuzzer reports 0 execs/s).
func FuzzSplit(f *testing.F) {
	fr, err := service.StartFlightRecorder(time.Second, 1<<20)
	if err != nil {
		f.Fatal(err)
	}
	ctx, task := trace.NewTask(context.Background(), service.TraceTask)
	trace.Log(ctx, service.TraceRequestID, "seed")
	task.End()
	srv := httptest.NewServer(fr)
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		f.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	srv.Close()
	fr.Stop()
	f.Add(raw)
	f.Add(raw[:len(raw)/2])
	f.Fuzz(func(t *testing.T, b []byte) {
		Split(bytes.NewReader(b))
	})
}
