package compose

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"

	"burnlab/shared/variant"
	"burnlab/stack/lab"
)

// dockerfile parses the repo's Dockerfile into its stages by name, each
// stage's base as written (before any ARG is expanded), and its global ARGs:
// those declared before the first FROM, with their defaults.
func dockerfile(t *testing.T) (stages map[string]instructions.Stage, globals map[string]string) {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ast, err := parser.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	ss, metaArgs, err := instructions.Parse(ast.AST, nil)
	if err != nil {
		t.Fatal(err)
	}
	globals = map[string]string{}
	for _, a := range metaArgs {
		for _, kv := range a.Args {
			globals[kv.Key] = ""
			if kv.Value != nil {
				globals[kv.Key] = *kv.Value
			}
		}
	}
	stages = map[string]instructions.Stage{}
	for _, s := range ss {
		stages[s.Name] = s
	}
	return stages, globals
}

// stages returns the Dockerfile's stages by name, each base expanded as a
// build with no --build-arg expands it: a global ARG becomes its default.
func stages(t *testing.T) map[string]instructions.Stage {
	t.Helper()
	ss, globals := dockerfile(t)
	lex := shell.NewLex('\\')
	for name, s := range ss {
		base, _, err := lex.ProcessWord(s.BaseName, defaults(globals))
		if err != nil {
			t.Fatalf("stage %s: FROM %s: %v", name, s.BaseName, err)
		}
		s.BaseName = base
		ss[name] = s
	}
	return ss
}

// defaults is the environment a FROM line expands in when no build
// argument is passed.
type defaults map[string]string

func (d defaults) Get(k string) (string, bool) { v, ok := d[k]; return v, ok }
func (d defaults) Keys() []string              { return slices.Sorted(maps.Keys(d)) }

func TestDockerfilePassesBuildkitsChecks(t *testing.T) {
	ws, err := Lint(context.Background(), filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		t.Errorf("%s (line %d): %s — %s", w.RuleName, w.Location.Ranges[0].Start.Line, w.Detail, w.URL)
	}
	// The checks are live offline: a Dockerfile breaking rules is told so.
	bad := filepath.Join(t.TempDir(), "Dockerfile")
	os.WriteFile(bad, []byte("FROM golang:1.26.8 as Build\nENV A 1\nCMD go version\n"), 0o644)
	ws, err = Lint(context.Background(), bad)
	var rules []string
	for _, w := range ws {
		rules = append(rules, w.RuleName)
	}
	for _, want := range []string{"StageNameCasing", "LegacyKeyValueFormat", "JSONArgsRecommended"} {
		if err != nil || !slices.Contains(rules, want) {
			t.Errorf("a bad Dockerfile: rules %v (%v), want %s among them", rules, err, want)
		}
	}
	if _, err := Lint(context.Background(), filepath.Join(t.TempDir(), "none")); err == nil {
		t.Fatal("a missing Dockerfile linted")
	}
}

var goDirective = regexp.MustCompile(`(?m)^go (\d+\.\d+(?:\.\d+)?)$`)

// The Dockerfile needs no frontend image: a `# syntax` line makes BuildKit
// fetch one from a registry, and an engine with none fails there.
func TestDockerfileNeedsNoFrontendImage(t *testing.T) {
	dt, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if ref, _, _, ok := parser.DetectSyntax(dt); ok {
		t.Errorf("the Dockerfile asks for frontend %s; the engine's built-in one must do", ref)
	}
}

// Every base image is a global ARG (declared before the first FROM) whose
// default is the pin, and compose passes none of them: a user's build gets
// exactly the pinned images, and an engine with no registry passes its
// stand-ins (make up-offline). Each global ARG names a base, so none is
// left over from a base that went away.
func TestEveryBaseIsAGlobalArgDefaultingToItsPin(t *testing.T) {
	ss, globals := dockerfile(t)
	argRef := regexp.MustCompile(`^\$\{([A-Z][A-Z0-9_]*)\}$`)
	used := map[string]bool{}
	for name, s := range ss {
		if _, internal := ss[s.BaseName]; internal {
			continue
		}
		m := argRef.FindStringSubmatch(s.BaseName)
		if m == nil {
			t.Errorf("stage %s: FROM %s; want FROM ${SOME_IMAGE}, a global ARG defaulting to the pin", name, s.BaseName)
			continue
		}
		if def, ok := globals[m[1]]; !ok || def == "" {
			t.Errorf("stage %s: FROM %s; want a global ARG %s with the pinned image as its default (have %q, declared %v)", name, s.BaseName, m[1], def, ok)
		}
		used[m[1]] = true
	}
	for a := range globals {
		if !used[a] {
			t.Errorf("global ARG %s is no stage's base", a)
		}
	}
	for _, vars := range variants {
		for name, s := range load(t, vars...).Services {
			for a := range globals {
				if s.Build != nil && s.Build.Args[a] != nil {
					t.Errorf("%q: %s passes %s=%s; compose must build on the pins", vars, name, a, *s.Build.Args[a])
				}
			}
		}
	}
}

// Bases are pinned: golang and Grafana to exact versions, distroless (which
// has no version tags) to a digest. The Go image is at least as new as
// every module asks.
func TestDockerfileBasesArePinned(t *testing.T) {
	ss := stages(t)
	var goVersion string
	for name, s := range ss {
		if _, internal := ss[s.BaseName]; internal {
			continue
		}
		switch repo, tag, _ := strings.Cut(s.BaseName, ":"); repo {
		case "golang":
			goVersion = tag
			if !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(tag) {
				t.Errorf("stage %s: %s is not an exact Go version", name, s.BaseName)
			}
		case "gcr.io/distroless/static-debian12":
			if !regexp.MustCompile(`^nonroot@sha256:[0-9a-f]{64}$`).MatchString(tag) {
				t.Errorf("stage %s: %s is not the nonroot variant pinned by digest", name, s.BaseName)
			}
		case "grafana/grafana":
			if !exactVersion.MatchString(s.BaseName) {
				t.Errorf("stage %s: %s is not an exact Grafana version", name, s.BaseName)
			}
		default:
			t.Errorf("stage %s: unexpected base %s", name, s.BaseName)
		}
	}
	mods, _ := filepath.Glob(filepath.Join(root, "*", "go.mod"))
	more, _ := filepath.Glob(filepath.Join(root, "*", "*", "go.mod"))
	for _, m := range append(append(mods, more...), filepath.Join(root, "go.work")) {
		b, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		if v := goDirective.FindSubmatch(b); v != nil && versionLess(goVersion, string(v[1])) {
			t.Errorf("%s wants go %s; the image has %s", m, v[1], goVersion)
		}
	}
}

func versionLess(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(pa), len(pb)) {
		x, y := 0, 0
		if i < len(pa) {
			x = atoi(pa[i])
		}
		if i < len(pb) {
			y = atoi(pb[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

func TestComposeBuildsStagesThatExist(t *testing.T) {
	ss := stages(t)
	for name, s := range load(t).Services {
		if s.Build != nil {
			if _, ok := ss[s.Build.Target]; !ok || s.Build.Dockerfile != "Dockerfile" {
				t.Errorf("%s: builds target %q of %s", name, s.Build.Target, s.Build.Dockerfile)
			}
		}
	}
	for name, want := range map[string]string{"service": "65532:65532", "grafana": ""} {
		if got := user(ss[name]); got != want {
			t.Errorf("stage %s runs as %q, want %q (distroless's nonroot; Grafana's image has its own)", name, got, want)
		}
	}
}

func user(s instructions.Stage) string {
	u := ""
	for _, c := range s.Commands {
		if uc, ok := c.(*instructions.UserCommand); ok {
			u = uc.User
		}
	}
	return u
}

// goRun runs a stage's RUN scripts with a stand-in `go` that records its
// arguments, and /out/ moved into a temporary directory: what `docker
// build` would run, without Docker.
func goRun(t *testing.T, s instructions.Stage, env ...string) (calls [][]string, out string, err error) {
	t.Helper()
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "bin")
	os.Mkdir(bin, 0o755)
	log := filepath.Join(tmp, "go.log")
	os.WriteFile(filepath.Join(bin, "go"), []byte("#!/bin/sh\nfor a in \"$@\"; do printf '%s\\t' \"$a\"; done >> "+log+"\necho >> "+log+"\n"), 0o755)
	var script []string
	for _, c := range s.Commands {
		if r, ok := c.(*instructions.RunCommand); ok {
			script = append(script, strings.ReplaceAll(strings.Join(r.CmdLine, " "), "/out/", tmp+"/out/"))
		}
	}
	if len(script) == 0 {
		t.Fatalf("stage %s runs nothing", s.Name)
	}
	cmd := exec.Command("sh", "-ec", strings.Join(script, "\n"))
	cmd.Env = append([]string{"PATH=" + bin + ":/usr/bin:/bin"}, env...)
	b, err := cmd.CombinedOutput()
	logged, _ := os.ReadFile(log)
	for _, line := range strings.Split(strings.TrimSpace(string(logged)), "\n") {
		if line != "" {
			calls = append(calls, strings.Split(strings.TrimSuffix(line, "\t"), "\t"))
		}
	}
	return calls, string(b), err
}

// flag returns the value after name in a go command line.
func flag(args []string, name string) (string, bool) {
	i := slices.Index(args, name)
	if i < 0 || i+1 >= len(args) {
		return "", false
	}
	return args[i+1], true
}

// The image's build is the lab's build: every binary -trimpath, the
// package as the last argument, the gateway's tags from the same variant.
func TestServiceStageBuildsAsTheLabDoes(t *testing.T) {
	ss := stages(t)
	for _, b := range lab.Binaries() {
		variants := []variant.Variant{variant.Baseline}
		if b.Service == lab.Gateway {
			variants = variant.All()
		}
		for _, v := range variants {
			calls, out, err := goRun(t, ss["service-build"], "CMD_PKG="+b.Package, "VARIANT="+string(v), "VERSION=test")
			if err != nil || len(calls) != 1 {
				t.Fatalf("%s %s: %v, go called %q\n%s", b.Service, v, err, calls, out)
			}
			args := calls[0]
			tags, ok := flag(args, "-tags")
			if args[0] != "build" || !slices.Contains(args, "-trimpath") || args[len(args)-1] != b.Package || !ok || tags != v.Tags() {
				t.Errorf("%s %s: go %q; want build -trimpath -tags %q … %s", b.Service, v, args, v.Tags(), b.Package)
			}
			if ld, _ := flag(args, "-ldflags"); ld != "-X main.version=test" {
				t.Errorf("%s: -ldflags %q", b.Service, ld)
			}
		}
	}
	for _, bad := range [][]string{
		{"CMD_PKG=./gateway/cmd/gateway", "VARIANT=faster"},
		{"VARIANT=baseline"},
	} {
		calls, out, err := goRun(t, ss["service-build"], bad...)
		if err == nil || len(calls) != 0 || !strings.Contains(out, "want baseline or fixed") && !strings.Contains(out, "CMD_PKG is required") {
			t.Errorf("%q: built anyway (%v, %q): %s", bad, err, calls, out)
		}
	}
}

func TestBuildStagesShareTheStaticToolchain(t *testing.T) {
	ss := stages(t)
	env := map[string]string{}
	for _, c := range ss["build"].Commands {
		if e, ok := c.(*instructions.EnvCommand); ok {
			for _, kv := range e.Env {
				env[kv.Key] = kv.Value
			}
		}
	}
	if env["CGO_ENABLED"] != "0" {
		t.Errorf("build stage env %v: want CGO_ENABLED=0 for static binaries on distroless", env)
	}
	calls, out, err := goRun(t, ss["build"])
	if err != nil || len(calls) != 1 || calls[0][len(calls[0])-1] != "./shared/cmd/healthcheck" {
		t.Fatalf("build stage: %v, go %q\n%s", err, calls, out)
	}
	var plugin struct{ ID, Executable string }
	decode(t, "grafana/plugin/dist/plugin.json", json.Unmarshal, &plugin)
	calls, out, err = goRun(t, ss["plugin-build"], "GOOS=linux", "GOARCH=arm64")
	if err != nil || len(calls) != 1 {
		t.Fatalf("plugin stage: %v, go %q\n%s", err, calls, out)
	}
	o, _ := flag(calls[0], "-o")
	if filepath.Base(o) != plugin.Executable+"_linux_arm64" || calls[0][len(calls[0])-1] != "./grafana/plugin/cmd/pager-datasource" {
		t.Errorf("plugin stage: go %q; Grafana runs %s_<os>_<arch>", calls[0], plugin.Executable)
	}
	// Grafana finds it under its plugins path, in a folder of its id.
	var pluginsPath string
	var dests []string
	for _, c := range ss["grafana"].Commands {
		switch c := c.(type) {
		case *instructions.EnvCommand:
			for _, kv := range c.Env {
				if kv.Key == "GF_PATHS_PLUGINS" {
					pluginsPath = kv.Value
				}
			}
		case *instructions.CopyCommand:
			dests = append(dests, c.DestPath)
		}
	}
	for _, d := range dests {
		if pluginsPath == "" || strings.TrimSuffix(d, "/") != pluginsPath+"/"+plugin.ID {
			t.Errorf("grafana stage copies to %s; plugins path %q, plugin %s", d, pluginsPath, plugin.ID)
		}
	}
	if len(dests) != 2 {
		t.Errorf("grafana stage copies %v; want plugin.json with module.js, and the binary", dests)
	}
}
