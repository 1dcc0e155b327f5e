//go:build load

// The gateway under load and abuse, over loopback, bounded in time: run by
// `make load` (part of `make test`) without the race detector, one test at
// a time, so the figures they log are the gateway's own.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"burnlab/gateway/internal/redact"
	"burnlab/shared/openai/openaitest"
	"burnlab/shared/syncbuf"
	"burnlab/shared/variant"
)

// loadUpstream streams, for each request, a text derived from its
// X-Request-Id: tokens with an e-mail address split across two events
// every 50 events. "model":"big" asks for 20,000 events, else 2,000.
func loadUpstream() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Model string }
		json.NewDecoder(r.Body).Decode(&req)
		n := 2000
		if req.Model == "big" {
			n = 20000
		}
		w.Header().Set("Content-Type", "text/event-stream")
		bw := bufio.NewWriterSize(w, 32<<10)
		// Made as it is sent: a stream its reader stalls costs only what
		// was read.
		next := pieces(r.Header.Get("X-Request-Id"))
		for range n {
			c, _ := json.Marshal(next())
			if _, err := fmt.Fprintf(bw, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1733011200,\"choices\":[{\"index\":0,\"delta\":{\"content\":%s}}]}\n\n", c); err != nil {
				return
			}
		}
		bw.WriteString("data: [DONE]\n\n")
		bw.Flush()
	}))
}

// pieces returns the generator of a stream's text pieces, seeded by id.
func pieces(id string) func() string {
	h := fnv.New64a()
	h.Write([]byte(id))
	rng := rand.New(rand.NewPCG(h.Sum64(), 1))
	i := -1
	return func() string {
		i++
		switch i % 50 {
		case 10:
			return fmt.Sprintf(" mail user%d@exa", rng.IntN(1000))
		case 11:
			return "mple.com today"
		}
		return fmt.Sprintf(" tok%d", rng.IntN(100000))
	}
}

// expected is what a client must assemble: the upstream's whole text,
// redacted in one piece.
func expected(id string, n int) string {
	var b strings.Builder
	next := pieces(id)
	for range n {
		b.WriteString(next())
	}
	red, _ := redact.Text([]byte(b.String()))
	return string(red)
}

// streamOnce posts one stream and returns the text the client assembled,
// or an error if the stream was refused, cut or malformed.
func streamOnce(ctx context.Context, client *http.Client, url, id, model string) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"stream":true,"model":"`+model+`","max_tokens":2000}`))
	req.Header.Set("Authorization", "Bearer k")
	req.Header.Set("X-Request-Id", id)
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return "", fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	st, err := openaitest.Read(resp.Body)
	switch {
	case err != nil:
		return "", err
	case len(st.Malformed) > 0:
		return "", fmt.Errorf("a line that is not JSON: %.100s", st.Malformed[0])
	case !st.Done:
		return "", fmt.Errorf("no [DONE] after %d bytes of text", len(st.Text))
	}
	return st.Text, nil
}

func peakRSS() string {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			return strings.Join(strings.Fields(line)[1:], " ")
		}
	}
	return "n/a"
}

// 200 concurrent streams of 2,000 events through the fixed gateway for
// 60 s: no errors, every stream complete and exactly the upstream's text
// after redaction, and no goroutine left behind.
func TestLoad(t *testing.T) {
	if thisBuild().variant != variant.Fixed {
		t.Skip("the load test runs the fixed build (-tags fixed)")
	}
	duration := 60 * time.Second
	if testing.Short() {
		duration = 5 * time.Second
	}
	up := loadUpstream()
	defer up.Close()
	goroutines := runtime.NumGoroutine()
	g := start(t, up.URL, "-tenants", "k=lab:1000000000000:1000")
	url := "http://" + g.public + "/v1/chat/stream"
	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	var (
		streams, failures atomic.Int64
		mu                sync.Mutex
		firstErrs         []string
		latencies         []time.Duration
	)
	var wg sync.WaitGroup
	begin := time.Now()
	for worker := range 200 {
		wg.Go(func() {
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			defer client.CloseIdleConnections()
			for i := 0; ctx.Err() == nil; i++ {
				id := fmt.Sprintf("load-%d-%d", worker, i)
				t0 := time.Now()
				text, err := streamOnce(context.Background(), client, url, id, "")
				if err == nil && text != expected(id, 2000) {
					err = fmt.Errorf("text differs from the upstream's after redaction (%d vs %d bytes)", len(text), len(expected(id, 2000)))
				}
				streams.Add(1)
				mu.Lock()
				latencies = append(latencies, time.Since(t0))
				if err != nil {
					failures.Add(1)
					if len(firstErrs) < 5 {
						firstErrs = append(firstErrs, id+": "+err.Error())
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(begin)
	slices.Sort(latencies)
	pct := func(p float64) time.Duration {
		return latencies[int(p*float64(len(latencies)-1))].Round(time.Millisecond)
	}
	t.Logf("%d streams of 2,000 events in %s (%.0f/s) at 200 concurrent; %d failed; stream time p50 %s p99 %s; peak RSS of the test process (gateway, upstream and clients) %s",
		streams.Load(), elapsed.Round(time.Second), float64(streams.Load())/elapsed.Seconds(), failures.Load(), pct(.5), pct(.99), peakRSS())
	if failures.Load() > 0 || streams.Load() < 200 {
		t.Fatalf("%d of %d streams failed: %v", failures.Load(), streams.Load(), firstErrs)
	}
	g.stop()
	if err := <-g.done; err != nil {
		t.Fatal(err)
	}
	g.done <- nil
	http.DefaultClient.CloseIdleConnections()
	up.CloseClientConnections()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > goroutines {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines after the load, %d before:\n%s", runtime.NumGoroutine(), goroutines, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// 300 connections that trickle a request body and 50 clients that read
// their stream at 1 KB/s do not delay ordinary streams — their p99 stays
// within 2x of an idle run in this same test — and the deadlines cut them
// with a logged reason. Trickling clients reconnect when cut, so the abuse
// lasts the whole measurement; the slow readers hold their streams until a
// flush times out (20 s, after the measurement). The gateway's log is the
// witness of each cut: a slow reader still drains what its kernel buffers
// hold long after the gateway closed.
func TestSlowClientsDoNotDelayOthers(t *testing.T) {
	if thisBuild().variant != variant.Fixed {
		t.Skip("the abuse test runs the fixed build (-tags fixed)")
	}
	up := loadUpstream()
	defer up.Close()
	logs := &syncbuf.Buffer{}
	g := startLogged(t, up.URL, logs, "-tenants", "k=lab:1000000000000:1000", "-log-level", "info",
		"-read-timeout", "2s", "-client-write-timeout", "20s")
	url := "http://" + g.public + "/v1/chat/stream"
	ordinary := func(n int) time.Duration {
		client := &http.Client{Transport: &http.Transport{}}
		defer client.CloseIdleConnections()
		var lat []time.Duration
		var mu sync.Mutex
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := range n / 4 {
					id := fmt.Sprintf("ordinary-%d-%d", w, i)
					t0 := time.Now()
					if _, err := streamOnce(context.Background(), client, url, id, ""); err != nil {
						t.Errorf("an ordinary stream failed: %v", err)
						return
					}
					mu.Lock()
					lat = append(lat, time.Since(t0))
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		slices.Sort(lat)
		return lat[len(lat)*99/100]
	}
	ordinary(40) // warm up: connections, buffers, the heap
	idle := ordinary(400)

	ctx, stopAbuse := context.WithCancel(context.Background())
	var abusers sync.WaitGroup
	var trickleCuts atomic.Int64
	readerCuts := func() int { return strings.Count(logs.String(), "client stopped reading") }
	for range 300 {
		abusers.Go(func() {
			for ctx.Err() == nil {
				c, err := net.Dial("tcp", g.public)
				if err != nil {
					time.Sleep(100 * time.Millisecond)
					continue
				}
				io.WriteString(c, "POST /v1/chat/stream HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer k\r\nContent-Length: 1000\r\n\r\n{")
				for ctx.Err() == nil {
					time.Sleep(500 * time.Millisecond)
					if _, err := c.Write([]byte(" ")); err != nil {
						trickleCuts.Add(1)
						break
					}
				}
				c.Close()
			}
		})
	}
	for range 50 {
		abusers.Go(func() {
			c, err := net.Dial("tcp", g.public)
			if err != nil {
				t.Errorf("slow reader: %v", err)
				return
			}
			defer c.Close()
			c.(*net.TCPConn).SetReadBuffer(4 << 10)
			body := `{"stream":true,"model":"big"}`
			fmt.Fprintf(c, "POST /v1/chat/stream HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer k\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			buf := make([]byte, 1024)
			for ctx.Err() == nil {
				if _, err := c.Read(buf); err != nil {
					return
				}
				time.Sleep(time.Second) // 1 KB/s
			}
		})
	}
	time.Sleep(3 * time.Second) // let them all connect, and the slow readers' buffers fill
	busy := ordinary(400)
	ratio := float64(busy) / float64(idle)
	t.Logf("ordinary streams p99: idle %s, beside 300 trickling bodies and 50 readers at 1 KB/s %s (%.2fx)",
		idle.Round(time.Millisecond), busy.Round(time.Millisecond), ratio)
	if ratio > 2 {
		t.Errorf("slow clients delayed ordinary streams: p99 %s vs %s idle (%.2fx, want at most 2x)", busy, idle, ratio)
	}
	if n := readerCuts(); n > 0 {
		t.Errorf("%d slow readers were already cut: the measurement ran without them", n)
	}
	// Everyone slow is cut by a deadline, and the gateway says why.
	deadline := time.Now().Add(60 * time.Second)
	for trickleCuts.Load() < 300 || readerCuts() < 50 {
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s: %d trickling bodies cut (want 300 or more), %d of 50 slow readers cut", trickleCuts.Load(), readerCuts())
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopAbuse()
	abusers.Wait()
	cutBodies := strings.Count(logs.String(), `"status":408`)
	t.Logf("cut by the deadlines: %d trickled bodies (%d logged with status 408), %d slow readers (logged: client stopped reading)",
		trickleCuts.Load(), cutBodies, readerCuts())
	if int64(cutBodies) < trickleCuts.Load() {
		t.Errorf("%d trickled bodies were cut but only %d logged", trickleCuts.Load(), cutBodies)
	}
}
