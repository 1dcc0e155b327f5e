// Package contracts holds the repo to the agreements between its parts:
// the dependency direction (services → shared; stack → services; nothing →
// stack), the SLO numbers that the Sloth spec and the code both state, and
// the Markdown's relative links, which must lead to files and headings that
// exist.
package contracts

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A module's kind follows from its path, so a module added tomorrow is
// held to the rules without editing this file:
//   - shared: burnlab/shared, which imports nothing of burnlab's;
//   - harness: burnlab/stack and the modules under it, which may import
//     anything but the tool pins;
//   - tool: a pinned tool's module (burnlab/tools/…, burnlab/prometheus/tools),
//     which imports nothing of burnlab's and stays out of go.work, where its
//     dependencies would move the services' versions;
//   - service: every other module, which may import only shared.
const (
	shared  = "shared"
	harness = "harness"
	tool    = "tool"
	service = "service"
)

func kind(path string) string {
	switch {
	case path == "burnlab/shared":
		return shared
	case path == "burnlab/stack" || strings.HasPrefix(path, "burnlab/stack/"):
		return harness
	case strings.HasPrefix(path, "burnlab/tools/") || path == "burnlab/prometheus/tools":
		return tool
	}
	return service
}

// may says whether a module of kind from may import one of kind to.
func may(from, to string) bool {
	switch from {
	case service:
		return to == shared
	case harness:
		return to != tool
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
			Require []struct{ Path string }
		}
		goJSON(t, dir, &mf, "mod", "edit", "-json")
		m := module{dir: rel, path: mf.Module.Path, inWorkspace: used[rel]}
		for _, r := range mf.Require {
			if strings.HasPrefix(r.Path, "burnlab/") {
				m.requires = append(m.requires, r.Path)
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
	if len(mods) < 7 {
		t.Fatalf("found %d modules under %s; go.work alone uses 7", len(mods), root)
	}
	for _, m := range mods {
		if m.inWorkspace && kind(m.path) == tool {
			t.Fatalf("go.work uses %s, a tool's pin: its dependencies would move the services' versions", m.dir)
		}
	}
	const rules = "services import only shared, the harness anything but a tool's pin, shared and the pins nothing of burnlab's"
	for _, m := range mods {
		// The kind comes from the path, so the path must say where the
		// module is.
		if want := "burnlab/" + filepath.ToSlash(m.dir); m.path != want {
			t.Errorf("the module in %s is %s: want %s", m.dir, m.path, want)
			continue
		}
		for _, r := range m.requires {
			if !may(kind(m.path), kind(r)) {
				t.Errorf("%s (%s) requires %s (%s): %s", m.path, kind(m.path), r, kind(r), rules)
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
			if strings.HasPrefix(mod, "burnlab/") && !may(kind(m.path), kind(mod)) {
				t.Errorf("%s (%s) imports %s (%s): %s", m.path, kind(m.path), pkg, kind(mod), rules)
			}
		}
		if own == 0 {
			t.Errorf("go list in %s found none of %s's own packages", m.dir, m.path)
		}
	}
}

// TestModuleKinds holds the kinds to the modules they were written for.
func TestModuleKinds(t *testing.T) {
	for path, want := range map[string]string{
		"burnlab/shared": shared, "burnlab/gateway": service, "burnlab/grafana/plugin": service,
		"burnlab/stack": harness, "burnlab/stack/strategies": harness, "burnlab/stackish": service,
		"burnlab/tools/lint": tool, "burnlab/prometheus/tools": tool, "burnlab/prometheus/rulegen": service,
	} {
		if got := kind(path); got != want {
			t.Errorf("kind(%s) = %s, want %s", path, got, want)
		}
	}
	for _, c := range []struct {
		from, to string
		ok       bool
	}{
		{service, shared, true}, {service, service, false}, {service, harness, false},
		{harness, service, true}, {harness, harness, true}, {harness, tool, false},
		{shared, shared, false}, {tool, shared, false},
	} {
		if got := may(c.from, c.to); got != c.ok {
			t.Errorf("may(%s, %s) = %v, want %v", c.from, c.to, got, c.ok)
		}
	}
}
