// Package contracts holds the repo to the agreements between its parts:
// the dependency direction (services → shared; stack → services; nothing →
// stack), the SLO numbers that the Sloth spec and the code both state, and
// the Markdown's relative links, which must lead to files and headings that
// exist.
package contracts

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// modules are the repo's Go modules in go.work, by folder, with what each
// may import of burnlab's own code besides itself.
var modules = []struct {
	dir, path string
	may       []string
}{
	{"shared", "burnlab/shared", nil},
	{"gateway", "burnlab/gateway", []string{"burnlab/shared"}},
	{"loadgen", "burnlab/loadgen", []string{"burnlab/shared"}},
	{"pager", "burnlab/pager", []string{"burnlab/shared"}},
	{"grafana", "burnlab/grafana", []string{"burnlab/shared"}},
	{"grafana/plugin", "burnlab/grafana/plugin", []string{"burnlab/shared"}},
	{"stack", "burnlab/stack", []string{"burnlab/shared", "burnlab/gateway", "burnlab/loadgen", "burnlab/pager", "burnlab/grafana"}},
}

func TestDependenciesPointOneWay(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range modules {
		cmd := exec.Command("go", "list", "-deps", "-test", "-f", "{{.ImportPath}} {{with .Module}}{{.Path}}{{end}}", "./...")
		cmd.Dir = filepath.Join(root, m.dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go list in %s: %v\n%s", m.dir, err, out)
		}
		var own int
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			pkg, mod, _ := strings.Cut(line, " ")
			if !strings.HasPrefix(mod, "burnlab/") {
				continue
			}
			if mod == m.path {
				own++
				continue
			}
			if !slices.Contains(m.may, mod) {
				t.Errorf("%s imports %s: want only %v besides itself (services → shared; stack → services; nothing → stack)", m.path, pkg, m.may)
			}
		}
		if own == 0 {
			t.Errorf("go list in %s found none of %s's own packages", m.dir, m.path)
		}
	}
}
