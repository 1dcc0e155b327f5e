package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"burnlab/shared/freeport"
)

// The API and the admin listener are apart: the heap and the metrics are
// not on the port the provider's clients reach.
func TestServesStreamsAndMetricsOnItsAdminListener(t *testing.T) {
	addr, admin := freeport.ForTest(t), freeport.ForTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-listen", addr, "-admin", admin, "-log-level", "error"}, io.Discard)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	var resp *http.Response
	var err error
	for range 100 {
		if resp, err = http.Post("http://"+addr+"/v1/chat/completions", "application/json", strings.NewReader(`{"stream":true,"max_tokens":3}`)); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Count(string(b), "chat.completion.chunk") != 4 || !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
		t.Fatalf("stream:\n%s", b)
	}
	m, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := io.ReadAll(m.Body)
	m.Body.Close()
	if !strings.Contains(string(mb), "upstream_events_total 3") {
		t.Fatalf("metrics lack upstream_events_total 3")
	}
	for _, path := range []string{"/metrics", "/debug/pprof/allocs"} {
		r, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusNotFound {
			t.Errorf("the API serves %s: %s", path, r.Status)
		}
	}
}

func TestBadSettings(t *testing.T) {
	for _, args := range [][]string{{"-fault-reset", "2"}, {"-short-min", "10", "-short-max", "5"}, {"-log-level", "x"}, {"x"}} {
		if err := run(context.Background(), args, io.Discard); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
	t.Setenv("UPSTREAM_FAULT_5XX", "-1")
	if err := run(context.Background(), nil, io.Discard); err == nil || !strings.Contains(err.Error(), "5xx") {
		t.Errorf("env: %v", err)
	}
}
