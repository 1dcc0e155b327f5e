package standins

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// The staged context is the work tree's files as git sees them: tracked
// and new ones, not ignored ones, and not one removed since; vendor/ holds
// the workspace's modules, made again only when a go.mod changes.
func TestStageCopiesTheWorkTreeAndVendors(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	repo, dst := t.TempDir(), filepath.Join(t.TempDir(), "context")
	write := func(rel, content string, mode os.FileMode) {
		os.MkdirAll(filepath.Dir(filepath.Join(repo, rel)), 0o755)
		if err := os.WriteFile(filepath.Join(repo, rel), []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("go.work", "go 1.26\n\nuse ./m\n", 0o644)
	write("m/go.mod", "module example.com/m\n\ngo 1.26\n", 0o644)
	write("m/m.go", "package m\n", 0o644)
	write("run.sh", "#!/bin/sh\n", 0o755)
	write("gone.txt", "soon removed\n", 0o644)
	write(".gitignore", "/.offline/\n*.log\n", 0o644)
	git(t, repo, "init", "-q")
	git(t, repo, "add", ".")
	git(t, repo, "commit", "-qm", "init")
	write("new.txt", "not committed yet\n", 0o644)
	write("debug.log", "ignored\n", 0o644)
	write("m/m.go", "package m // edited\n", 0o644)
	m := Machine{Root: repo, Go: "go", GoVersion: "go-test"}
	ctx := context.Background()
	if err := stageContext(ctx, m, dst); err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]string{"new.txt": "not committed yet\n", "m/m.go": "package m // edited\n", "gone.txt": "soon removed\n", "vendor/modules.txt": "## workspace\n"} {
		if b, err := os.ReadFile(filepath.Join(dst, rel)); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", rel, b, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dst, "debug.log")); err == nil {
		t.Error("an ignored file was staged")
	}
	if fi, err := os.Stat(filepath.Join(dst, "run.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("run.sh: %v, %v", fi, err)
	}

	// Again, with a file gone and vendor/ marked: it is pruned, and vendor/
	// is not made again while no go.mod changed.
	os.Remove(filepath.Join(repo, "gone.txt"))
	os.WriteFile(filepath.Join(dst, "vendor", "marker"), nil, 0o644)
	if err := stageContext(ctx, m, dst); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dst, "gone.txt")); err == nil {
		t.Error("a removed file stayed in the staged context")
	}
	if _, err := os.Stat(filepath.Join(dst, "vendor", "marker")); err != nil {
		t.Error("vendor/ was made again with no go.mod changed")
	}
	write("m/go.mod", "module example.com/m\n\ngo 1.26.0\n", 0o644)
	if err := stageContext(ctx, m, dst); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dst, "vendor", "marker")); err == nil {
		t.Error("vendor/ was not made again after go.mod changed")
	}
}
