package lab

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"burnlab/shared/freeport"
)

// fakeStack is a gateway of one build, an upstream and a lab control that
// record what make scenario asks of them.
type fakeStack struct {
	mu        sync.Mutex
	build     string
	scenarios []string
	switches  []string
}

func (f *fakeStack) serve(t *testing.T) Stack {
	t.Helper()
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		w.Write([]byte("# HELP gateway_build_info x\ngateway_build_info{variant=\"" + f.build + "\",version=\"dev\"} 1\n"))
	}))
	up := http.NewServeMux()
	up.HandleFunc("GET /scenario", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"scenario":"none"}`)) })
	up.HandleFunc("PUT /scenario/{name}", func(_ http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.scenarios = append(f.scenarios, r.PathValue("name")+r.URL.Query().Get("share"))
	})
	ups := httptest.NewServer(up)
	ctl := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		v := r.URL.Query().Get("variant")
		f.switches = append(f.switches, r.Method+" "+r.URL.Path+" "+v)
		f.build = v
		w.Write([]byte("gateway is now the " + v + " build\n"))
	}))
	t.Cleanup(func() { gw.Close(); ups.Close(); ctl.Close() })
	host := func(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }
	return Stack{Upstream: host(ups), GatewayAdmin: host(gw), Control: host(ctl), Out: &bytes.Buffer{}}
}

func TestScenarioSwitchesTheLabsBuildOnlyWhenItDiffers(t *testing.T) {
	f := &fakeStack{build: "fixed"}
	s := f.serve(t)
	ctx := context.Background()
	if err := ApplyScenario(ctx, "upstream-tail", s); err != nil {
		t.Fatal(err)
	}
	if err := ApplyScenario(ctx, "regression", s); err != nil {
		t.Fatal(err)
	}
	if strings.Join(f.switches, ";") != "POST /switch baseline" || strings.Join(f.scenarios, ",") != "upstream-tail,regression" {
		t.Fatalf("switches %q, scenarios %q", f.switches, f.scenarios)
	}
	if out := s.Out.(*bytes.Buffer).String(); !strings.Contains(out, "must fire:     stream-latency page") {
		t.Fatalf("it must say what should fire:\n%s", out)
	}
	// none clears the fault and keeps the build.
	if err := ApplyScenario(ctx, "none", s); err != nil || len(f.switches) != 1 {
		t.Fatalf("none: %v, switches %q", err, f.switches)
	}
	if err := ApplyScenario(ctx, "bogus", s); err == nil || !strings.Contains(err.Error(), "upstream-errors") {
		t.Fatalf("an unknown scenario: %v", err)
	}
	if len(f.scenarios) != 3 {
		t.Fatal("an unknown scenario reached the upstream")
	}
	// SHARE= runs a one-step fault harder; a scenario without one share,
	// or a share out of range, is refused before the upstream hears of it.
	s.Share = 0.03
	if err := ApplyScenario(ctx, "upstream-errors", s); err != nil || f.scenarios[3] != "upstream-errors0.03" {
		t.Fatalf("with a share: %v, scenarios %q", err, f.scenarios)
	}
	for _, bad := range []struct {
		name  string
		share float64
	}{{"creep", 0.03}, {"upstream-errors", 2}} {
		s.Share = bad.share
		if err := ApplyScenario(ctx, bad.name, s); err == nil || !strings.Contains(err.Error(), "share") || len(f.scenarios) != 4 {
			t.Errorf("%s at %g: %v, scenarios %q", bad.name, bad.share, err, f.scenarios)
		}
	}
}

// With no lab at the control address the stack is compose's: the switch is
// make fixed's `docker compose up` with GATEWAY_TAG.
func TestScenarioSwitchesComposesBuildWithoutALab(t *testing.T) {
	f := &fakeStack{build: "baseline"}
	s := f.serve(t)
	s.Control = freeport.ForTest(t) // no lab listens there
	out := filepath.Join(t.TempDir(), "compose")
	s.Compose = []string{"/bin/sh", "-c", `echo "$GATEWAY_TAG $*" > ` + out, "compose"}
	if err := ApplyScenario(context.Background(), "slow-first-token", s); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != "fixed up --build --detach --no-deps gateway" {
		t.Fatalf("compose ran as %q", got)
	}
	s.Compose = []string{"/bin/false"}
	f.build = "baseline"
	if err := ApplyScenario(context.Background(), "upstream-errors", s); err == nil || !strings.Contains(err.Error(), "compose could not switch") {
		t.Fatalf("a failing compose: %v", err)
	}
	if strings.Join(f.scenarios, ",") != "slow-first-token" {
		t.Fatalf("the fault must not be set when the build could not be: %q", f.scenarios)
	}
}

// A stack whose upstream has no scenario control (started before it
// existed) is left as it is: no build switch for a fault that cannot be set.
func TestScenarioRebuildsNothingWithoutTheControl(t *testing.T) {
	f := &fakeStack{build: "fixed"}
	s := f.serve(t)
	old := httptest.NewServer(http.NotFoundHandler())
	defer old.Close()
	s.Upstream = strings.TrimPrefix(old.URL, "http://")
	if err := ApplyScenario(context.Background(), "regression", s); err == nil || !strings.Contains(err.Error(), "needs a restart") {
		t.Fatalf("an upstream without the control: %v", err)
	}
	if len(f.switches) != 0 {
		t.Fatalf("switched %q for a fault that could not be set", f.switches)
	}
}
