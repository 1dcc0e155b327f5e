package compose

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"

	"burnlab/stack/lab"
	"burnlab/tools/standins"
)

// The stand-ins' override (make up-offline), read by compose's own loader
// over docker-compose.yml: burnlab's images build from the staged context on
// the stand-in bases and keep everything else the file says, Prometheus and
// Alertmanager run their stand-ins, and Grafana — which has none — is not
// started.
func TestStandinOverrideRunsTheStackWithoutGrafana(t *testing.T) {
	read := func(f string) []byte {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	staged := t.TempDir()
	built := []standins.Built{
		{Name: "go", Ref: "burnlab-standin/golang:1.26.8-0", Arg: "GO_IMAGE"},
		{Name: "runtime", Ref: "burnlab-standin/static:nonroot-0", Arg: "RUNTIME_IMAGE"},
		{Name: "prometheus", Ref: "burnlab-standin/prometheus:v3.16.0-0", Pin: "prom/prometheus:v3.16.0"},
		{Name: "alertmanager", Ref: "burnlab-standin/alertmanager:v0.35.0-0", Pin: "prom/alertmanager:v0.35.0"},
	}
	text, leftOut, err := standins.Override(read("docker-compose.yml"), read("Dockerfile"), staged, built)
	if err != nil {
		t.Fatal(err)
	}
	override := filepath.Join(t.TempDir(), "compose.yml")
	os.WriteFile(override, text, 0o644)
	for _, vars := range variants {
		base := load(t, vars...)
		p, err := LoadWith(context.Background(), root, []string{override}, vars...)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{lab.Alertmanager, lab.Alertmanager2, lab.Gateway, lab.Loadgen, lab.Pager, lab.Prometheus, lab.Upstream}
		if got := slices.Sorted(slices.Values(p.ServiceNames())); !slices.Equal(got, want) {
			t.Fatalf("%q: services %v, want %v (Grafana left out: %v)", vars, got, want, leftOut)
		}
		if _, ok := p.DisabledServices["grafana"]; !ok || len(leftOut) != 1 {
			t.Errorf("%q: grafana is not disabled by a profile (left out %v)", vars, leftOut)
		}
		for name, s := range p.Services {
			b := base.Services[name]
			if s.Build == nil {
				if want := map[string]string{lab.Prometheus: built[2].Ref, lab.Alertmanager: built[3].Ref, lab.Alertmanager2: built[3].Ref}[name]; s.Image != want {
					t.Errorf("%q: %s runs %s, want %s", vars, name, s.Image, want)
				}
				continue
			}
			if s.Build.Context != staged || arg(s.Build, "GO_IMAGE") != built[0].Ref || arg(s.Build, "RUNTIME_IMAGE") != built[1].Ref {
				t.Errorf("%q: %s builds %s with %v", vars, name, s.Build.Context, s.Build.Args)
			}
			// Only the context and the bases change: the same target,
			// package, variant and version, under the same image name.
			for _, a := range []string{"CMD_PKG", "VARIANT", "VERSION"} {
				if arg(s.Build, a) != arg(b.Build, a) {
					t.Errorf("%q: %s: %s=%q under the override, %q without", vars, name, a, arg(s.Build, a), arg(b.Build, a))
				}
			}
			if s.Build.Target != b.Build.Target || s.Image != b.Image || s.PullPolicy != b.PullPolicy {
				t.Errorf("%q: %s: target %s image %s under the override", vars, name, s.Build.Target, s.Image)
			}
		}
	}
}

// The stand-ins' staging folder never enters a user's build context:
// .dockerignore leaves it out, so a plain `docker compose up --build`
// sends and builds what it did before make up-offline.
func TestStagingStaysOutOfTheBuildContext(t *testing.T) {
	f, err := os.Open(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	if ignored, err := pm.MatchesOrParentMatches(".offline/context/go.work"); err != nil || !ignored {
		t.Errorf(".offline/ is in the build context (%v)", err)
	}
}
