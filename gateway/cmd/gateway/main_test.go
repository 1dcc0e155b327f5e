package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"burnlab/gateway/pproftop"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

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
	g := &gateway{public: freeAddr(t), admin: freeAddr(t), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	g.stop = cancel
	args := append([]string{"-listen", g.public, "-admin", g.admin, "-upstream", up,
		"-tenants", "k=lab:100000000", "-log-level", "warn"}, extra...)
	go func() { g.done <- run(ctx, args, io.Discard) }()
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
	p, err := pproftop.Parse(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	top, total, err := pproftop.Top(p, "alloc_space", 100)
	if err != nil {
		t.Fatal(err)
	}
	const guilty = "transcript.(*Baseline).Append"
	switch variant {
	case "baseline":
		if !strings.HasSuffix(top[0].Function, guilty) || top[0].FlatPct < 50 {
			t.Fatalf("top alloc_space function is %s (%.1f%% of %d bytes), want %s", top[0].Function, top[0].FlatPct, total, guilty)
		}
		t.Logf("top alloc_space: %s %.1f%% of %d MB", top[0].Function, top[0].FlatPct, total>>20)
	default:
		for _, e := range top {
			if strings.HasSuffix(e.Function, guilty) {
				t.Fatalf("the %s build runs the baseline parser", variant)
			}
		}
	}
	m, _ := http.Get("http://" + g.admin + "/metrics")
	body, _ := io.ReadAll(m.Body)
	m.Body.Close()
	if want := fmt.Sprintf(`gateway_build_info{variant=%q,version="dev"} 1`, variant); !strings.Contains(string(body), want) {
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
		{[]string{"-tenants", "k=a:1", "-upstream", "not a url"}, "absolute URL"},
		{[]string{"-tenants", "k=a:1", "-log-level", "loud"}, "log level"},
		{[]string{"-tenants", "k=a:1", "stray"}, "unexpected arguments"},
		{[]string{"-nope"}, "flag provided but not defined"},
	} {
		err := run(context.Background(), c.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("run(%q) = %v, want %q", c.args, err, c.want)
		}
	}
	t.Setenv("GATEWAY_TENANTS", "k=a:x")
	if err := run(context.Background(), nil, io.Discard); err == nil || !strings.Contains(err.Error(), "tokens-per-minute") {
		t.Errorf("GATEWAY_TENANTS is not read: %v", err)
	}
}
