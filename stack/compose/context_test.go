package compose

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"

	"burnlab/shared/proc"
	"burnlab/shared/variant"
	"burnlab/stack/lab"
)

// buildContext copies the repo as `docker build` sends it: without what
// .dockerignore names.
func buildContext(t *testing.T) string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	patterns, err := ignorefile.ReadAll(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if rel == "." {
			return nil
		}
		if ignored, err := pm.MatchesOrParentMatches(filepath.ToSlash(rel)); err != nil || ignored {
			if d.IsDir() && err == nil {
				return filepath.SkipDir
			}
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// The build context holds all the images need: every package the
// Dockerfile and compose build compiles, static, from the filtered copy
// alone — a .dockerignore that drops a needed file fails here, not on a
// user's first `docker compose up`.
func TestBuildContextBuildsEveryImage(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles every image's binaries")
	}
	ctx := buildContext(t)
	for _, f := range []string{"go.work", "grafana/plugin/dist/plugin.json", "grafana/plugin/dist/module.js"} {
		if _, err := os.Stat(filepath.Join(ctx, f)); err != nil {
			t.Errorf("the build context lacks %s", f)
		}
	}
	for _, f := range []string{".env", "docker-compose.yml", ".git"} {
		if _, err := os.Stat(filepath.Join(ctx, f)); err == nil {
			t.Errorf("the build context holds %s: editing it would rebuild every image", f)
		}
	}
	pkgs := []string{"./shared/cmd/healthcheck", "./grafana/plugin/cmd/pager-datasource"}
	for _, b := range lab.Binaries() {
		pkgs = append(pkgs, b.Package)
	}
	for _, v := range variant.All() {
		tags := v.Tags()
		// The image's toolchain settings; GOWORK empty finds the context's
		// go.work, as in the image (this test itself runs with GOWORK=off).
		build := proc.Build{Dir: ctx, Out: t.TempDir() + "/", Pkgs: pkgs, Tags: tags, Env: []string{"CGO_ENABLED=0", "GOWORK=", "GOFLAGS="}}
		if err := build.Run(context.Background()); err != nil {
			t.Fatalf("tags %q: %v", tags, err)
		}
	}
}
