package standins

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const root = "../.."

func read(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseDockerfileFollowsStagesToTheirBases(t *testing.T) {
	df, err := parseDockerfile([]byte(`# syntax=ignored
ARG BASE=alpine:3 \
    OTHER="x:1"
ARG UNUSED
FROM --platform=$BUILDPLATFORM ${BASE} as Build
ARG LATE=not-global
RUN echo \
    FROM nothing
FROM $OTHER AS run
COPY --from=build /a /a
COPY --chown=1:1 --from=tools:1 /b /b
FROM run AS final
FROM scratch
`))
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"BASE": "alpine:3", "OTHER": "x:1", "UNUSED": ""}; len(df.globals) != len(want) || df.globals["BASE"] != want["BASE"] || df.globals["OTHER"] != want["OTHER"] {
		t.Errorf("globals %v, want %v", df.globals, want)
	}
	args, images, err := df.needs("final")
	if err != nil || !slices.Equal(args, []string{"BASE", "OTHER"}) || !slices.Equal(images, []string{"tools:1"}) {
		t.Errorf("final needs %v and %v (%v)", args, images, err)
	}
	if args, images, _ := df.needs("build"); !slices.Equal(args, []string{"BASE"}) || images != nil {
		t.Errorf("build needs %v and %v", args, images)
	}
	if _, images, _ := df.needs("3"); !slices.Equal(images, []string{"scratch"}) {
		t.Errorf("the unnamed stage needs %v", images)
	}
	if _, _, err := df.needs("missing"); err == nil {
		t.Error("a missing target was followed")
	}
	if _, err := parseDockerfile([]byte("FROM a b c d\n")); err == nil {
		t.Error("an unreadable FROM was read")
	}
}

// burnlab's targets need what the Dockerfile says: the Go and runtime
// images for the services, Go and Grafana for Grafana's image.
func TestTheRepoDockerfilesTargetsNeedTheirBases(t *testing.T) {
	df, err := parseDockerfile(read(t, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for target, want := range map[string][]string{
		"service": {"GO_IMAGE", "RUNTIME_IMAGE"},
		"grafana": {"GO_IMAGE", "GRAFANA_IMAGE"},
	} {
		if args, images, err := df.needs(target); err != nil || !slices.Equal(args, want) || images != nil {
			t.Errorf("%s needs %v and %v (%v); want %v", target, args, images, err, want)
		}
	}
}

func fakeBuilt() []Built {
	return []Built{
		{Name: "go", Ref: "burnlab-standin/golang:1-a", Arg: "GO_IMAGE"},
		{Name: "runtime", Ref: "burnlab-standin/static:nonroot-b", Arg: "RUNTIME_IMAGE"},
		{Name: "prometheus", Ref: "burnlab-standin/prometheus:v3.16.0-c", Pin: "prom/prometheus:v3.16.0"},
		{Name: "alertmanager", Ref: "burnlab-standin/alertmanager:v0.35.0-d", Pin: "prom/alertmanager:v0.35.0"},
	}
}

// On the repo's own files: every service that builds from the Dockerfile
// builds from the staged context on the stand-ins, Prometheus and
// Alertmanager run theirs, and Grafana alone is left out.
func TestOverrideCoversTheRepoStack(t *testing.T) {
	text, leftOut, err := Override(read(t, "docker-compose.yml"), read(t, "Dockerfile"), "/staged", fakeBuilt())
	if err != nil {
		t.Fatal(err)
	}
	var o overrideFile
	if err := yaml.Unmarshal(text, &o); err != nil {
		t.Fatal(err)
	}
	if len(leftOut) != 1 || !strings.Contains(leftOut["grafana"], "GRAFANA_IMAGE=grafana/grafana:") {
		t.Errorf("left out %v; want grafana alone, for its image", leftOut)
	}
	if g := o.Services["grafana"]; !slices.Equal(g.Profiles, []string{leftOutProfile}) || g.Build != nil {
		t.Errorf("grafana: %+v", g)
	}
	for _, name := range []string{"upstream", "gateway", "loadgen", "pager"} {
		b := o.Services[name].Build
		if b == nil || b.Context != "/staged" || b.Args["GO_IMAGE"] != "burnlab-standin/golang:1-a" || b.Args["RUNTIME_IMAGE"] != "burnlab-standin/static:nonroot-b" || len(b.Args) != 2 {
			t.Errorf("%s: build %+v", name, b)
		}
	}
	if o.Services["prometheus"].Image != "burnlab-standin/prometheus:v3.16.0-c" || o.Services["alertmanager"].Image != "burnlab-standin/alertmanager:v0.35.0-d" {
		t.Errorf("prometheus %+v, alertmanager %+v", o.Services["prometheus"], o.Services["alertmanager"])
	}
	if !strings.Contains(string(text), "# Left out (profile needs-registry): grafana,") {
		t.Errorf("the override does not say what it leaves out:\n%s", text)
	}
	// A pin with no stand-in (a Prometheus version moved on in the compose
	// file, say) leaves its service out rather than run something else.
	moved := strings.Replace(string(read(t, "docker-compose.yml")), "prom/prometheus:v3.16.0", "prom/prometheus:v3.17.0", 1)
	if _, leftOut, err := Override([]byte(moved), read(t, "Dockerfile"), "/staged", fakeBuilt()); err != nil || !strings.Contains(leftOut["prometheus"], "prom/prometheus:v3.17.0") {
		t.Errorf("a moved pin: left out %v (%v)", leftOut, err)
	}
}
