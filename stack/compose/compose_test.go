package compose

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"go.yaml.in/yaml/v3"

	"burnlab/prometheus/rulegen/nodata"
	"burnlab/shared/scenario"
	"burnlab/stack/lab"
)

const root = "../.."

// load reads the compose file as `docker compose` would with the given
// shell variables over .env.
func load(t *testing.T, env ...string) *types.Project {
	t.Helper()
	p, err := Load(context.Background(), root, env...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// variants are every GATEWAY_TAG × SLO_WINDOWS the README offers.
var variants = [][]string{
	nil, // .env as committed
	{"GATEWAY_TAG=fixed"},
	{"SLO_WINDOWS=production"},
	{"GATEWAY_TAG=fixed", "SLO_WINDOWS=production"},
}

func env(vars []string, key, def string) string {
	for _, v := range vars {
		if k, val, _ := strings.Cut(v, "="); k == key {
			return val
		}
	}
	return def
}

func TestTheStackLoadsWithItsServicesAndTheTagToggle(t *testing.T) {
	want := []string{lab.Alertmanager, lab.Alertmanager2, lab.Gateway, "grafana", lab.Loadgen, lab.Pager, lab.Prometheus, lab.Upstream}
	for _, vars := range variants {
		p := load(t, vars...)
		if got := p.ServiceNames(); !slices.Equal(slices.Sorted(slices.Values(got)), want) {
			t.Fatalf("%q: services %v, want %v", vars, got, want)
		}
		tag := env(vars, "GATEWAY_TAG", "baseline")
		gw := p.Services[lab.Gateway]
		if gw.Image != "burnlab/gateway:"+tag {
			t.Errorf("%q: gateway image %q, want burnlab/gateway:%s", vars, gw.Image, tag)
		}
		// The tag and the build must not disagree: the image named fixed
		// holds the fixed parser.
		if v := arg(gw.Build, "VARIANT"); v != tag {
			t.Errorf("%q: gateway built with VARIANT=%q under tag %q", vars, v, tag)
		}
	}
	dotenv, err := os.ReadFile(filepath.Join(root, ".env"))
	if err != nil || !regexp.MustCompile(`(?m)^GATEWAY_TAG=baseline$`).Match(dotenv) {
		t.Fatalf(".env must start the story at GATEWAY_TAG=baseline (%v)", err)
	}
}

func arg(b *types.BuildConfig, name string) string {
	if b == nil || b.Args[name] == nil {
		return ""
	}
	return *b.Args[name]
}

// The images compose builds are the lab's binaries: the same cmd/
// packages, and the gateway's variant chosen the same way.
func TestImagesBuildTheLabsBinaries(t *testing.T) {
	p := load(t)
	built := map[string]string{}
	for name, s := range p.Services {
		if s.Build == nil {
			continue
		}
		if s.Build.Context != mustAbs(t, root) {
			t.Errorf("%s: build context %s, want the repo root (go.work spans every module)", name, s.Build.Context)
		}
		if s.Build.Target == "service" {
			built[name] = arg(s.Build, "CMD_PKG")
		}
	}
	want := map[string]string{}
	for _, b := range lab.Binaries() {
		want[b.Service] = b.Package
	}
	if !mapsEqual(built, want) {
		t.Fatalf("compose builds %v; the lab builds %v", built, want)
	}
	for svc, pkg := range built {
		if _, err := os.Stat(filepath.Join(root, pkg, "main.go")); err != nil {
			t.Errorf("%s: CMD_PKG %s is not a command: %v", svc, pkg, err)
		}
	}
	if g, l := p.Services[lab.Gateway].Environment["GATEWAY_TENANTS"], p.Services[lab.Loadgen].Environment["LOADGEN_TENANTS"]; g == nil || l == nil || *g != lab.DefaultTenants || *l != lab.DefaultTenants {
		t.Errorf("tenants: gateway %v, loadgen %v; the lab uses %q", g, l, lab.DefaultTenants)
	}
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Prometheus, Alertmanager and the pager read the very files the lab renders, at
// the same places relative to each other, and nothing else of the repo.
func TestConfigFilesAreTheLabs(t *testing.T) {
	for _, windows := range []string{"lab", "production"} {
		p := load(t, "SLO_WINDOWS="+windows)
		want := map[string]string{}
		for _, f := range lab.ConfigFiles(windows) {
			want[f.Service+":"+f.Target] = filepath.Join(mustAbs(t, root), f.Source)
		}
		got := map[string]string{}
		for _, name := range []string{lab.Prometheus, lab.Alertmanager, lab.Pager} {
			for _, v := range p.Services[name].Volumes {
				if v.Type == types.VolumeTypeBind {
					got[name+":"+v.Target] = v.Source
				}
			}
		}
		if !mapsEqual(got, want) {
			t.Errorf("SLO_WINDOWS=%s: compose mounts %v; the lab renders %v", windows, got, want)
		}
	}
}

func TestBindMountsExistAndAreReadOnly(t *testing.T) {
	for _, vars := range variants {
		for name, s := range load(t, vars...).Services {
			for _, v := range s.Volumes {
				if v.Type != types.VolumeTypeBind {
					continue
				}
				if _, err := os.Stat(v.Source); err != nil {
					t.Errorf("%q: %s mounts %s, which does not exist", vars, name, v.Source)
				}
				if !v.ReadOnly {
					t.Errorf("%s mounts %s writable; the repo's config is read-only to containers", name, v.Source)
				}
			}
		}
	}
}

func TestStateLivesInNamedVolumes(t *testing.T) {
	p := load(t)
	for svc, target := range map[string]string{
		lab.Prometheus: "/prometheus", lab.Alertmanager: "/alertmanager", lab.Alertmanager2: "/alertmanager", "grafana": "/var/lib/grafana", lab.Pager: "/var/lib/burnlab", lab.Loadgen: "/var/lib/burnlab",
	} {
		found := false
		for _, v := range p.Services[svc].Volumes {
			if v.Type == types.VolumeTypeVolume && v.Target == target {
				_, declared := p.Volumes[v.Source]
				found = declared
			}
		}
		if !found {
			t.Errorf("%s: no named volume at %s", svc, target)
		}
	}
	if d := p.Services[lab.Pager].Environment["PAGER_DATA"]; d == nil || *d != "/var/lib/burnlab" {
		t.Errorf("the pager journals to %v, not its volume", d)
	}
}

// listens is the set of ports each service's process listens on: what the
// burnlab binaries are told (*_LISTEN, *_ADMIN), and the upstream
// defaults of the third-party servers, which compose does not change.
func listens(t *testing.T, p *types.Project) map[string][]string {
	// Alertmanager's web port, and its cluster port (the pair's gossip).
	ports := map[string][]string{lab.Prometheus: {"9090"}, lab.Alertmanager: {"9093", "9094"}, lab.Alertmanager2: {"9093", "9094"}, "grafana": {"3000"}}
	for name, s := range p.Services {
		for k, v := range s.Environment {
			if v != nil && (strings.HasSuffix(k, "_LISTEN") || strings.HasSuffix(k, "_ADMIN")) {
				_, port, err := net.SplitHostPort(*v)
				if err != nil {
					t.Fatalf("%s: %s=%q: %v", name, k, *v, err)
				}
				ports[name] = append(ports[name], port)
			}
		}
		slices.Sort(ports[name])
	}
	return ports
}

func TestExposedPortsAreTheListenedOnes(t *testing.T) {
	p := load(t)
	ls := listens(t, p)
	for name, s := range p.Services {
		exposed := slices.Sorted(slices.Values(s.Expose))
		if !slices.Equal(exposed, ls[name]) {
			t.Errorf("%s: expose %v, listens on %v", name, exposed, ls[name])
		}
	}
	// The contract's ports, as the lab uses them.
	a := lab.DefaultAddrs()
	for svc, addrs := range map[string][]string{
		lab.Gateway: {a.GatewayPublic, a.GatewayAdmin}, lab.Upstream: {a.Upstream, a.UpstreamAdmin}, lab.Loadgen: {a.LoadgenAdmin},
		lab.Pager: {a.Pager}, lab.Prometheus: {a.Prometheus}, lab.Alertmanager: {a.Alertmanager},
	} {
		var want []string
		for _, addr := range addrs {
			_, port, _ := net.SplitHostPort(addr)
			want = append(want, port)
		}
		// The lab's lone Alertmanager has no pair to gossip with, so no
		// cluster port.
		got := slices.DeleteFunc(slices.Clone(ls[svc]), func(p string) bool { return svc == lab.Alertmanager && p == "9094" })
		if slices.Sort(want); !slices.Equal(got, want) {
			t.Errorf("%s listens on %v in compose, %v in the lab", svc, got, want)
		}
	}
}

func TestPortsArePublishedOnLoopbackOnly(t *testing.T) {
	p := load(t)
	ls := listens(t, p)
	for name, s := range p.Services {
		for _, port := range s.Ports {
			if port.HostIP != "127.0.0.1" {
				t.Errorf("%s publishes %s on %q: only 127.0.0.1", name, port.Published, port.HostIP)
			}
			target := strconv.FormatUint(uint64(port.Target), 10)
			if port.Published != target || !slices.Contains(ls[name], target) {
				t.Errorf("%s publishes %s→%s; want the same port, one it listens on (%v)", name, port.Published, target, ls[name])
			}
		}
	}
}

// make scenario finds the stack at the contract's addresses, the lab's and
// compose's alike: compose must publish there the upstream it sets the
// fault on and the gateway admin it reads the build from.
func TestScenarioReachesComposesStack(t *testing.T) {
	p := load(t)
	st := lab.DefaultStack()
	for svc, addr := range map[string]string{lab.Upstream: st.Upstream, lab.Gateway: st.GatewayAdmin} {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatalf("make scenario's %s address: %v", svc, err)
		}
		found := false
		for _, pp := range p.Services[svc].Ports {
			found = found || pp.HostIP == host && pp.Published == port
		}
		if !found {
			t.Errorf("compose does not publish %s at %s, where make scenario looks for it", svc, addr)
		}
	}
	if got := strings.Join(st.Compose, " "); got != "docker compose" {
		t.Errorf("make scenario switches builds with %q, not docker compose", got)
	}
}

// addr is a host:port some configuration file or service dials, and where
// it was found.
type addr struct{ from, hostport string }

// dialed collects every address burnlab's configuration dials: scrape and
// Alertmanager targets, webhook and datasource URLs, and the URLs in the
// services' environment.
func dialed(t *testing.T, p *types.Project) []addr {
	var out []addr
	var prom struct {
		Alerting struct {
			Alertmanagers []struct {
				StaticConfigs []struct{ Targets []string } `yaml:"static_configs"`
			}
		}
		ScrapeConfigs []struct {
			JobName       string                       `yaml:"job_name"`
			StaticConfigs []struct{ Targets []string } `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	decode(t, "prometheus/prometheus.yml", yaml.Unmarshal, &prom)
	for _, am := range prom.Alerting.Alertmanagers {
		for _, sc := range am.StaticConfigs {
			for _, tg := range sc.Targets {
				out = append(out, addr{"prometheus.yml alerting", tg})
			}
		}
	}
	for _, job := range prom.ScrapeConfigs {
		for _, sc := range job.StaticConfigs {
			for _, tg := range sc.Targets {
				out = append(out, addr{"prometheus.yml job " + job.JobName, tg})
			}
		}
	}
	var am struct {
		Receivers []struct {
			Name           string
			WebhookConfigs []struct{ URL string } `yaml:"webhook_configs"`
		}
	}
	decode(t, "alertmanager/alertmanager.yml", yaml.Unmarshal, &am)
	for _, r := range am.Receivers {
		for _, w := range r.WebhookConfigs {
			out = append(out, addr{"alertmanager.yml receiver " + r.Name, hostport(t, w.URL)})
		}
	}
	var ds struct{ Datasources []struct{ Name, URL string } }
	decode(t, "grafana/provisioning/datasources/prometheus.yml", yaml.Unmarshal, &ds)
	for _, d := range ds.Datasources {
		out = append(out, addr{"grafana datasource " + d.Name, hostport(t, d.URL)})
	}
	for name, s := range p.Services {
		for k, v := range s.Environment {
			if v == nil || !strings.HasPrefix(*v, "http") {
				continue
			}
			// A list, as PAGER_ALERTMANAGER_URLS is, dials each.
			for u := range strings.SplitSeq(*v, ",") {
				out = append(out, addr{name + " " + k, hostport(t, u)})
			}
		}
	}
	return out
}

// decode reads a repo file with the given decoder (yaml.Unmarshal or
// json.Unmarshal) into v.
func decode(t *testing.T, rel string, unmarshal func([]byte, any) error, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	if err := unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
}

func hostport(t *testing.T, raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Port() == "" {
		t.Fatalf("%q: want a URL with an explicit port (%v)", raw, err)
	}
	return u.Host
}

func TestEveryDialedAddressIsAServiceListening(t *testing.T) {
	p := load(t)
	ls := listens(t, p)
	as := dialed(t, p)
	if len(as) < 12 {
		t.Fatalf("found only %d addresses: %v", len(as), as)
	}
	scraped := map[string]bool{}
	for _, a := range as {
		host, port, err := net.SplitHostPort(a.hostport)
		if err != nil {
			t.Errorf("%s: %q: %v", a.from, a.hostport, err)
			continue
		}
		// Prometheus scrapes itself at localhost, inside its own container.
		if host == "localhost" && strings.HasPrefix(a.from, "prometheus.yml") {
			host = lab.Prometheus
		}
		if _, ok := p.Services[host]; !ok {
			t.Errorf("%s dials %s: no compose service %q", a.from, a.hostport, host)
			continue
		}
		if !slices.Contains(ls[host], port) {
			t.Errorf("%s dials %s, but %s listens on %v", a.from, a.hostport, host, ls[host])
		}
		// The contract: scrape job names are process names; the HA
		// pair's second replica is an alertmanager too.
		if job, ok := strings.CutPrefix(a.from, "prometheus.yml job "); ok {
			if job != strings.TrimSuffix(host, "-2") {
				t.Errorf("job %q scrapes %s", job, host)
			}
			scraped[host] = true
		}
	}
	for _, b := range lab.Binaries() {
		if !scraped[b.Service] {
			t.Errorf("Prometheus does not scrape %s", b.Service)
		}
	}
}

// Every service says when it is ready, in a way its image can run, and
// starts only after what it needs is ready.
func TestHealthchecksGateTheStartOrder(t *testing.T) {
	p := load(t)
	ls := listens(t, p)
	for name, s := range p.Services {
		hc := s.HealthCheck
		if hc == nil || hc.Disable || len(hc.Test) < 3 || hc.Test[0] != "CMD" {
			t.Errorf("%s: healthcheck %v; want an exec-form CMD (distroless images have no shell)", name, hc)
			continue
		}
		// burnlab's distroless images run the probe binary; the
		// third-party images are busybox-based and have wget.
		probe := "/usr/local/bin/healthcheck"
		if s.Build == nil || s.Build.Target != "service" {
			probe = "wget"
		}
		if hc.Test[1] != probe {
			t.Errorf("%s: healthcheck runs %s, want %s", name, hc.Test[1], probe)
		}
		u, err := url.Parse(hc.Test[len(hc.Test)-1])
		if err != nil || u.Hostname() != "127.0.0.1" || !slices.Contains(ls[name], u.Port()) {
			t.Errorf("%s: healthcheck asks %q; want 127.0.0.1 on a port it listens on (%v)", name, hc.Test[len(hc.Test)-1], ls[name])
		}
		for dep, d := range s.DependsOn {
			if d.Condition != types.ServiceConditionHealthy {
				t.Errorf("%s waits for %s to be %q, want %q", name, dep, d.Condition, types.ServiceConditionHealthy)
			}
		}
	}
	for svc, deps := range map[string][]string{
		lab.Gateway: {lab.Upstream}, lab.Loadgen: {lab.Gateway}, lab.Alertmanager: {lab.Pager},
		lab.Prometheus: {lab.Alertmanager, lab.Alertmanager2}, lab.Alertmanager2: {lab.Pager}, "grafana": {lab.Prometheus, lab.Pager},
	} {
		for _, d := range deps {
			if _, ok := p.Services[svc].DependsOn[d]; !ok {
				t.Errorf("%s does not wait for %s", svc, d)
			}
		}
	}
}

var exactVersion = regexp.MustCompile(`^[a-z0-9./-]+:v?[0-9]+\.[0-9]+\.[0-9]+$`)

func TestImagesArePinned(t *testing.T) {
	for _, vars := range variants {
		for name, s := range load(t, vars...).Services {
			if s.Build == nil {
				if !exactVersion.MatchString(s.Image) {
					t.Errorf("%s: image %q is not pinned to an exact version", name, s.Image)
				}
				continue
			}
			// Built here, never pulled: a burnlab/* name on a registry
			// must not stand in for the local build.
			repo, tag, _ := strings.Cut(s.Image, ":")
			if repo != "burnlab/"+name || tag == "" || tag == "latest" || s.PullPolicy != types.PullPolicyBuild {
				t.Errorf("%s: image %q, pull_policy %q; want burnlab/%s:<tag>, never latest, pull_policy build", name, s.Image, s.PullPolicy, name)
			}
		}
	}
}

// Grafana's provisioning, dashboards and plugin line up with the paths
// compose mounts them at and the image installs the plugin at.
func TestGrafanaIsWiredToItsMounts(t *testing.T) {
	p := load(t)
	g := p.Services["grafana"]
	mounts := map[string]string{}
	for _, v := range g.Volumes {
		if v.Type == types.VolumeTypeBind {
			rel, err := filepath.Rel(mustAbs(t, root), v.Source)
			if err != nil {
				t.Fatal(err)
			}
			mounts[filepath.ToSlash(rel)] = v.Target
		}
	}
	if mounts["grafana/provisioning"] != "/etc/grafana/provisioning" || mounts["grafana/grafana.ini"] != "/etc/grafana/grafana.ini" {
		t.Errorf("grafana mounts %v", mounts)
	}
	var prov struct {
		Providers []struct {
			Options struct{ Path string }
		}
	}
	decode(t, "grafana/provisioning/dashboards/burnlab.yml", yaml.Unmarshal, &prov)
	if len(prov.Providers) != 1 || prov.Providers[0].Options.Path != mounts["grafana/dashboards"] {
		t.Errorf("the dashboard provider reads %+v; compose mounts grafana/dashboards at %q", prov.Providers, mounts["grafana/dashboards"])
	}
	ini, err := os.ReadFile(filepath.Join(root, "grafana/grafana.ini"))
	if err != nil {
		t.Fatal(err)
	}
	home := regexp.MustCompile(`(?m)^default_home_dashboard_path = (\S+)$`).FindSubmatch(ini)
	if home == nil {
		t.Fatal("grafana.ini sets no home dashboard")
	}
	rel, ok := strings.CutPrefix(string(home[1]), mounts["grafana/dashboards"]+"/")
	if _, err := os.Stat(filepath.Join(root, "grafana/dashboards", rel)); !ok || err != nil {
		t.Errorf("home dashboard %s is not a file compose mounts (%v)", home[1], err)
	}
	var plugin struct{ ID string }
	decode(t, "grafana/plugin/dist/plugin.json", json.Unmarshal, &plugin)
	allowed := regexp.MustCompile(`(?m)^allow_loading_unsigned_plugins = (\S+)$`).FindSubmatch(ini)
	if allowed == nil || string(allowed[1]) != plugin.ID {
		t.Errorf("grafana.ini allows unsigned %q, the plugin is %q: allow it by its id alone", allowed, plugin.ID)
	}
	if pw := g.Environment["GF_SECURITY_ADMIN_PASSWORD"]; pw == nil || *pw == "" {
		t.Error("compose gives Grafana no admin password; grafana.ini takes it from GF_SECURITY_ADMIN_PASSWORD")
	}
}

// grafanaPinned is what the grafana.ini compose mounts must say for the
// pinned Grafana (13.2) to start the same way every time, and offline once
// its image is pulled. Grafana 13.2 ships the Prometheus datasource as a
// plugin bundled in the image and, by default, at every start downloads a
// list of plugins from grafana.com and replaces bundled ones with the
// catalog's latest, unloading the running one first: offline, the
// datasource is gone and every panel errors. The rest are Grafana's other
// calls to grafana.com and gravatar.com.
var grafanaPinned = []struct{ section, key, want string }{
	{"plugins", "preinstall_disabled", "true"},
	{"plugins", "preinstall_auto_update", "false"},
	{"plugins", "public_key_retrieval_disabled", "true"},
	{"plugins", "plugin_admin_enabled", "false"},
	{"analytics", "reporting_enabled", "false"},
	{"analytics", "check_for_updates", "false"},
	{"analytics", "check_for_plugin_updates", "false"},
	{"news", "news_feed_enabled", "false"},
	{"security", "disable_gravatar", "true"},
}

// parseINI reads the [section] key = value lines of an ini file; lines
// starting with # or ; are comments, and a repeated key's last value wins,
// as with Grafana's loader. Nothing is cut from a value: a trailing comment
// makes it no boolean, and the check fails rather than guesses.
func parseINI(b []byte) map[string]map[string]string {
	out := map[string]map[string]string{}
	section := ""
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[' && line[len(line)-1] == ']':
			section = strings.TrimSpace(line[1 : len(line)-1])
		default:
			if k, v, ok := strings.Cut(line, "="); ok {
				if out[section] == nil {
					out[section] = map[string]string{}
				}
				out[section][strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
		}
	}
	return out
}

// iniBool reads a boolean as Grafana's ini library (go-ini) does.
func iniBool(s string) (value, ok bool) {
	switch s {
	case "1", "t", "T", "true", "TRUE", "True", "YES", "yes", "Yes", "y", "ON", "on", "On":
		return true, true
	case "0", "f", "F", "false", "FALSE", "False", "NO", "no", "No", "n", "OFF", "off", "Off":
		return false, true
	}
	return false, false
}

// grafanaEnvKey is the variable that overrides [section] key in Grafana's
// configuration: GF_<SECTION>_<KEY>.
func grafanaEnvKey(section, key string) string {
	r := strings.NewReplacer(".", "_", "-", "_")
	return strings.ToUpper("GF_" + r.Replace(section) + "_" + r.Replace(key))
}

// pinnedFaults lists every grafanaPinned setting that Grafana, reading ini
// under the environment env, would not have at its required value.
func pinnedFaults(ini []byte, env map[string]string) []string {
	cfg := parseINI(ini)
	var out []string
	for _, s := range grafanaPinned {
		want, _ := iniBool(s.want)
		from := "grafana.ini"
		v, ok := cfg[s.section][s.key]
		if ev, set := env[grafanaEnvKey(s.section, s.key)]; set {
			from, v, ok = grafanaEnvKey(s.section, s.key)+" in the environment", ev, true
		}
		if !ok {
			out = append(out, fmt.Sprintf("[%s] %s is not set, so Grafana's default applies; want %s", s.section, s.key, s.want))
			continue
		}
		if got, isBool := iniBool(v); !isBool || got != want {
			out = append(out, fmt.Sprintf("[%s] %s is %q from %s; want %s", s.section, s.key, v, from, s.want))
		}
	}
	return out
}

// Grafana starts from the image and the grafana.ini compose mounts, with
// nothing fetched from the internet and no plugin of the image replaced.
func TestGrafanaStartsOfflineAsPinned(t *testing.T) {
	ss := stages(t)
	for _, vars := range variants {
		p := load(t, vars...)
		g := p.Services["grafana"]
		// What the image's Dockerfile stage sets, then compose over it.
		env := map[string]string{}
		if g.Build == nil {
			t.Fatalf("%q: grafana is not built here", vars)
		}
		stage, ok := ss[g.Build.Target]
		if !ok {
			t.Fatalf("%q: compose builds grafana from stage %q; the Dockerfile has none", vars, g.Build.Target)
		}
		for _, c := range stage.Commands {
			if e, ok := c.(*instructions.EnvCommand); ok {
				for _, kv := range e.Env {
					env[kv.Key] = kv.Value
				}
			}
		}
		for k, v := range g.Environment {
			env[k] = ""
			if v != nil {
				env[k] = *v
			}
		}
		// The grafana/grafana image reads its configuration there.
		config := "/etc/grafana/grafana.ini"
		if c, ok := env["GF_PATHS_CONFIG"]; ok {
			config = c
		}
		var source string
		for _, v := range g.Volumes {
			if v.Type == types.VolumeTypeBind && v.Target == config {
				source = v.Source
			}
		}
		if source == "" {
			t.Fatalf("%q: compose mounts no file at %s, where Grafana reads its configuration", vars, config)
		}
		ini, err := os.ReadFile(source)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range pinnedFaults(ini, env) {
			t.Errorf("%q: %s: %s", vars, source, f)
		}
	}
	// The check is live: a setting flipped, one dropped, one with a
	// trailing comment and one overridden from the environment are each
	// told.
	var good strings.Builder
	for _, s := range grafanaPinned {
		fmt.Fprintf(&good, "[%s]\n%s = %s\n", s.section, s.key, s.want)
	}
	if fs := pinnedFaults([]byte(good.String()), nil); len(fs) != 0 {
		t.Fatalf("the settings themselves: %q", fs)
	}
	for _, c := range []struct {
		name, line, with string
		env              map[string]string
		fault            string
	}{
		{"flipped", "preinstall_auto_update = false", "preinstall_auto_update = true", nil, "preinstall_auto_update"},
		{"dropped", "preinstall_disabled = true", "", nil, "preinstall_disabled"},
		{"commented", "check_for_updates = false", "check_for_updates = false # no", nil, "check_for_updates"},
		{"overridden", "", "", map[string]string{"GF_PLUGINS_PREINSTALL_DISABLED": "false"}, "GF_PLUGINS_PREINSTALL_DISABLED"},
	} {
		bad := strings.Replace(good.String(), c.line+"\n", c.with+"\n", 1)
		fs := pinnedFaults([]byte(bad), c.env)
		if len(fs) != 1 || !strings.Contains(fs[0], c.fault) {
			t.Errorf("%s: faults %q, want one naming %s", c.name, fs, c.fault)
		}
	}
}

// A page's pager_url annotation is the link Alertmanager's notification
// carries to the pager's web UI: on every rule set it must name the port
// compose publishes the pager on, the SLO the alert is about, and agree
// with the pager's own -external-url (compose leaves its default).
func TestPageLinksLeadToThePagersPublishedPort(t *testing.T) {
	p := load(t)
	var published string
	for _, port := range p.Services[lab.Pager].Ports {
		published = port.Published
	}
	if published == "" {
		t.Fatal("compose publishes no pager port")
	}
	want := "http://127.0.0.1:" + published
	external := ""
	if v := p.Services[lab.Pager].Environment["PAGER_EXTERNAL_URL"]; v != nil {
		external = *v
	} else {
		src, err := os.ReadFile(filepath.Join(root, "pager/cmd/pager/options.go"))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`fs\.StringVar\(&o\.externalURL, "external-url", "([^"]+)"`).FindSubmatch(src)
		if m == nil {
			t.Fatal("the pager has no -external-url flag with a default")
		}
		external = string(m[1])
	}
	if external != want {
		t.Errorf("the pager's external URL is %q; compose publishes it at %s", external, want)
	}
	for _, windows := range []string{"lab", "production"} {
		var rules struct {
			Groups []struct {
				Rules []struct {
					Alert       string
					Expr        string
					Labels      map[string]string
					Annotations map[string]string
				}
			}
		}
		decode(t, "prometheus/rules/slo-"+windows+".yml", yaml.Unmarshal, &rules)
		pages := 0
		for _, g := range rules.Groups {
			for _, r := range g.Rules {
				if r.Alert == "" || r.Labels["severity"] != "page" {
					continue
				}
				// The SLI no-data page is the service's, of no one SLO: the
				// pager's list, not an SLO's newest page, is where it goes.
				if r.Alert == nodata.AlertName {
					continue
				}
				pages++
				slo := regexp.MustCompile(`sloth_slo="([^"]+)"`).FindStringSubmatch(r.Expr)
				link := r.Annotations["pager_url"]
				if slo == nil || link != want+"/slo/"+slo[1] {
					t.Errorf("%s: page %s links %q; want %s/slo/<its SLO> (%v)", windows, r.Alert, link, want, slo)
				}
			}
		}
		if pages != len(scenario.SLOs) {
			t.Errorf("%s: %d page alerts, want one per SLO (%d)", windows, pages, len(scenario.SLOs))
		}
	}
}
