package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"burnlab/shared/freeport"
)

// Nothing acknowledged is lost across kill -9: the real binary, killed
// right after it answered 200, still has every notification on restart.
func TestAcknowledgedNotificationsSurviveKill9(t *testing.T) {
	data, addr := t.TempDir(), freeport.ForTest(t)
	p := startPager(t, buildPager(t), addr, data)
	const n = 20
	for i := range n {
		body := fmt.Sprintf(`{"version":"4","receiver":"pager-page","status":"firing","alerts":[{"status":"firing","fingerprint":"%016x",
			"startsAt":"2026-12-01T03:12:00Z","labels":{"alertname":"Burn","severity":"page","sloth_slo":"stream-latency"}}]}`, i)
		resp, err := http.Post("http://"+addr+"/webhook/page", "application/json", strings.NewReader(body))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("notification %d: %v %v", i, err, resp)
		}
		resp.Body.Close()
	}
	p.kill()
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/api/incidents")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var incs []struct{ ID, Status string }
	json.NewDecoder(resp.Body).Decode(&incs)
	if len(incs) != n {
		t.Fatalf("after kill -9: %d of %d acknowledged notifications", len(incs), n)
	}
	// /incidents/<id>/trace is the API's, not the web UI's: this pager
	// took no snapshot, and the API says so.
	resp, err = http.Get("http://" + addr + "/incidents/" + incs[0].ID + "/trace")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.Contains(string(b), "no flight-recorder trace for incident") {
		t.Errorf("an incident's trace: %d %.200s", resp.StatusCode, b)
	}
}

// The pager takes webhooks and serves pprof and the incidents: by default
// only this machine may reach it. Compose and the lab say where to listen.
func TestListensOnLoopbackByDefault(t *testing.T) {
	var help bytes.Buffer
	if err := run(t.Context(), []string{"-h"}, &help); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	m := regexp.MustCompile(`(?m)^  -listen\b.*\n\s+(.*) \(default "([^"]*)"\)$`).FindStringSubmatch(help.String())
	if m == nil {
		t.Fatalf("no -listen default in the help:\n%s", help.String())
	}
	host, _, err := net.SplitHostPort(m[2])
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		t.Errorf("-listen defaults to %q, want a loopback address", m[2])
	}
	if !strings.Contains(m[1], "loopback") {
		t.Errorf("-listen's help does not say why it defaults to loopback: %q", m[1])
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-log-level", "x"}, {"stray"}, {"-data", "/proc/no/such/dir"},
		{"-profile-window", "-1s"}, {"-profile-concurrency", "0"}, {"-retention", "0s"}, {"-max-resolved", "0"},
		{"-delta-seconds", "0"}, {"-delta-seconds", "61"}, {"-delta-every", "10s"}, {"-delta-keep", "0"},
		{"-profile-url", "ftp://gateway/allocs"}, {"-trace-url", "gateway:6060/debug/flightrecorder"}, {"-prometheus-url", "prometheus:9090"}, {"-alertmanager-urls", "http://alertmanager:9093,alertmanager-2:9093"}} {
		if err := run(t.Context(), args, io.Discard); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}

// Validate says every flag that is wrong, not only the first, and none
// that is right.
func TestValidateNamesEveryBadFlag(t *testing.T) {
	fs := flag.NewFlagSet("pager", flag.ContinueOnError)
	var o options
	o.register(fs)
	if _, err := o.Validate(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	if err := fs.Parse([]string{"-retention", "0s", "-delta-seconds", "0", "-trace-url", "gateway:6060", "-prometheus-url", "prometheus:9090"}); err != nil {
		t.Fatal(err)
	}
	_, err := o.Validate()
	for _, want := range []string{"-retention", "-delta-seconds 0", "-trace-url", "-prometheus-url"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v; want it to name %s", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "-alertmanager-urls") {
		t.Errorf("Validate names a flag that is right: %v", err)
	}
}

// -targets is read and checked at start: a file that is wrong, or that
// needs what the other flags leave out, stops the pager with its reason.
func TestValidateChecksThePagerConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	jobs := write("jobs.yml", "rules:\n  - {name: provider, jobs: [provider], sampled: true}\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-targets", write("bad.yml", "rules:\n  - name: a\n    job: [x]\n")}, "bad.yml:3: job: not a field of a rule; want one of"},
		{[]string{"-targets", jobs, "-prometheus-url", ""}, "rules with jobs find their processes through Prometheus, and -prometheus-url is empty"},
		{[]string{"-targets", filepath.Join(dir, "none.yml")}, "none.yml: no such file"},
	} {
		fs := flag.NewFlagSet("pager", flag.ContinueOnError)
		var o options
		o.register(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if _, err := o.Validate(); err == nil || !strings.Contains(err.Error(), "-targets") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v; want an error saying %q", tc.args, err, tc.want)
		}
	}
	fs := flag.NewFlagSet("pager", flag.ContinueOnError)
	var o options
	o.register(fs)
	if err := fs.Parse([]string{"-targets", jobs}); err != nil {
		t.Fatal(err)
	}
	cfg, err := o.Validate()
	if err != nil || cfg.Lifecycle.Targets == nil || cfg.Lifecycle.Targets.Rules[0].Name != "provider" {
		t.Errorf("a good config: %+v %v", cfg.Lifecycle.Targets, err)
	}
}

// The delta heap sampler runs while the pager does, on -profile-url with
// -delta-seconds, and stops with it: run returns with none of its
// goroutines left, a delta in flight cut short.
func TestTheDeltaSamplerStopsWithThePager(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	asked := make(chan string, 1)
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" { // the stream counts around each delta
			http.NotFound(w, r)
			return
		}
		select {
		case asked <- r.URL.Path + "?" + r.URL.RawQuery:
		default:
		}
		<-r.Context().Done() // the delta's seconds, never over
	}))
	defer gateway.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	addr := freeport.ForTest(t) // t.Fatal belongs to the test's goroutine
	go func() {
		done <- run(ctx, []string{"-listen", addr, "-data", t.TempDir(), "-profile-url", gateway.URL + "/debug/pprof/allocs",
			"-prometheus-url", "", "-delta-seconds", "5", "-log-level", "error"}, io.Discard)
	}()
	select {
	case got := <-asked:
		if got != "/debug/pprof/allocs?seconds=5" {
			t.Errorf("the sampler asked %s, want /debug/pprof/allocs?seconds=5", got)
		}
	case err := <-done:
		t.Fatalf("run returned before the sampler asked for a delta: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no delta asked for in 10 s")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return in 15 s of its context's end")
	}
}

// -check checks the flags and the config and exits, serving nothing: a
// config's CI runs it.
func TestCheckExitsWithTheVerdict(t *testing.T) {
	dir := t.TempDir()
	bad, good := filepath.Join(dir, "bad.yml"), filepath.Join(dir, "good.yml")
	os.WriteFile(bad, []byte("rules:\n  - {name: a, jobs: [x], sampeld: true}\n"), 0o600)
	os.WriteFile(good, []byte("rules:\n  - {name: a, jobs: [x]}\n"), 0o600)
	if err := run(t.Context(), []string{"-check", "-targets", bad, "-listen", "127.0.0.1:1"}, io.Discard); err == nil || !strings.Contains(err.Error(), "sampeld: not a field of a rule") {
		t.Errorf("a bad config: %v", err)
	}
	if err := run(t.Context(), []string{"-check", "-targets", good, "-listen", "127.0.0.1:1", "-data", filepath.Join(dir, "never")}, io.Discard); err != nil {
		t.Errorf("a good config: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "never")); err == nil {
		t.Error("-check opened a journal")
	}
}
