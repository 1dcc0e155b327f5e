package service

import (
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"burnlab/shared/freeport"
)

func TestEnvFillsOnlyWhatTheCommandLineLeftOut(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	a := fs.String("a", "da", "")
	b := fs.String("b", "db", "")
	c := fs.Int("c", 1, "")
	envs := map[string]string{"a": "X_A", "b": "X_B", "c": "X_C"}
	t.Setenv("X_A", "env-a")
	t.Setenv("X_B", "env-b")
	fs.Parse([]string{"-b", "flag-b"})
	if err := Env(fs, envs); err != nil {
		t.Fatal(err)
	}
	if *a != "env-a" || *b != "flag-b" || *c != 1 {
		t.Fatalf("a=%s b=%s c=%d", *a, *b, *c)
	}
	t.Setenv("X_C", "many")
	if err := Env(fs, envs); err == nil || !strings.Contains(err.Error(), "X_C") {
		t.Fatalf("a bad environment value must name its variable: %v", err)
	}
	if err := Env(fs, map[string]string{"nope": "X"}); err == nil {
		t.Fatal("an unknown flag must be an error")
	}
}

func TestNewLoggerLevels(t *testing.T) {
	if _, err := NewLogger(io.Discard, "WARN", "p"); err != nil {
		t.Fatal(err)
	}
	if _, err := NewLogger(io.Discard, "chatty", "p"); err == nil {
		t.Fatal("unknown level accepted")
	}
}

func TestServeDrainsAndReportsListenErrors(t *testing.T) {
	addr := freeport.ForTest(t)
	started := make(chan struct{})
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		time.Sleep(200 * time.Millisecond)
		w.Write([]byte("finished"))
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, zerolog.Nop(), Drain{Timeout: 5 * time.Second}, Server{Name: "t", Addr: addr, Handler: slow, Streaming: true})
	}()
	var resp *http.Response
	var err error
	got := make(chan string, 1)
	go func() {
		for range 100 {
			if resp, err = http.Get("http://" + addr); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				got <- string(b)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		got <- err.Error()
	}()
	<-started
	cancel()
	if body := <-got; body != "finished" {
		t.Fatalf("in-flight request cut: %q", body)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	busy, _ := net.Listen("tcp", "127.0.0.1:0")
	defer busy.Close()
	err = Serve(context.Background(), zerolog.Nop(), Drain{Timeout: time.Second}, Server{Name: "busy", Addr: busy.Addr().String(), Handler: slow})
	if err == nil || !strings.Contains(err.Error(), "busy listener") {
		t.Fatalf("taken port: %v", err)
	}
}

func TestProbeFollowsReadiness(t *testing.T) {
	var ready Readiness
	srv := httptest.NewServer(AdminMux(NewRegistry(), &ready))
	defer srv.Close()
	ctx := context.Background()
	if err := Probe(ctx, srv.URL+"/readyz"); err != nil {
		t.Fatalf("ready process: %v", err)
	}
	ready.Drain()
	if err := Probe(ctx, srv.URL+"/readyz"); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("draining process: want a 503 error, got %v", err)
	}
	if err := Probe(ctx, srv.URL+"/no-such-page"); err == nil {
		t.Fatal("404 passed the probe")
	}
}

func TestProbeRefusesBadURLsAndGivesUp(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:6060/readyz", "ftp://127.0.0.1/x", "http://"} {
		if err := Probe(context.Background(), u); err == nil || !strings.Contains(err.Error(), "not an http(s) URL") {
			t.Errorf("Probe(%q) = %v, want a clear refusal", u, err)
		}
	}
	addr := freeport.ForTest(t) // nothing listens there
	if err := Probe(context.Background(), "http://"+addr+"/readyz"); err == nil {
		t.Fatal("a closed port passed the probe")
	}
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hang }))
	defer srv.Close()
	defer close(hang)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := Probe(ctx, srv.URL); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a hung server: want the deadline, got %v", err)
	}
}
