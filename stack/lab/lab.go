// Package lab runs burnlab natively: the same processes and configuration
// files as docker compose, as local processes on 127.0.0.1, with real
// Prometheus and Alertmanager. Only addresses differ from compose, and they
// come from one table (Addrs), rendered into the repo's config files.
//
// The lab is the stack's reference: its end-to-end tests (make e2e) prove
// the story the README tells on it, package compose holds
// docker-compose.yml and the Dockerfile to it, and package kubernetes
// holds deploy/kubernetes to it. docs/tests.md maps each package of stack/
// to the artefact it guards.
package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"burnlab/shared/proc"
	"burnlab/shared/variant"
)

// Service names, as in docker-compose.yml and prometheus.yml.
const (
	Gateway      = "gateway"
	Upstream     = "upstream"
	Loadgen      = "loadgen"
	Pager        = "pager"
	Prometheus   = "prometheus"
	Alertmanager = "alertmanager"
	// Alertmanager2 is compose's and Kubernetes' second replica of the HA
	// pair; the lab runs one Alertmanager, which answers for both.
	Alertmanager2 = "alertmanager-2"
)

// Addrs are the lab's listen addresses. The compose addresses they replace
// are the ones in the repo's config files (service:port).
type Addrs struct {
	GatewayPublic, GatewayAdmin, Upstream, UpstreamAdmin, LoadgenAdmin, Pager, Prometheus, Alertmanager string
}

// DefaultAddrs are the contract's ports on 127.0.0.1.
func DefaultAddrs() Addrs {
	return Addrs{GatewayPublic: "127.0.0.1:8080", GatewayAdmin: "127.0.0.1:6060", Upstream: "127.0.0.1:8081",
		UpstreamAdmin: "127.0.0.1:6062", LoadgenAdmin: "127.0.0.1:6061", Pager: "127.0.0.1:5001", Prometheus: "127.0.0.1:9090", Alertmanager: "127.0.0.1:9093"}
}

// replacements maps each compose address in the config files to its lab
// address: the one place the two layouts differ.
func (a Addrs) replacements() *strings.Replacer {
	return strings.NewReplacer(
		"gateway:6060", a.GatewayAdmin,
		"upstream:8081", a.Upstream,
		"upstream:6062", a.UpstreamAdmin,
		"loadgen:6061", a.LoadgenAdmin,
		"pager:5001", a.Pager,
		"alertmanager:9093", a.Alertmanager,
		// The lab runs one Alertmanager; compose's second replica is it.
		"alertmanager-2:9093", a.Alertmanager,
		"localhost:9090", a.Prometheus,
	)
}

// Config is one lab.
type Config struct {
	Root    string // the repository
	Dir     string // binaries, rendered configs, data and logs
	Addrs   Addrs
	Variant variant.Variant // gateway build
	Windows string          // SLO rule set: lab or production
	// Tenants is the gateway's tenant list; the loadgen uses its keys.
	Tenants string
	// Shape is the traffic shape file; when it does not exist the lab
	// calibrates against the baseline gateway and writes it.
	Shape string
	Log   io.Writer
	// Bin, when set, holds binaries Build made: Start builds nothing, so
	// labs started side by side do not compile while others measure.
	Bin string
	// NoLoad leaves the load generator to StartLoad.
	NoLoad bool
	// LoadArgs are more flags for the load generator, e.g. a -creep.
	LoadArgs []string
}

// DefaultTenants gives the lab two tenants with quotas and stream limits far
// above the load (the loadgen keeps at most 256 streams in flight):
// the lab is about latency, not rate limits. The third, calibration, is a
// probe tenant (its fifth field): the loadgen's calibration sends its
// streams, which breach the SLO on purpose, as it, and the SLIs leave them
// out, so a fresh lab's first page is the steady traffic's burn.
const DefaultTenants = "sk-lab-acme=acme:1000000000:256,sk-lab-globex=globex:1000000000:256,sk-lab-calibration=" + ProbeTenant + ":1000000000:8:probe"

// ProbeTenant is the lab's probe tenant: the one whose streams, the
// calibration's, no SLI counts.
const ProbeTenant = "calibration"

// Lab is a running lab.
type Lab struct {
	Probe
	cfg   Config
	mu    sync.Mutex
	procs map[string]*proc.Proc
}

func (c *Config) defaults() error {
	if c.Root == "" || c.Dir == "" {
		return errors.New("lab: Root and Dir are required")
	}
	if c.Addrs == (Addrs{}) {
		c.Addrs = DefaultAddrs()
	}
	if c.Variant == "" {
		c.Variant = variant.Baseline
	}
	if _, err := variant.Parse(string(c.Variant)); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	if c.Windows == "" {
		c.Windows = "lab"
	}
	if c.Windows != "lab" && c.Windows != "production" {
		return fmt.Errorf("lab: SLO windows %q: want lab or production", c.Windows)
	}
	if c.Tenants == "" {
		c.Tenants = DefaultTenants
	}
	if c.Shape == "" {
		c.Shape = filepath.Join(c.Dir, "shape.json")
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return nil
}

func (l *Lab) say(format string, args ...any) { fmt.Fprintf(l.cfg.Log, "lab: "+format+"\n", args...) }

// Start builds everything, renders the configs and starts every process,
// returning once each is ready. On error the started processes are stopped.
func Start(ctx context.Context, cfg Config) (_ *Lab, err error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	l := &Lab{Probe: Probe{cfg.Addrs}, cfg: cfg, procs: map[string]*proc.Proc{}}
	defer func() {
		if err != nil {
			l.Stop()
		}
	}()
	for _, d := range []string{"bin", "etc/rules", "data/prometheus", "data/alertmanager", "data/pager", "logs"} {
		if err := os.MkdirAll(filepath.Join(cfg.Dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	if cfg.Bin == "" {
		if err := l.buildAll(ctx); err != nil {
			return nil, err
		}
	}
	if err := l.render(); err != nil {
		return nil, err
	}
	promBin, amBin, err := findPrometheus(cfg.Root)
	if err != nil {
		return nil, err
	}
	l.say("%s: %s", promBin, version(ctx, promBin))
	l.say("%s: %s", amBin, version(ctx, amBin))
	a := cfg.Addrs
	steps := []struct {
		name  string
		args  []string
		ready string
	}{
		{Upstream, []string{l.bin("upstream"), "-listen", a.Upstream, "-admin", a.UpstreamAdmin}, "http://" + a.UpstreamAdmin + "/readyz"},
		{Pager, []string{l.bin("pager"), "-listen", a.Pager, "-data", l.path("data/pager"), "-targets", l.path("etc/pager.yml"), "-external-url", "http://" + a.Pager,
			"-prometheus-url", "http://" + a.Prometheus, "-alertmanager-urls", "http://" + a.Alertmanager}, "http://" + a.Pager + "/readyz"},
		{Alertmanager, []string{amBin, "--config.file=" + l.path("etc/alertmanager.yml"), "--storage.path=" + l.path("data/alertmanager"),
			"--web.listen-address=" + a.Alertmanager, "--cluster.listen-address="}, "http://" + a.Alertmanager + "/-/ready"},
		// exemplar-storage keeps the request IDs on the gateway's stream
		// durations, as in docker-compose.yml.
		{Prometheus, []string{promBin, "--config.file=" + l.path("etc/prometheus.yml"), "--storage.tsdb.path=" + l.path("data/prometheus"),
			"--web.listen-address=" + a.Prometheus, "--enable-feature=exemplar-storage"}, "http://" + a.Prometheus + "/-/ready"},
	}
	// The calibration runs before the pager starts. Its gateway allocates
	// the way the baseline's long streams do, and the pager, sampling
	// delta heap profiles from its start, would keep one of that gateway
	// as the "before" of the first page: the heap would then seem not to
	// have changed during the burn.
	if err := l.start(ctx, steps[0].name, steps[0].args, steps[0].ready); err != nil {
		return nil, err
	}
	if _, err := os.Stat(cfg.Shape); errors.Is(err, os.ErrNotExist) {
		if err := l.startGateway(ctx, variant.Baseline); err != nil {
			return nil, err
		}
		if err := l.calibrate(ctx); err != nil {
			return nil, err
		}
	}
	for _, s := range steps[1:] {
		if err := l.start(ctx, s.name, s.args, s.ready); err != nil {
			return nil, err
		}
	}
	if err := l.startGateway(ctx, cfg.Variant); err != nil {
		return nil, err
	}
	if cfg.NoLoad {
		return l, nil
	}
	if err := l.StartLoad(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

// Build builds every binary a lab runs into bin, for labs started with
// Config.Bin.
func Build(ctx context.Context, root, bin string) error {
	l := &Lab{cfg: Config{Root: root, Bin: bin}}
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}
	return l.buildAll(ctx)
}

func (l *Lab) path(rel string) string { return filepath.Join(l.cfg.Dir, rel) }
func (l *Lab) bin(name string) string {
	if l.cfg.Bin != "" {
		return filepath.Join(l.cfg.Bin, name)
	}
	return l.path(filepath.Join("bin", name))
}

// A Binary is a cmd/ package the lab builds, and compose builds the
// service's image from (its CMD_PKG build argument).
type Binary struct{ Service, Package string }

// Binaries are the lab's Go processes.
func Binaries() []Binary {
	return []Binary{
		{Gateway, gatewayPkg},
		{Upstream, "./loadgen/cmd/upstream"},
		{Loadgen, "./loadgen/cmd/loadgen"},
		{Pager, "./pager/cmd/pager"},
	}
}

// buildAll builds the binaries the lab runs, the gateway in both variants.
func (l *Lab) buildAll(ctx context.Context) error {
	for _, b := range Binaries() {
		if b.Service == Gateway {
			for _, v := range variant.All() {
				if err := l.buildGateway(ctx, v); err != nil {
					return err
				}
			}
			continue
		}
		if err := l.build(ctx, b.Service, b.Package, ""); err != nil {
			return err
		}
	}
	return nil
}

const gatewayPkg = "./gateway/cmd/gateway"

// buildGateway builds one variant.
func (l *Lab) buildGateway(ctx context.Context, v variant.Variant) error {
	return l.build(ctx, "gateway-"+string(v), gatewayPkg, v.Tags())
}

func (l *Lab) build(ctx context.Context, out, pkg, tags string) error {
	b := proc.Build{Dir: l.cfg.Root, Out: l.bin(out), Pkgs: []string{pkg}, Tags: tags}
	if err := b.Run(ctx); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	return nil
}

// A ConfigFile is one of the repo's configuration files: where compose
// mounts it in its service's container (Target) and where the lab renders
// it, relative to the lab's directory (Lab). Their layouts match, so a path
// one file gives to another (prometheus.yml's rules/slo.yml) holds in both.
type ConfigFile struct{ Service, Source, Target, Lab string }

// ConfigFiles are the files both layouts read, with the rule set of the
// given SLO windows (lab or production) as rules/slo.yml.
func ConfigFiles(windows string) []ConfigFile {
	return []ConfigFile{
		{Prometheus, "prometheus/prometheus.yml", "/etc/prometheus/prometheus.yml", "etc/prometheus.yml"},
		{Prometheus, "prometheus/rules/slo-" + windows + ".yml", "/etc/prometheus/rules/slo.yml", "etc/rules/slo.yml"},
		{Alertmanager, "alertmanager/alertmanager.yml", "/etc/alertmanager/alertmanager.yml", "etc/alertmanager.yml"},
		// alertmanager.yml's templates, found relative to it.
		{Alertmanager, "alertmanager/templates/burnlab.tmpl", "/etc/alertmanager/templates/burnlab.tmpl", "etc/templates/burnlab.tmpl"},
		{Pager, "pager/pager.yml", "/etc/burnlab/pager.yml", "etc/pager.yml"},
	}
}

// render writes the repo's config files with lab addresses.
func (l *Lab) render() error {
	r := l.cfg.Addrs.replacements()
	for _, f := range ConfigFiles(l.cfg.Windows) {
		b, err := os.ReadFile(filepath.Join(l.cfg.Root, f.Source))
		if err != nil {
			return fmt.Errorf("lab: %w", err)
		}
		if err := os.MkdirAll(filepath.Dir(l.path(f.Lab)), 0o755); err != nil {
			return fmt.Errorf("lab: %w", err)
		}
		// f comes from ConfigFiles, the lab's own table, not from input.
		if err := os.WriteFile(l.path(f.Lab), []byte(r.Replace(string(b))), 0o644); err != nil { //nolint:gosec // G703: see above
			return fmt.Errorf("lab: %w", err)
		}
	}
	return nil
}

// findPrometheus finds the real binaries: those `make tools` builds into
// the repo's bin/ at the versions compose pins (tools/prometheus,
// tools/alertmanager), else the first on the PATH, which may be another
// version (Debian names Alertmanager prometheus-alertmanager).
func findPrometheus(root string) (prom, am string, err error) {
	look := func(names ...string) string {
		for _, name := range names {
			if p := filepath.Join(root, "bin", name); isExecutable(p) {
				return p
			}
		}
		for _, name := range names {
			if p, err := exec.LookPath(name); err == nil {
				return p
			}
		}
		return ""
	}
	if prom = look("prometheus"); prom == "" {
		return "", "", errors.New("lab: prometheus not found: run `make tools` (it builds Prometheus v3.16.0 into bin/)")
	}
	if am = look("alertmanager", "prometheus-alertmanager"); am == "" {
		return "", "", errors.New("lab: alertmanager not found: run `make tools` (it builds Alertmanager v0.35.0 into bin/)")
	}
	return prom, am, nil
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// version is the first line of a Prometheus binary's --version.
func version(ctx context.Context, bin string) string {
	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput() //nolint:gosec // G204: a binary findPrometheus chose
	if err != nil {
		return "unknown version (" + err.Error() + ")"
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line)
}

// start runs one process (proc.Start), logging to logs/<name>.log, and
// waits until ready answers 200.
func (l *Lab) start(ctx context.Context, name string, args []string, ready string) error {
	logPath := l.path("logs/" + name + ".log")
	p, err := proc.Start(ctx, proc.Spec{Name: name, Args: args, Log: logPath, Env: []string{"LOG_LEVEL=info"}, Ready: ready})
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	l.mu.Lock()
	l.procs[name] = p
	l.mu.Unlock()
	l.say("%-12s pid %d, log %s", name, p.Pid(), logPath)
	return nil
}

// stop ends one process (its whole group): SIGTERM, then SIGKILL after
// grace.
func (l *Lab) stop(name string, grace time.Duration) {
	l.mu.Lock()
	p := l.procs[name]
	delete(l.procs, name)
	l.mu.Unlock()
	if p != nil {
		p.Stop(grace)
	}
}

// Stop ends every process, load first, leaving none behind.
func (l *Lab) Stop() {
	for _, name := range []string{Loadgen, Gateway, Upstream, Prometheus, Alertmanager, Pager} {
		l.stop(name, 15*time.Second)
	}
}

func (l *Lab) startGateway(ctx context.Context, v variant.Variant) error {
	a := l.cfg.Addrs
	return l.start(ctx, Gateway, []string{l.bin("gateway-" + string(v)), "-listen", a.GatewayPublic, "-admin", a.GatewayAdmin,
		"-upstream", "http://" + a.Upstream, "-tenants", l.cfg.Tenants,
		// Nothing routes by /readyz here: a grace period would only keep
		// the old build serving, and breaching, after a switch.
		"-drain-grace", "0s"}, "http://"+a.GatewayAdmin+"/readyz")
}

// Switch replaces the gateway with the other build, as the compose tag
// toggle does: only the gateway restarts, draining its streams first.
func (l *Lab) Switch(ctx context.Context, v variant.Variant) error {
	if err := l.buildGateway(ctx, v); err != nil {
		return err
	}
	l.stop(Gateway, 70*time.Second)
	l.say("gateway switched to %s", v)
	return l.startGateway(ctx, v)
}

func (l *Lab) calibrate(ctx context.Context) error {
	l.say("calibrating the traffic shape against the baseline gateway (writes %s)", l.cfg.Shape)
	cmd := exec.CommandContext(ctx, l.bin("loadgen"), "calibrate", "-target", "http://"+l.cfg.Addrs.GatewayPublic+"/v1/chat/stream",
		"-tenants", l.cfg.Tenants, "-o", l.cfg.Shape)
	out, err := cmd.CombinedOutput()
	if _, werr := l.cfg.Log.Write(out); werr != nil && err == nil {
		err = fmt.Errorf("writing its output: %w", werr)
	}
	if err != nil {
		return fmt.Errorf("lab: calibration: %w", err)
	}
	l.stop(Gateway, 70*time.Second)
	return nil
}

// StartLoad starts the load generator, until stopped, once the pager
// holds a delta heap profile of the gateway and of the provider before any
// load: the "before" a page's heap verdict compares the burn with.
func (l *Lab) StartLoad(ctx context.Context) error {
	if err := l.waitIdleDelta(ctx); err != nil {
		return err
	}
	a := l.cfg.Addrs
	args := []string{l.bin("loadgen"), "-target", "http://" + a.GatewayPublic + "/v1/chat/stream",
		"-tenants", l.cfg.Tenants, "-shape", l.cfg.Shape, "-duration", "0", "-admin", a.LoadgenAdmin, "-ramp", "10s",
		"-direct", "http://" + a.Upstream + "/v1/chat/completions"}
	return l.start(ctx, Loadgen, append(args, l.cfg.LoadArgs...), "http://"+a.LoadgenAdmin+"/readyz")
}

// idleDeltaWithin bounds the wait for the pager's first delta profile of
// each rule: it takes one at its start and retries a refused fetch every
// 5 s (heapdelta.RetryAfter), and a delta lasts 10 s, so the first one
// ends at most ~15 s after the process is up; the rest is margin for a
// busy machine.
const idleDeltaWithin = time.Minute

// waitIdleDelta waits until the pager has taken a delta heap profile for
// each rule it samples (pager/pager.yml): the gateway's and the provider's.
func (l *Lab) waitIdleDelta(ctx context.Context) error {
	for _, rule := range []string{GatewayRule, ProviderRule} {
		if err := l.WaitHeapBaseline(ctx, rule, idleDeltaWithin); err != nil {
			return fmt.Errorf("lab: %w:\n%s", err, l.Tail(Pager, 20))
		}
	}
	return nil
}

// StopLoad stops the load generator.
func (l *Lab) StopLoad() { l.stop(Loadgen, 30*time.Second) }

// URLs are where a person looks.
func (l *Lab) URLs() [][2]string {
	a := l.cfg.Addrs
	return [][2]string{
		{"gateway", "http://" + a.GatewayPublic + "/v1/chat/stream"},
		{"gateway admin", "http://" + a.GatewayAdmin + "/metrics"},
		{"provider admin", "http://" + a.UpstreamAdmin + "/metrics"},
		{"prometheus", "http://" + a.Prometheus + "/alerts"},
		{"alertmanager", "http://" + a.Alertmanager},
		{"pager", "http://" + a.Pager + "/"},
		{"pager API", "http://" + a.Pager + "/api/incidents"},
		{"loadgen metrics", "http://" + a.LoadgenAdmin + "/metrics"},
	}
}

// Tail returns the last n lines of a process's log.
func (l *Lab) Tail(name string, n int) string { return proc.Tail(l.path("logs/"+name+".log"), n) }

// Log is a process's whole log, "" when it has none.
func (l *Lab) Log(name string) string {
	b, _ := os.ReadFile(l.path("logs/" + name + ".log"))
	return string(b)
}

// Running reports the processes running now.
func (l *Lab) Running() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var names []string
	for name, p := range l.procs {
		select {
		case <-p.Done():
		default:
			names = append(names, name+"("+strconv.Itoa(p.Pid())+")")
		}
	}
	return names
}
