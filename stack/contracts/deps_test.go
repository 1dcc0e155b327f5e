// Package contracts holds the repo to the agreements between its parts:
// the dependency direction (services → shared; tools → services; stack →
// services and tools; nothing → stack), the SLO numbers that the Sloth
// spec and the code both state, and the Markdown's relative links, which
// must lead to files and headings that exist.
package contracts

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A module's kind follows from its path and whether it has code, so a
// module added tomorrow is held to the rules without editing this file:
//   - shared: burnlab/shared, which imports nothing of burnlab's;
//   - harness: burnlab/stack and the modules under it (the tests of the
//     whole stack), which may import anything but a pin;
//   - pin: a module with no Go code of its own, only a go.mod whose tool
//     lines pin a tool (tools/lint, prometheus/tools, …); it stays out of
//     go.work, where its dependencies would move the services' versions;
//   - tool: the project's own tools, burnlab/tools/… with code (the
//     benchmark, the backtest, the stand-ins), which may import shared, the
//     services (whose code they measure) and each other;
//   - service: every other module (the services, and the rule generators
//     whose output Prometheus runs), which may import only shared.
//
// Nothing but the harness imports the harness, and nothing imports a pin.
const (
	shared  = "shared"
	harness = "harness"
	pin     = "pin"
	tool    = "tool"
	service = "service"
)

func kind(path string, hasGo bool) string {
	switch {
	case path == "burnlab/shared":
		return shared
	case path == "burnlab/stack" || strings.HasPrefix(path, "burnlab/stack/"):
		return harness
	case !hasGo:
		return pin
	case strings.HasPrefix(path, "burnlab/tools/"):
		return tool
	}
	return service
}

// may says whether a module of kind from may import one of kind to.
func may(from, to string) bool {
	switch from {
	case service:
		return to == shared
	case tool:
		return to == shared || to == service || to == tool
	case harness:
		return to == shared || to == service || to == tool || to == harness
	}
	return false
}

// goJSON runs a go command that prints JSON in dir and decodes it.
func goJSON(t *testing.T, dir string, v any, args ...string) {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s in %s: %v", strings.Join(args, " "), dir, err)
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("go %s in %s: %v", strings.Join(args, " "), dir, err)
	}
}

// A module is one go.mod of the repository.
type module struct {
	dir, path   string
	inWorkspace bool
	hasGo       bool     // any .go file of its own
	requires    []string // its go.mod's requirements of burnlab's modules
	heavy       []string // its direct requirements of heavyModules
}

// heavyModules are the tools' own modules: a module that links one (the
// strategies backtest links Prometheus's engine; the compose check,
// compose-go and BuildKit; the Kubernetes check, kustomize; a pin, its
// tool) stays out of go.work, where their dependencies would move the
// services' versions.
var heavyModules = []string{
	"github.com/prometheus/prometheus", "github.com/prometheus/alertmanager", "github.com/slok/sloth",
	"github.com/docker/compose/v2", "github.com/compose-spec/compose-go/v2", "github.com/moby/buildkit",
	"sigs.k8s.io/kustomize/api", "github.com/golangci/golangci-lint/v2",
}

// repoModules finds every go.mod under root, outside hidden folders (the
// offline build context copies the tree), bin/ and testdata, and marks
// those go.work uses.
func repoModules(t *testing.T, root string) []module {
	t.Helper()
	var work struct{ Use []struct{ DiskPath string } }
	goJSON(t, root, &work, "work", "edit", "-json")
	used := map[string]bool{}
	for _, u := range work.Use {
		used[filepath.Clean(u.DiskPath)] = true
	}
	var mods []module
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && p != root && (strings.HasPrefix(name, ".") || name == "bin" || name == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || name != "go.mod" {
			return nil
		}
		dir := filepath.Dir(p)
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			return err
		}
		var mf struct {
			Module  struct{ Path string }
			Require []struct {
				Path     string
				Indirect bool
			}
		}
		goJSON(t, dir, &mf, "mod", "edit", "-json")
		m := module{dir: rel, path: mf.Module.Path, inWorkspace: used[rel]}
		for _, r := range mf.Require {
			if strings.HasPrefix(r.Path, "burnlab/") {
				m.requires = append(m.requires, r.Path)
			}
			if !r.Indirect && slices.Contains(heavyModules, r.Path) {
				m.heavy = append(m.heavy, r.Path)
			}
		}
		delete(used, rel)
		m.hasGo = hasGoBelow(dir)
		mods = append(mods, m)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir := range used {
		t.Errorf("go.work uses %s, which has no go.mod", dir)
	}
	return mods
}

// hasGoBelow says whether a module's folders hold a .go file, stopping at
// a nested module.
func hasGoBelow(dir string) bool {
	found := false
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil || found:
			return filepath.SkipAll
		case d.IsDir() && p != dir:
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil || strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
		case strings.HasSuffix(p, ".go"):
			found = true
		}
		return nil
	})
	return found
}

// TestDependenciesPointOneWay lists every module's packages and their
// dependencies (tests included) and holds each import of burnlab's own
// code to the module kinds' rules.
func TestDependenciesPointOneWay(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	mods := repoModules(t, root)
	if len(mods) < 10 {
		t.Fatalf("found %d modules under %s; go.work alone uses 10", len(mods), root)
	}
	kinds := map[string]string{}
	for _, m := range mods {
		kinds[m.path] = kind(m.path, m.hasGo)
		switch {
		case m.inWorkspace && len(m.heavy) > 0:
			t.Errorf("go.work uses %s, which requires %s: its dependencies would move the services' versions", m.dir, strings.Join(m.heavy, ", "))
		case m.inWorkspace && kinds[m.path] == pin:
			t.Errorf("go.work uses %s, which has no Go code of its own: a tool's pin, or a module not yet written", m.dir)
		}
	}
	// kindOf is a burnlab module's kind; one the repository does not hold
	// has none, and is never allowed.
	kindOf := func(path string) string {
		if k, ok := kinds[path]; ok {
			return k
		}
		return "not in the repository"
	}
	const rules = "services import only shared, tools shared, services and tools, the harness anything but a pin, shared and the pins nothing of burnlab's"
	for _, m := range mods {
		// The kind comes from the path, so the path must say where the
		// module is.
		if want := "burnlab/" + filepath.ToSlash(m.dir); m.path != want {
			t.Errorf("the module in %s is %s: want %s", m.dir, m.path, want)
			continue
		}
		for _, r := range m.requires {
			if !may(kindOf(m.path), kindOf(r)) {
				t.Errorf("%s (%s) requires %s (%s): %s", m.path, kindOf(m.path), r, kindOf(r), rules)
			}
		}
		if !m.hasGo {
			continue // a pin: its go.mod is all it has
		}
		// The e2e and load tests' files too; the gateway's fixed build
		// swaps one file for another of the same imports.
		cmd := exec.Command("go", "list", "-deps", "-test", "-tags", "e2e,load", "-f", "{{.ImportPath}} {{with .Module}}{{.Path}}{{end}}", "./...")
		cmd.Dir = filepath.Join(root, m.dir)
		if !m.inWorkspace {
			cmd.Env = append(os.Environ(), "GOWORK=off")
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("go list in %s: %v\n%s", m.dir, err, out)
			continue
		}
		var own int
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			pkg, mod, _ := strings.Cut(line, " ")
			if mod == m.path {
				own++
				continue
			}
			if strings.HasPrefix(mod, "burnlab/") && !may(kindOf(m.path), kindOf(mod)) {
				t.Errorf("%s (%s) imports %s (%s): %s", m.path, kindOf(m.path), pkg, kindOf(mod), rules)
			}
		}
		if own == 0 {
			t.Errorf("go list in %s found none of %s's own packages", m.dir, m.path)
		}
	}
}

// TestModuleKinds holds the kinds to the modules they were written for.
func TestModuleKinds(t *testing.T) {
	for _, c := range []struct {
		path  string
		hasGo bool
		want  string
	}{
		{"burnlab/shared", true, shared}, {"burnlab/gateway", true, service}, {"burnlab/grafana/plugin", true, service},
		{"burnlab/stack", true, harness}, {"burnlab/stack/compose", true, harness}, {"burnlab/stackish", true, service},
		{"burnlab/tools/lint", false, pin}, {"burnlab/prometheus/tools", false, pin},
		{"burnlab/tools/strategies", true, tool}, {"burnlab/toolsy", true, service},
		{"burnlab/prometheus/rulegen", true, service},
	} {
		if got := kind(c.path, c.hasGo); got != c.want {
			t.Errorf("kind(%s, %v) = %s, want %s", c.path, c.hasGo, got, c.want)
		}
	}
	for _, c := range []struct {
		from, to string
		ok       bool
	}{
		{service, shared, true}, {service, service, false}, {service, harness, false}, {service, tool, false},
		{tool, shared, true}, {tool, service, true}, {tool, tool, true}, {tool, harness, false}, {tool, pin, false},
		{harness, service, true}, {harness, harness, true}, {harness, tool, true}, {harness, pin, false},
		{shared, shared, false}, {pin, shared, false}, {"not in the repository", shared, false},
		{harness, "not in the repository", false},
	} {
		if got := may(c.from, c.to); got != c.ok {
			t.Errorf("may(%s, %s) = %v, want %v", c.from, c.to, got, c.ok)
		}
	}
}
