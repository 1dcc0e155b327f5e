//go:build e2e

package compose

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"burnlab/shared/incident"
	"burnlab/shared/results"
	"burnlab/shared/scenario"
	"burnlab/stack/lab"
	"burnlab/tools/standins"
)

// The compose e2e's bounds: those of the native lab's e2e (package lab),
// which proves the same incident on the same files, plus the image builds.
const (
	buildWithin   = 20 * time.Minute // cold: every module vendored, both gateways compiled
	healthyWithin = 5 * time.Minute  // the loadgen calibrates before it is ready
	pageWithin    = 6 * time.Minute
	resolveWithin = 3 * time.Minute
	profileWithin = 90 * time.Second
	pollEvery     = 5 * time.Second
)

const guilty = "transcript.(*Baseline).Append"

// docs/compose.md's block of the faults' table, which SAVE=1 rewrites.
const (
	faultsBegin = "<!-- faults table: make e2e-compose SAVE=1 writes it -->"
	faultsEnd   = "<!-- end of the faults table -->"
)

// project is the e2e's compose project name: not the file's own (burnlab),
// so a user's stack is never touched. The ports it publishes are the
// contract's, so neither the user's stack nor a native lab may run
// meanwhile; the test says so instead of failing halfway.
const project = "burnlab-e2e"

// TestComposeEndToEnd runs docker-compose.yml on this machine's Docker
// engine, as `docker compose up --build` does, through the write-up's
// incident: the baseline pages with the guilty function named, `make
// fixed` recreates only the gateway and the page resolves; the
// upstream-errors scenario pages availability through the monitoring
// path's faults, and beside the last of them the provider's own regression
// pages its SLO with the provider's profile; a restart keeps what the
// stack stored, and `down -v` leaves nothing behind. An engine with no
// registry gets the stand-in bases (package standins); Grafana, which has
// none, is left out and said so.
func TestComposeEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	requireEngine(t)
	tl := timeline{t0: time.Now()}
	for _, a := range []string{"8080", "6060", "8081", "5001", "9090", "9093"} {
		if ln, err := net.Listen("tcp", "127.0.0.1:"+a); err != nil {
			t.Fatalf("127.0.0.1:%s is taken: the compose e2e publishes the contract's ports; stop the stack or lab on them (make down) first", a)
		} else {
			ln.Close()
		}
	}

	r, err := standins.Run(ctx, standins.Options{Root: root, Out: t.TempDir(), Go: "go", Busybox: busybox(), Engine: standins.Docker{Command: "docker"}, Log: os.Stdout})
	if err != nil {
		t.Fatal(err)
	}
	for name, why := range r.LeftOut {
		fmt.Printf("NOT RUN: %s (%s). Its image, config and provisioning are checked offline only (TestGrafana*, make plugin).\n", name, why)
	}
	tl.mark("stand-ins ready")
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{t: t, root: abs, override: r.Override}
	t.Cleanup(func() {
		// A failed run's containers would hold the ports; its data goes too.
		if out, err := s.run(context.Background(), "down", "--volumes", "--remove-orphans", "--timeout", "10"); err != nil {
			t.Logf("down: %v\n%s", err, out)
		}
	})
	p, err := LoadWith(ctx, root, []string{r.Override}, s.env()...)
	if err != nil {
		t.Fatal(err)
	}
	ev := s.events(ctx)

	// 1. Build every burnlab image, then start: every service healthy, in
	// the order depends_on asks.
	bctx, bcancel := context.WithTimeout(ctx, buildWithin)
	if out, err := s.run(bctx, "build"); err != nil {
		bcancel()
		t.Fatalf("build: %v\n%s", err, tail(out, 40))
	}
	bcancel()
	tl.mark("images built (docker compose build)")
	upAt := time.Now()
	if out, err := s.run(ctx, "up", "--detach", "--wait", "--wait-timeout", strconv.Itoa(int(healthyWithin.Seconds()))); err != nil {
		s.dump(ctx)
		t.Fatalf("up: %v\n%s", err, tail(out, 40))
	}
	tl.mark("every service healthy (docker compose up --detach --wait)")
	if err := ev.inDependencyOrder(p); err != nil {
		t.Error(err)
	} else {
		tl.note("each service started only once the services it depends on were healthy (docker events)")
	}
	logs, _ := s.run(ctx, "logs", "--no-color", lab.Loadgen)
	if !strings.Contains(logs, `"message":"calibrated"`) {
		t.Errorf("the loadgen did not calibrate in its container:\n%s", tail(logs, 20))
	} else {
		tl.note("the loadgen calibrated against the baseline gateway inside its container")
	}
	if s.checkContainers(ctx, p) {
		tl.note("published ports bind 127.0.0.1 only; every process runs as a non-root user; bind mounts are read-only")
	}

	// 2. The baseline pages, in Prometheus, Alertmanager and the pager,
	// which profiled the gateway by its service name.
	probe := lab.Probe{Addrs: lab.DefaultAddrs()}
	page := waitIncident(t, s, probe, "stream-latency", "page", upAt, pageWithin)
	tl.mark(fmt.Sprintf("PAGE %s/%s at the pager, %s after the start", page.AlertName, page.SLO, time.Since(upAt).Round(time.Second)))
	ps, _ := s.run(ctx, "ps", "--format", "table {{.Service}}\t{{.Image}}\t{{.Status}}\t{{.Ports}}")
	tl.block("docker compose ps at the page", ps)
	if alerts, err := probe.Alerts(); err != nil || !hasAlert(alerts, "stream-latency", "page") {
		t.Errorf("Prometheus does not show the page firing: %v %+v", err, alerts)
	}
	if held, err := probe.AMAlerts(); err != nil || !amHolds(held, "stream-latency", "page") {
		t.Errorf("Alertmanager does not hold the page: %v %+v", err, held)
	}
	if env := s.inspect(ctx, lab.Pager).Config.Env; !slices.Contains(env, "PAGER_TARGETS=/etc/burnlab/pager.yml") {
		t.Errorf("the pager does not read pager/pager.yml, which profiles the gateway by its service name: %q", env)
	}
	inc := waitProfile(t, s, probe, page.ID, func(i incident.Incident) *incident.Profile { return i.Profile })
	if top := inc.Profile.Top[0]; !strings.HasSuffix(top.Function, guilty) {
		t.Fatalf("the page-time profile names %s, want %s", top.Function, guilty)
	}
	tl.mark(fmt.Sprintf("PROFILE from http://gateway:6060: top alloc_space %s (%.1f%%)", inc.Profile.Top[0].Function, inc.Profile.Top[0].FlatPct))
	words, err := probe.CheckTrace(inc)
	if err != nil {
		t.Fatalf("the page's flight-recorder snapshot: %v", err)
	}
	tl.mark("TRACE " + words)
	// The page tells its whole story (stack/lab's Story): the pair that
	// fired, the budget, real slow requests, the heap's verdict; and the
	// notifications' words carry the burn, the budget, the verdict and the
	// link.
	story := s.story(t, ctx, probe, page.ID, guilty, &tl)
	// The baseline's run raises stream-latency alone: availability and
	// TTFT stay silent, as the write-up's service was up, its first tokens
	// quick. The provider's SLO may burn here without its regression: the
	// baseline takes both of this machine's cores from the provider too.
	incs, err := probe.Incidents()
	if err != nil {
		t.Fatal(err)
	}
	for _, inc := range incs {
		if inc.SLO != "stream-latency" && inc.SLO != scenario.CompletionLatency {
			t.Errorf("the baseline's run raised %s %s (%s): only stream-latency may fire, and the provider's, whose process the baseline starves", inc.SLO, inc.Severity, inc.AlertName)
		}
	}
	tl.note(fmt.Sprintf("the first page burns within %dx–%dx (the steady traffic's, not the calibration's); the pager holds %d incidents, all stream-latency's or the provider's",
		lab.StoryBurnMin, lab.StoryBurnMax, len(incs)))

	// 3. make fixed: only the gateway is recreated, and the page resolves.
	before := s.ids(ctx)
	switched := time.Now()
	if out, err := s.runEnv(ctx, []string{"GATEWAY_TAG=fixed"}, "up", "--build", "--detach", "--no-deps", "--wait", lab.Gateway); err != nil {
		t.Fatalf("make fixed: %v\n%s", err, tail(out, 40))
	}
	tl.mark(fmt.Sprintf("make fixed: gateway recreated as burnlab/gateway:fixed in %s", time.Since(switched).Round(time.Second)))
	after := s.ids(ctx)
	for name, id := range before {
		if changed := after[name] != id; changed != (name == lab.Gateway) {
			t.Errorf("make fixed: %s's container %.12s → %.12s; only the gateway's may change", name, id, after[name])
		}
	}
	if img := s.inspect(ctx, lab.Gateway).Config.Image; img != "burnlab/gateway:fixed" {
		t.Errorf("the gateway runs %s after make fixed", img)
	}
	waitResolved(t, s, probe, page.ID, switched)
	tl.mark(fmt.Sprintf("RESOLVED %s after make fixed", time.Since(switched).Round(time.Second)))
	waitProfile(t, s, probe, page.ID, func(i incident.Incident) *incident.Profile { return i.After })
	if err := probe.PagerShows("/incidents/"+page.ID+"/diff/top?si=alloc_space", "Type: alloc_space", guilty); err != nil {
		t.Errorf("the before/after diff: %v", err)
	}
	tl.note("the pager's -diff_base view of the page-time and after profiles shows " + guilty + " gone")

	// 4. The monitoring path's faults (faults_test.go), after a reference
	// cycle that injects a scenario through make scenario's own code.
	// No page of any SLO may be firing when they begin: their rows count
	// every page notification, and the provider's SLO may page while the
	// baseline starves its process.
	poll(t, s, "no page firing in Prometheus or at the pager", func() bool {
		alerts, err := probe.Alerts()
		if err != nil || slices.ContainsFunc(alerts, func(a lab.Alert) bool { return a.Labels["severity"] == scenario.Page && a.State == "firing" }) {
			return false
		}
		incs, err := probe.Incidents()
		return err == nil && !slices.ContainsFunc(incs, func(i incident.Incident) bool { return i.Severity == scenario.Page && i.Status == "firing" })
	})
	rows := s.runFaults(t, ctx, probe, upAt, &tl)
	// 4b. The provider's own regression, through make scenario's control,
	// set as the faults whose rows count no page notification begin: its
	// page fires beside them (about 2.5 minutes at 10x, through the 2m/4m
	// pair) and counts in none of their rows. Its page's heap verdict
	// compares deltas from before the injection with one during it, so it
	// is set on a calm stack: at the start the loadgen calibrates and the
	// baseline takes both cores, leaving neither a calm "before" nor a burn
	// that began with the regression, and beside the baseline's burn its
	// long answers (the write-up's O(n²), in the process whose streams the
	// gateway proxies) slowed the baseline's resolve from under a minute
	// to 2m22s.
	providerAt := time.Now()
	if err := scenario.Set(ctx, "http://"+probe.Addrs.Upstream, "provider-regression"); err != nil {
		t.Fatal(err)
	}
	tl.mark("make scenario S=provider-regression: the provider's own code regresses (its SLO only)")
	rows = append(rows, s.quietFaults(t, ctx, probe, &tl, func() {
		// The provider's page carries the provider's profile and verdict,
		// not the gateway's. Then it is cleared; nothing after this counts
		// notifications, so its resolve is not waited for.
		told, err := probe.CheckProviderPage(ctx, providerAt, pageWithin-time.Since(providerAt))
		if err != nil {
			s.dump(ctx)
			t.Fatal(err)
		}
		tl.block(fmt.Sprintf("the provider's page, %s after make scenario S=provider-regression", time.Since(providerAt).Round(time.Second)), strings.Join(told, "\n"))
		if err := scenario.Set(ctx, "http://"+probe.Addrs.Upstream, scenario.None); err != nil {
			t.Fatal(err)
		}
		tl.mark("make scenario S=none: the provider's regression cleared")
	})...)
	table := faultTable(rows, false)
	fmt.Print(table)
	tl.block("the monitoring path's faults", table)
	// The pager read the GC's share over the minute after the resolve
	// while the faults ran.
	gcRead, err := probe.WaitGCAfter(ctx, page.ID, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	gcAfter, err := story.CheckGCAfter(gcRead)
	if err != nil {
		t.Fatalf("the fix's mechanism: %v", err)
	}
	tl.mark("GC " + gcAfter)

	// 5. A restart keeps the pager's incidents and Prometheus's samples.
	incs, err = probe.Incidents()
	if err != nil {
		t.Fatal(err)
	}
	then := time.Now().Add(-30 * time.Second)
	if _, err := sampleAt(probe, then); err != nil {
		t.Fatalf("before the restart: %v", err)
	}
	restarted := time.Now()
	if out, err := s.run(ctx, "restart"); err != nil {
		t.Fatalf("restart: %v\n%s", err, tail(out, 20))
	}
	s.waitHealthy(ctx, healthyWithin)
	tl.mark(fmt.Sprintf("docker compose restart: healthy again in %s", time.Since(restarted).Round(time.Second)))
	kept := true
	for _, old := range incs {
		if got, err := probe.Incident(old.ID); err != nil || got.ID == "" {
			t.Errorf("after the restart the pager lacks incident %s (%v)", old.ID, err)
			kept = false
		}
	}
	if _, err := sampleAt(probe, then); err != nil {
		t.Errorf("after the restart Prometheus lost its samples: %v", err)
		kept = false
	}
	if kept {
		tl.note(fmt.Sprintf("after the restart: the pager's %d incidents and Prometheus's samples from before it are there", len(incs)))
	}

	// 6. down -v leaves nothing of the project.
	volumes := s.volumes(ctx)
	if out, err := s.run(ctx, "down", "--volumes", "--timeout", "30"); err != nil {
		t.Fatalf("down -v: %v\n%s", err, out)
	}
	clean := true
	for what, args := range map[string][]string{
		"containers": {"ps", "-aq", "--filter", "label=com.docker.compose.project=" + project},
		"networks":   {"network", "ls", "-q", "--filter", "label=com.docker.compose.project=" + project},
		"volumes":    {"volume", "ls", "-q", "--filter", "label=com.docker.compose.project=" + project},
	} {
		if out, err := docker(ctx, args...); err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("after down -v, %s of the project remain: %q %v", what, out, err)
			clean = false
		}
	}
	for _, v := range volumes {
		if _, err := docker(ctx, "volume", "inspect", v); err == nil {
			t.Errorf("after down -v, volume %s remains", v)
			clean = false
		}
	}
	if clean {
		tl.note(fmt.Sprintf("docker compose down -v: no container, network or volume of the project left (%d volumes removed)", len(volumes)))
	}
	tl.mark("done")
	tl.print(os.Stdout)
	if dir := os.Getenv(results.EnvDir); dir != "" && !t.Failed() {
		if err := tl.save(filepath.Join(dir, "compose-e2e.md"), r.Images); err != nil {
			t.Error(err)
		}
		// After the results file, whose revision would read -dirty with
		// docs/compose.md already rewritten.
		if err := results.ReplaceBlock(filepath.Join(root, "docs", "compose.md"), faultsBegin, faultsEnd, faultTable(rows, true)); err != nil {
			t.Error(err)
		}
	}
}

// story waits for the incident's facts and holds them, the page and the
// gateway's log to what the person paged needs (lab.Story.Check), and
// returns it.
func (s *stack) story(t *testing.T, ctx context.Context, probe lab.Probe, id, guilty string, tl *timeline) lab.Story {
	t.Helper()
	story, err := probe.WaitStory(ctx, id, 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	log, err := s.run(ctx, "logs", "--no-color", "--no-log-prefix", lab.Gateway)
	if err != nil {
		t.Fatalf("gateway logs: %v", err)
	}
	told, err := story.Check(guilty, log)
	if err != nil {
		t.Fatalf("the page's story: %v", err)
	}
	// A fresh stack's first page is the steady traffic's, not the
	// calibration's (whose streams are the probe tenant's).
	if err := story.CheckBurn(); err != nil {
		t.Fatalf("the first page is not the write-up's: %v", err)
	}
	gc, err := story.CheckGC()
	if err != nil {
		t.Fatalf("the first page's mechanism: %v", err)
	}
	told = append(told, "the GC: "+gc)
	if err := probe.CheckPage(story); err != nil {
		t.Fatal(err)
	}
	tl.block("the page's story (API and web page)", strings.Join(told, "\n"))
	note, err := probe.Notification(ctx, s.root, "stream-latency", story)
	if err != nil {
		t.Fatalf("the notification: %v", err)
	}
	tl.block("the page's notifications, as burnlab's Alertmanager template renders them (amtool)", note)
	return story
}

// requireEngine skips the test, loudly, on a machine with no Docker
// daemon; under CI (CI=true) it fails instead, so a CI machine that lost
// its engine cannot pass by skipping.
func requireEngine(t *testing.T) {
	t.Helper()
	out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}} {{.Server.APIVersion}}").CombinedOutput()
	if err != nil {
		msg := fmt.Sprintf("NO DOCKER ENGINE: the compose e2e did not run (%v: %s)", err, bytes.TrimSpace(out))
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		fmt.Println("*** " + msg + " ***")
		t.Skip(msg)
	}
	if out, err := exec.Command("docker", "compose", "version", "--short").CombinedOutput(); err != nil {
		t.Fatalf("docker compose: %v: %s (make tools installs Compose v2)", err, out)
	} else {
		engine, _ := exec.Command("docker", "version", "--format", "{{.Server.Version}}").Output()
		fmt.Printf("docker engine %s, compose %s\n", bytes.TrimSpace(engine), bytes.TrimSpace(out))
	}
}

func busybox() string {
	if b := os.Getenv("BUSYBOX"); b != "" {
		return b
	}
	return "/bin/busybox"
}

// stack runs docker compose on the e2e's project: docker-compose.yml and
// the stand-ins' override, from the repo, with the variables fixed.
type stack struct {
	t        *testing.T
	root     string // absolute
	override string
}

func (s *stack) command() []string {
	return []string{"docker", "compose", "-p", project, "-f", filepath.Join(s.root, "docker-compose.yml"), "-f", s.override}
}

// env is what compose reads from the environment: the defaults, spelled
// out, so a developer's shell cannot change the run. BURNLAB_VERSION is
// fixed, so the build cache holds across commits.
func (s *stack) env() []string {
	return []string{"GATEWAY_TAG=baseline", "SLO_WINDOWS=lab", "BURNLAB_VERSION=e2e", "LOG_LEVEL=info"}
}

func (s *stack) run(ctx context.Context, args ...string) (string, error) {
	return s.runEnv(ctx, nil, args...)
}

// runEnv runs compose with extra variables over env (later ones win).
func (s *stack) runEnv(ctx context.Context, extra []string, args ...string) (string, error) {
	c := s.command()
	cmd := exec.CommandContext(ctx, c[0], append(c[1:], args...)...)
	cmd.Dir = s.root
	cmd.Env = append(append(append(os.Environ(), "COMPOSE_PROJECT_NAME=", "COMPOSE_FILE=", "COMPOSE_PROFILES="), s.env()...), extra...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// dump prints each service's state and its last log lines, for a failure.
func (s *stack) dump(ctx context.Context) {
	out, _ := s.run(ctx, "ps", "--all")
	fmt.Println(out)
	out, _ = s.run(ctx, "logs", "--no-color", "--tail", "15")
	fmt.Println(out)
}

// container is what the checks read of docker inspect.
type container struct {
	ID     string `json:"Id"`
	Name   string
	Config struct {
		Image  string
		User   string
		Env    []string
		Labels map[string]string
	}
	State struct {
		Pid    int
		Health *struct{ Status string }
	}
	HostConfig struct {
		PortBindings map[string][]struct{ HostIP, HostPort string }
	}
	Mounts []struct {
		Type, Name, Source, Destination string
		RW                              bool
	}
}

func (s *stack) containers(ctx context.Context) []container {
	s.t.Helper()
	out, err := s.run(ctx, "ps", "--quiet")
	if err != nil {
		s.t.Fatalf("ps: %v\n%s", err, out)
	}
	ids := strings.Fields(out)
	if len(ids) == 0 {
		s.t.Fatal("no container is running")
	}
	b, err := docker(ctx, append([]string{"inspect"}, ids...)...)
	if err != nil {
		s.t.Fatalf("inspect: %v", err)
	}
	var cs []container
	if err := json.Unmarshal([]byte(b), &cs); err != nil {
		s.t.Fatal(err)
	}
	return cs
}

func (s *stack) inspect(ctx context.Context, service string) container {
	s.t.Helper()
	for _, c := range s.containers(ctx) {
		if c.Config.Labels["com.docker.compose.service"] == service {
			return c
		}
	}
	s.t.Fatalf("no %s container", service)
	return container{}
}

// waitHealthy waits until every container with a healthcheck reports
// healthy (a restart gives no --wait).
func (s *stack) waitHealthy(ctx context.Context, within time.Duration) {
	s.t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(time.Second) {
		var waiting []string
		for _, c := range s.containers(ctx) {
			if c.State.Health != nil && c.State.Health.Status != "healthy" {
				waiting = append(waiting, c.Config.Labels["com.docker.compose.service"]+" "+c.State.Health.Status)
			}
		}
		if len(waiting) == 0 {
			return
		}
		if time.Now().After(deadline) {
			s.dump(ctx)
			s.t.Fatalf("not healthy within %s: %v", within, waiting)
		}
	}
}

// ids are the running containers' IDs by service.
func (s *stack) ids(ctx context.Context) map[string]string {
	m := map[string]string{}
	for _, c := range s.containers(ctx) {
		m[c.Config.Labels["com.docker.compose.service"]] = c.ID
	}
	return m
}

// volumes names every volume the containers mount: the named ones and
// any anonymous one an image's VOLUME made, which carries no label.
func (s *stack) volumes(ctx context.Context) []string {
	var vs []string
	for _, c := range s.containers(ctx) {
		for _, m := range c.Mounts {
			if m.Type == "volume" {
				vs = append(vs, m.Name)
			}
		}
	}
	return vs
}

// checkContainers holds every container to the compose file's promises:
// ports published on 127.0.0.1 only, a process that is not root (its
// effective uid, read from /proc, not the image's USER), and read-only
// config mounts. Every service of the project must be running. It says
// whether every check held.
func (s *stack) checkContainers(ctx context.Context, p *types.Project) bool {
	s.t.Helper()
	ok := true
	fail := func(format string, args ...any) {
		s.t.Helper()
		s.t.Errorf(format, args...)
		ok = false
	}
	cs := s.containers(ctx)
	var running []string
	for _, c := range cs {
		name := c.Config.Labels["com.docker.compose.service"]
		running = append(running, name)
		for port, bindings := range c.HostConfig.PortBindings {
			for _, b := range bindings {
				if b.HostIP != "127.0.0.1" {
					fail("%s publishes %s on %q, want 127.0.0.1 only", name, port, b.HostIP)
				}
			}
		}
		if uid, err := effectiveUID(c.State.Pid); err != nil || uid == 0 {
			fail("%s's process %d runs as uid %d (%v), want a non-root user", name, c.State.Pid, uid, err)
		}
		for _, m := range c.Mounts {
			if m.Type == "bind" && m.RW {
				fail("%s mounts %s at %s read-write, want read-only", name, m.Source, m.Destination)
			}
		}
	}
	if want := p.ServiceNames(); !sameSet(running, want) {
		fail("running services %v, want %v", running, want)
	}
	return ok
}

func sameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// effectiveUID reads a host process's effective uid from /proc: the
// engine here maps no user namespace, so it is the container's uid.
func effectiveUID(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1, err
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "Uid:" {
			return strconv.Atoi(f[2])
		}
	}
	return -1, fmt.Errorf("/proc/%d/status has no Uid line", pid)
}

func docker(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "docker", args...).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, ee.Stderr)
	}
	return string(out), err
}

// events follows docker events for the project from before the start,
// so the order in which services started and turned healthy is the
// engine's record, not a poll's.
func (s *stack) events(ctx context.Context) *events {
	e := &events{}
	cmd := exec.CommandContext(ctx, "docker", "events", "--format", "{{json .}}", "--filter", "label=com.docker.compose.project="+project, "--filter", "type=container")
	out, err := cmd.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var m struct {
				Status   string `json:"status"`
				TimeNano int64  `json:"timeNano"`
				Actor    struct {
					Attributes map[string]string
				}
			}
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				continue
			}
			e.mu.Lock()
			e.seen = append(e.seen, event{m.Actor.Attributes["com.docker.compose.service"], m.Status, time.Unix(0, m.TimeNano)})
			e.mu.Unlock()
		}
	}()
	// docker events subscribes asynchronously: give it a moment before
	// anything it must see happens.
	time.Sleep(time.Second)
	return e
}

type events struct {
	mu   sync.Mutex
	seen []event
}

type event struct {
	service, status string
	at              time.Time
}

// first is when service first had status, or the zero time.
func (e *events) first(service, status string) time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ev := range e.seen {
		if ev.service == service && ev.status == status {
			return ev.at
		}
	}
	return time.Time{}
}

// inDependencyOrder checks each depends_on edge with condition
// service_healthy: the dependent started after its dependency first
// reported healthy; and every service with a healthcheck turned healthy.
func (e *events) inDependencyOrder(p *types.Project) error {
	var bad []string
	for name, svc := range p.Services {
		started := e.first(name, "start")
		if started.IsZero() {
			bad = append(bad, name+" never started")
			continue
		}
		if svc.HealthCheck != nil && e.first(name, "health_status: healthy").IsZero() {
			bad = append(bad, name+" never reported healthy")
		}
		for dep, d := range svc.DependsOn {
			if d.Condition != types.ServiceConditionHealthy {
				continue
			}
			healthy := e.first(dep, "health_status: healthy")
			if healthy.IsZero() || started.Before(healthy) {
				bad = append(bad, fmt.Sprintf("%s started at %s, before %s was healthy (%s)", name, started.Format(time.TimeOnly), dep, healthy.Format(time.TimeOnly)))
			}
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("start order: %s", strings.Join(bad, "; "))
	}
	return nil
}

func hasAlert(alerts []lab.Alert, slo, severity string) bool {
	return slices.ContainsFunc(alerts, func(a lab.Alert) bool {
		return a.Labels["sloth_slo"] == slo && a.Labels["severity"] == severity && a.State == "firing"
	})
}

func amHolds(alerts []lab.AMAlert, slo, severity string) bool {
	return slices.ContainsFunc(alerts, func(a lab.AMAlert) bool {
		return a.Labels["sloth_slo"] == slo && a.Labels["severity"] == severity && a.Status.State == "active"
	})
}

// waitIncident waits for a firing incident of the SLO and severity.
func waitIncident(t *testing.T, s *stack, probe lab.Probe, sloName, severity string, since time.Time, within time.Duration) incident.Incident {
	t.Helper()
	for {
		incs, err := probe.Incidents()
		if err == nil {
			for _, inc := range incs {
				if inc.SLO == sloName && inc.Severity == severity && inc.Status == "firing" {
					return inc
				}
			}
		}
		if time.Since(since) > within {
			s.dump(context.Background())
			t.Fatalf("no %s %s at the pager within %s (%v)", sloName, severity, within, err)
		}
		time.Sleep(pollEvery)
	}
}

func waitResolved(t *testing.T, s *stack, probe lab.Probe, id string, since time.Time) {
	t.Helper()
	for {
		inc, err := probe.Incident(id)
		if err == nil && inc.Status == "resolved" {
			return
		}
		if time.Since(since) > resolveWithin {
			s.dump(context.Background())
			t.Fatalf("incident %s not resolved within %s (%v)", id, resolveWithin, err)
		}
		time.Sleep(pollEvery)
	}
}

// waitProfile waits for one of the incident's profiles (which picks) to
// be taken, and fails on a failed capture.
func waitProfile(t *testing.T, s *stack, probe lab.Probe, id string, which func(incident.Incident) *incident.Profile) incident.Incident {
	t.Helper()
	for deadline := time.Now().Add(profileWithin); ; time.Sleep(2 * time.Second) {
		inc, err := probe.Incident(id)
		if err != nil {
			t.Fatal(err)
		}
		if p := which(inc); p != nil {
			if p.Error != "" || len(p.Top) == 0 {
				t.Fatalf("incident %s: profile capture failed: %q", id, p.Error)
			}
			return inc
		}
		if time.Now().After(deadline) {
			s.dump(context.Background())
			t.Fatalf("incident %s: no profile within %s", id, profileWithin)
		}
	}
}

// sampleAt reads the gateway's up sample at a past time: Prometheus still
// has it only if its data survived.
func sampleAt(probe lab.Probe, at time.Time) (float64, error) {
	v, err := probe.QueryAt(`up{job="gateway"}`, at)
	if err != nil {
		return 0, err
	}
	for _, x := range v {
		return x, nil
	}
	return 0, fmt.Errorf("no up{job=\"gateway\"} sample at %s", at.Format(time.TimeOnly))
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// timeline is the run's measured figures, each from the test's start.
type timeline struct {
	t0    time.Time
	lines []string
}

func (tl *timeline) mark(what string) {
	line := fmt.Sprintf("t+%-6s %s", time.Since(tl.t0).Round(time.Second), what)
	fmt.Println(line)
	tl.lines = append(tl.lines, line)
}

func (tl *timeline) note(what string) {
	fmt.Println("         " + what)
	tl.lines = append(tl.lines, "         "+what)
}

// block adds text of several lines, indented, under a title.
func (tl *timeline) block(title, text string) {
	tl.note(title + ":")
	for line := range strings.Lines(strings.TrimRight(text, "\n")) {
		tl.note("  " + strings.TrimRight(line, "\n"))
	}
}

func (tl *timeline) print(w *os.File) {
	fmt.Fprintf(w, "timeline:\n%s\n", strings.Join(tl.lines, "\n"))
}

// save writes the timeline as a result file (shared/results), with the
// engine's and Compose's versions and the images it ran.
func (tl *timeline) save(path string, images []standins.Built) error {
	engine, _ := exec.Command("docker", "version", "--format", "{{.Server.Version}}").Output()
	compose, _ := exec.Command("docker", "compose", "version", "--short").Output()
	var ims []string
	for _, im := range images {
		ims = append(ims, fmt.Sprintf("`%s` for `%s`", im.Ref, im.Pin))
	}
	return results.Write(path, results.Run{
		Title: "The compose end-to-end run",
		By:    "`make e2e-compose SAVE=1` (stack/compose, TestComposeEndToEnd)",
		Root:  root, Date: tl.t0,
		Machine: []string{"Docker Engine " + string(bytes.TrimSpace(engine)), "Compose " + string(bytes.TrimSpace(compose))},
		Notes: []string{"images: " + strings.Join(ims, ", "),
			"each figure is from the test's start; the build figure depends on what Go's and BuildKit's caches held"},
		Body: strings.Join(tl.lines, "\n"),
	})
}
