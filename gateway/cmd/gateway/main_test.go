package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"burnlab/shared/freeport"
	"burnlab/shared/pproftop"
	"burnlab/shared/service"
	"burnlab/shared/syncbuf"
	"burnlab/shared/variant"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// upstream streams n chunks whose payloads stay inside the write-up's
// 24–96 characters, so the baseline regexp matches every one. pace delays
// each event.
func upstream(n int, pace time.Duration) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range n {
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" tok%d\"}}]}\n\n", i)
			if pace > 0 {
				w.(http.Flusher).Flush()
				time.Sleep(pace)
			}
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
}

type gateway struct {
	public, admin string
	stop          context.CancelFunc
	done          chan error
}

func start(t *testing.T, up string, extra ...string) *gateway {
	t.Helper()
	return startLogged(t, up, io.Discard, extra...)
}

// startLogged starts a gateway whose log goes to logs.
func startLogged(t *testing.T, up string, logs io.Writer, extra ...string) *gateway {
	t.Helper()
	g := &gateway{public: freeport.ForTest(t), admin: freeport.ForTest(t), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	g.stop = cancel
	args := append([]string{"-listen", g.public, "-admin", g.admin, "-upstream", up,
		"-tenants", "k=lab:100000000", "-log-level", "warn", "-drain-grace", "0s"}, extra...)
	go func() { g.done <- run(ctx, args, logs) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := http.Get("http://" + g.admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("gateway never became ready")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Cleanup(func() {
		g.stop()
		if err := <-g.done; err != nil {
			t.Errorf("gateway exited with %v", err)
		}
		http.DefaultClient.CloseIdleConnections()
	})
	return g
}

func (g *gateway) stream(t *testing.T) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+g.public+"/v1/chat/stream", strings.NewReader(`{"stream":true}`))
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// After load, the gateway's own /debug/pprof/allocs names the build's
// transcript parser the way the write-up's pprof run did.
func TestHeapProfileNamesTheBaselineParser(t *testing.T) {
	up := upstream(3000, 0)
	defer up.Close()
	g := start(t, up.URL)
	for range 6 {
		if body := g.stream(t); !strings.HasSuffix(body, "data: [DONE]\n\n") {
			t.Fatalf("stream did not finish: %.200s", body)
		}
	}
	resp, err := http.Get("http://" + g.admin + "/debug/pprof/allocs")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, p, err := pproftop.Read(resp.Body, pproftop.MaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	top, total, err := pproftop.Top(p, "alloc_space", 100)
	if err != nil {
		t.Fatal(err)
	}
	const guilty = "transcript.(*Baseline).Append"
	switch thisBuild().variant {
	case variant.Baseline:
		if !strings.HasSuffix(top[0].Function, guilty) || top[0].FlatPct < 50 {
			t.Fatalf("top alloc_space function is %s (%.1f%% of %d bytes), want %s", top[0].Function, top[0].FlatPct, total, guilty)
		}
		t.Logf("top alloc_space: %s %.1f%% of %d MB", top[0].Function, top[0].FlatPct, total>>20)
	default:
		for _, e := range top {
			if strings.HasSuffix(e.Function, guilty) {
				t.Fatalf("the %s build runs the baseline parser", thisBuild().variant)
			}
		}
	}
	m, _ := http.Get("http://" + g.admin + "/metrics")
	body, _ := io.ReadAll(m.Body)
	m.Body.Close()
	if want := fmt.Sprintf(`gateway_build_info{variant=%q,version="dev"} 1`, thisBuild().variant); !strings.Contains(string(body), want) {
		t.Errorf("/metrics lacks %s", want)
	}
}

// SIGTERM (here: the context) stops new work but lets a stream in flight
// finish.
func TestShutdownDrainsInFlightStreams(t *testing.T) {
	up := upstream(40, 10*time.Millisecond)
	defer up.Close()
	g := start(t, up.URL)
	got := make(chan string, 1)
	go func() { got <- g.stream(t) }()
	time.Sleep(100 * time.Millisecond)
	g.stop()
	select {
	case body := <-got:
		if !strings.HasSuffix(body, "data: [DONE]\n\n") {
			t.Fatalf("in-flight stream cut by shutdown: %.200s", body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stream never finished")
	}
}

func TestBadConfigurationIsAClearError(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-tenants", ""}, "no tenants configured"},
		{[]string{"-tenants", "k=a:1", "-upstream", "not a url"}, "must be absolute"},
		{[]string{"-tenants", "k=a:1", "-upstream", "http://[::1"}, "-upstream / UPSTREAM_URL"},
		// Listening on free ports: a gateway that took this URL would
		// start serving (and stop at once, its context being canceled).
		{[]string{"-tenants", "k=a:1", "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0",
			"-upstream", "http://up:8081/v1/chat/completions"}, "not the base URL: use http://up:8081/v1"},
		{[]string{"-tenants", "k=a:1", "-log-level", "loud"}, "log level"},
		{[]string{"-tenants", "k=a:1", "stray"}, "unexpected arguments"},
		{[]string{"-nope"}, "flag provided but not defined"},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := run(ctx, c.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("run(%q) = %v, want %q", c.args, err, c.want)
		}
	}
	t.Setenv("GATEWAY_TENANTS", "k=a:x")
	if err := run(context.Background(), nil, io.Discard); err == nil || !strings.Contains(err.Error(), "tokens-per-minute") {
		t.Errorf("GATEWAY_TENANTS is not read: %v", err)
	}
}

// The admin listener serves pprof (heap contents, the command line): by
// default it must be reachable from this host only.
func TestAdminListensOnLoopbackByDefault(t *testing.T) {
	fs := flagDefaults(t)
	if got := fs["admin"]; !strings.HasPrefix(got, "127.0.0.1:") {
		t.Fatalf("-admin defaults to %q, want a 127.0.0.1 address", got)
	}
}

// flagDefaults runs -help and reads each flag's default from the usage.
func flagDefaults(t *testing.T) map[string]string {
	t.Helper()
	var help strings.Builder
	if err := run(context.Background(), []string{"-help"}, &help); err == nil {
		t.Fatal("-help must return flag.ErrHelp")
	}
	defaults := map[string]string{}
	var name string
	for _, line := range strings.Split(help.String(), "\n") {
		if f, ok := strings.CutPrefix(strings.TrimSpace(line), "-"); ok {
			name, _, _ = strings.Cut(f, " ")
		} else if _, def, ok := strings.Cut(line, "(default "); ok && name != "" {
			defaults[name] = strings.Trim(strings.TrimSuffix(def, ")"), `"`)
		}
	}
	return defaults
}

// A client trickling its request must not hold a handler: headers and body
// have deadlines, and the cut is logged.
func TestSlowRequestsAreCutByReadDeadlines(t *testing.T) {
	up := upstream(5, 0)
	defer up.Close()
	logs := &syncbuf.Buffer{}
	g := startLogged(t, up.URL, logs, "-read-timeout", "600ms", "-log-level", "info")
	trickle := func(t *testing.T, head string) (string, time.Duration) {
		c, err := net.Dial("tcp", g.public)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		begin := time.Now()
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatal(err)
		}
		// One byte every 100 ms until the server gives up on us.
		go func() {
			for range 40 {
				time.Sleep(100 * time.Millisecond)
				if _, err := c.Write([]byte("x")); err != nil {
					return
				}
			}
		}()
		b, _ := io.ReadAll(c)
		return string(b), time.Since(begin)
	}
	t.Run("body", func(t *testing.T) {
		resp, took := trickle(t, "POST /v1/chat/stream HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer k\r\nContent-Length: 1000\r\n\r\n{")
		if !strings.HasPrefix(resp, "HTTP/1.1 408") || took > 3*time.Second {
			t.Fatalf("after %s: %.120q, want a 408 within the read timeout", took.Round(time.Millisecond), resp)
		}
		waitForLog(t, logs, `"status":408`)
	})
	t.Run("headers", func(t *testing.T) {
		resp, took := trickle(t, "POST /v1/chat/stream HTTP/1.1\r\nHost: gw\r\nX-Slow: ")
		if took > 3*time.Second {
			t.Fatalf("a client trickling its headers held the connection for %s: %.120q", took.Round(time.Millisecond), resp)
		}
		waitForLog(t, logs, "connection closed before a complete request arrived")
	})
	// An ordinary stream still works: the deadline is lifted once the body
	// is in, so a stream longer than the read timeout is not cut.
	slow := upstream(20, 50*time.Millisecond)
	defer slow.Close()
	// A process has one flight recorder, and the first gateway holds it.
	g2 := start(t, slow.URL, "-read-timeout", "300ms", "-flight-recorder", "0")
	if body := g2.stream(t); !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("a 1 s stream behind a 300 ms read timeout was cut: %.200s", body)
	}
}

// On SIGTERM the gateway first answers /readyz 503 while it still admits
// streams (load balancers need that time to stop sending), then closes its
// listeners and drains: no stream it admitted is cut.
func TestDrainGraceKeepsAdmittingWhileNotReady(t *testing.T) {
	up := upstream(30, 10*time.Millisecond)
	defer up.Close()
	g := start(t, up.URL, "-drain-grace", "1500ms")
	var (
		mu                         sync.Mutex
		admitted, cut, afterNotRdy int
		notReadyAt                 time.Time
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			client := &http.Client{Transport: &http.Transport{}}
			defer client.CloseIdleConnections()
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest(http.MethodPost, "http://"+g.public+"/v1/chat/stream", strings.NewReader(`{"stream":true}`))
				req.Header.Set("Authorization", "Bearer k")
				sent := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					time.Sleep(20 * time.Millisecond) // refused: not admitted, nothing to cut
					continue
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				mu.Lock()
				if resp.StatusCode == 200 {
					admitted++
					if !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
						cut++
					}
					if !notReadyAt.IsZero() && sent.After(notReadyAt) {
						afterNotRdy++
					}
				}
				mu.Unlock()
			}
		})
	}
	time.Sleep(500 * time.Millisecond)
	g.stop()
	deadline := time.Now().Add(time.Second)
	for {
		resp, err := http.Get("http://" + g.admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 503 {
				mu.Lock()
				notReadyAt = time.Now()
				mu.Unlock()
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz did not turn 503 on shutdown (%v)", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := <-g.done; err != nil {
		t.Fatalf("gateway exited with %v", err)
	}
	g.done <- nil // for start's cleanup
	close(stop)
	wg.Wait()
	t.Logf("admitted %d streams, %d of them after /readyz turned 503; %d cut", admitted, afterNotRdy, cut)
	if cut > 0 {
		t.Errorf("%d admitted streams were cut by the shutdown", cut)
	}
	if afterNotRdy == 0 {
		t.Error("no stream was admitted after /readyz turned 503: the listeners closed with no grace")
	}
}

func waitForLog(t *testing.T, logs *syncbuf.Buffer, want string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for !strings.Contains(logs.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q in:\n%s", want, logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The admin listener serves the flight recorder's snapshot: an execution
// trace that holds a stream just served, by the request ID its task logs;
// -flight-recorder 0 turns it off, and a recorder of no bytes is refused.
func TestTheFlightRecorderIsOnTheAdminListener(t *testing.T) {
	up := upstream(50, 0)
	defer up.Close()
	g := start(t, up.URL)
	req, _ := http.NewRequest(http.MethodPost, "http://"+g.public+"/v1/chat/stream", strings.NewReader(`{"stream":true}`))
	req.Header.Set("Authorization", "Bearer k")
	req.Header.Set("X-Request-Id", "find-me-in-the-trace")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	snap, err := http.Get("http://" + g.admin + service.FlightRecorderPath)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(snap.Body)
	snap.Body.Close()
	if snap.StatusCode != 200 || !bytes.HasPrefix(raw, []byte("go 1.")) || !bytes.Contains(raw, []byte("find-me-in-the-trace")) {
		t.Errorf("snapshot: %s, %d bytes, %.20q: want a trace naming the stream", snap.Status, len(raw), raw)
	}
	g.stop()
	if err := <-g.done; err != nil {
		t.Fatal(err)
	}
	g.done <- nil // for the cleanup

	off := start(t, up.URL, "-flight-recorder", "0")
	resp, err = http.Get("http://" + off.admin + service.FlightRecorderPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("with -flight-recorder 0: %s, want 404", resp.Status)
	}
	if err := run(context.Background(), []string{"-tenants", "k=lab:1", "-flight-recorder-bytes", "0"}, io.Discard); err == nil || !strings.Contains(err.Error(), "flight recorder") {
		t.Errorf("a recorder of 0 bytes: %v", err)
	}
}
