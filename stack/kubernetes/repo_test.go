package kubernetes

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"burnlab/shared/proc"
	"burnlab/stack/lab"
)

// What the manifests are held to: the rest of the repo, read here once.

const root = "../.."

// repo is everything outside deploy/kubernetes the checks compare with.
type repo struct {
	root    string
	compose composeFile
	prom    promConfig
	am      amConfig
	// flags maps each binary's service to its flags and the environment
	// variable each reads, from the binary's own -h.
	flags map[string]map[string]string
}

type composeService struct {
	Image       string
	Environment map[string]string
	Expose      []string
	Command     []string
	Healthcheck struct{ Test []string }
}

type composeFile struct{ Services map[string]composeService }

type promConfig struct {
	Global struct {
		ScrapeInterval string `json:"scrape_interval"`
		ScrapeTimeout  string `json:"scrape_timeout"`
	}
	ScrapeConfigs []struct {
		JobName       string                       `json:"job_name"`
		MetricsPath   string                       `json:"metrics_path"`
		StaticConfigs []struct{ Targets []string } `json:"static_configs"`
	} `json:"scrape_configs"`
}

type amRoute struct {
	Receiver       string
	GroupBy        []string `json:"group_by"`
	GroupWait      string   `json:"group_wait"`
	GroupInterval  string   `json:"group_interval"`
	RepeatInterval string   `json:"repeat_interval"`
	Matchers       []string
	Routes         []amRoute
}

type amConfig struct {
	Route        amRoute
	InhibitRules []struct {
		SourceMatchers []string `json:"source_matchers"`
		TargetMatchers []string `json:"target_matchers"`
		Equal          []string
	} `json:"inhibit_rules"`
	Receivers []struct {
		Name           string
		WebhookConfigs []struct {
			URL          string
			SendResolved bool `json:"send_resolved"`
			MaxAlerts    int  `json:"max_alerts"`
		} `json:"webhook_configs"`
	}
}

// binDir holds the binaries the tests build, for the package's run.
var binDir string

func TestMain(m *testing.M) {
	var err error
	if binDir, err = os.MkdirTemp("", "burnlab-k8s-bin"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(binDir)
	os.Exit(code)
}

var (
	repoOnce sync.Once
	repoVal  *repo
	repoErr  error
)

// loadRepo reads compose, Prometheus's and Alertmanager's configs, and
// builds the binaries to ask each for its flags.
func loadRepo(t *testing.T) *repo {
	t.Helper()
	repoOnce.Do(func() { repoVal, repoErr = readRepo(root) })
	if repoErr != nil {
		t.Fatal(repoErr)
	}
	return repoVal
}

func readRepo(root string) (*repo, error) {
	r := &repo{root: root}
	// The configs the lab and compose hand Prometheus and Alertmanager,
	// from their one table.
	files := map[string]any{"docker-compose.yml": &r.compose}
	for _, f := range lab.ConfigFiles("lab") {
		switch {
		case f.Service == lab.Prometheus && filepath.Base(f.Target) == "prometheus.yml":
			files[f.Source] = &r.prom
		case f.Service == lab.Alertmanager && filepath.Base(f.Target) == "alertmanager.yml":
			files[f.Source] = &r.am
		}
	}
	if len(files) != 3 {
		return nil, fmt.Errorf("lab.ConfigFiles has no prometheus.yml or alertmanager.yml: %v", lab.ConfigFiles("lab"))
	}
	for rel, v := range files {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return nil, err
		}
		if err := yaml.Unmarshal(b, v); err != nil {
			return nil, fmt.Errorf("%s: %w", rel, err)
		}
	}
	for name, s := range r.compose.Services {
		for k, v := range s.Environment {
			s.Environment[k] = interpolate(v)
		}
		s.Image = interpolate(s.Image)
		r.compose.Services[name] = s
	}
	flags, err := binaryFlags(root)
	if err != nil {
		return nil, err
	}
	r.flags = flags
	return r, nil
}

var composeVar = regexp.MustCompile(`\$\{[A-Z_]+:-([^}]*)\}`)

// interpolate gives compose's ${VAR:-default} its default, as compose does
// with the variable unset.
func interpolate(s string) string { return composeVar.ReplaceAllString(s, "$1") }

// binaryFlags builds each of the lab's binaries (lab.Binaries, the ones
// compose builds its images from) and reads its flags and their
// environment variables from its -h, which service.Usage prints as
// "  -name [$ENV]".
func binaryFlags(root string) (map[string]map[string]string, error) {
	dir := binDir
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out := map[string]map[string]string{}
	line := regexp.MustCompile(`(?m)^  -([a-z0-9-]+)(?: \[\$([A-Z0-9_]+)\])?$`)
	for _, b := range lab.Binaries() {
		bin := filepath.Join(dir, b.Service)
		// The services build in the workspace (go.work), not in this
		// module's GOWORK=off.
		build := proc.Build{Dir: root, Out: bin, Pkgs: []string{b.Package}, Env: []string{"GOWORK="}}
		if err := build.Run(ctx); err != nil {
			return nil, err
		}
		var help bytes.Buffer
		h := exec.CommandContext(ctx, bin, "-h")
		h.Stdout, h.Stderr = &help, &help
		h.Run() // -h exits 0 or 2 by flag package; the text is what counts
		flags := map[string]string{}
		for _, m := range line.FindAllStringSubmatch(help.String(), -1) {
			flags[m[1]] = m[2]
		}
		if len(flags) < 3 {
			return nil, fmt.Errorf("%s -h lists flags %v:\n%s", b.Service, flags, help.String())
		}
		out[b.Service] = flags
	}
	return out, nil
}

// labPorts are the contract's ports of each burnlab process, from the
// lab's one address table.
func labPorts() map[string][]int32 {
	a := lab.DefaultAddrs()
	port := func(addr string) int32 {
		_, p, _ := net.SplitHostPort(addr)
		var n int32
		fmt.Sscan(p, &n)
		return n
	}
	return map[string][]int32{
		lab.Gateway:  {port(a.GatewayAdmin), port(a.GatewayPublic)},
		lab.Upstream: {port(a.Upstream), port(a.UpstreamAdmin)},
		lab.Loadgen:  {port(a.LoadgenAdmin)},
		lab.Pager:    {port(a.Pager)},
	}
}

// hostPort splits a URL into host and port.
func hostPort(raw string) (string, string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Port() == "" {
		return "", "", fmt.Errorf("%q: want a URL with an explicit port", raw)
	}
	return u.Hostname(), u.Port(), nil
}
