package standins

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// stageContext makes dst the build context the override passes: the repo's files
// — those git tracks and the new ones it does not ignore, as they are in
// the work tree — and vendor/, every module the workspace builds with, so
// that `go build` in a build container needs no module proxy. A file is
// written only when its content or mode changed, and one the repo no
// longer has is removed, so the engine sees what changed and no more.
// .dockerignore still filters the copy, as it filters the repo.
func stageContext(ctx context.Context, m Machine, dst string) error {
	list, err := output(ctx, m.Root, nil, "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	if err != nil {
		return fmt.Errorf("standins: staging needs a git checkout: %w", err)
	}
	// Both ends are os.Roots: a symlink the repo holds is copied as a
	// symlink, and no path, however named, reads or writes outside them.
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("standins: %w", err)
	}
	from, err := os.OpenRoot(m.Root)
	if err != nil {
		return fmt.Errorf("standins: %w", err)
	}
	defer from.Close()
	to, err := os.OpenRoot(dst)
	if err != nil {
		return fmt.Errorf("standins: %w", err)
	}
	defer to.Close()
	keep := map[string]bool{}
	for _, rel := range strings.Split(strings.TrimRight(string(list), "\x00"), "\x00") {
		if rel == "" || rel == "vendor" || strings.HasPrefix(rel, "vendor/") {
			continue
		}
		copied, err := syncFile(from, to, rel)
		if err != nil {
			return fmt.Errorf("standins: staging %s: %w", rel, err)
		}
		if copied {
			keep[rel] = true
		}
	}
	if err := prune(to, keep); err != nil {
		return err
	}
	return vendor(ctx, m, dst, keep)
}

// syncFile makes rel in to a copy of rel in from: a regular file with the
// same content and executable bit, or the same symlink. A file that is
// gone (deleted, not yet committed) is not copied.
func syncFile(from, to *os.Root, rel string) (bool, error) {
	info, err := from.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := to.MkdirAll(path.Dir(rel), 0o755); err != nil {
		return false, err
	}
	if info.Mode()&fs.ModeSymlink != 0 {
		target, err := from.Readlink(rel)
		if err != nil {
			return false, err
		}
		if have, err := to.Readlink(rel); err == nil && have == target {
			return true, nil
		}
		if err := removeInTheWay(to, rel); err != nil {
			return false, err
		}
		return true, to.Symlink(target, rel)
	}
	if !info.Mode().IsRegular() {
		return false, nil
	}
	mode := fs.FileMode(0o644)
	if info.Mode()&0o111 != 0 {
		mode = 0o755
	}
	want, err := from.ReadFile(rel)
	if err != nil {
		return false, err
	}
	if have, err := to.ReadFile(rel); err == nil && bytes.Equal(have, want) {
		if di, err := to.Lstat(rel); err == nil && di.Mode() == mode {
			return true, nil
		}
	}
	if err := removeInTheWay(to, rel); err != nil {
		return false, err
	}
	if err := to.WriteFile(rel, want, mode); err != nil {
		return false, err
	}
	return true, to.Chmod(rel, mode)
}

// prune removes from to what keep does not hold, vendor/ aside, and the
// folders left empty.
func prune(to *os.Root, keep map[string]bool) error {
	var dirs []string
	err := fs.WalkDir(to.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case rel == ".":
			return nil
		case rel == "vendor":
			return fs.SkipDir
		case d.IsDir():
			dirs = append(dirs, rel)
			return nil
		case !keep[rel]:
			return to.Remove(rel)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("standins: %w", err)
	}
	slices.Reverse(dirs)
	for _, d := range dirs {
		if entries, err := fs.ReadDir(to.FS(), d); err == nil && len(entries) == 0 {
			if err := to.Remove(d); err != nil {
				return fmt.Errorf("standins: %w", err)
			}
		}
	}
	return nil
}

// removeInTheWay removes what is at rel (a stale file, a symlink where a
// file goes, a read-only copy), if anything.
func removeInTheWay(to *os.Root, rel string) error {
	if err := to.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// vendor runs `go work vendor` in the staged copy when the workspace's
// go.work, go.mod and go.sum files changed since it last ran there (their
// hash is kept beside the context, out of it).
func vendor(ctx context.Context, m Machine, dst string, files map[string]bool) error {
	h := sha256.New()
	fmt.Fprintln(h, m.GoVersion)
	for _, rel := range slices.Sorted(maps.Keys(files)) {
		switch path.Base(rel) {
		case "go.work", "go.work.sum", "go.mod", "go.sum":
			f, err := os.Open(filepath.Join(dst, rel))
			if err != nil {
				return fmt.Errorf("standins: %w", err)
			}
			fmt.Fprintf(h, "%s\n", rel)
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return fmt.Errorf("standins: %w", err)
			}
		}
	}
	sum := fmt.Sprintf("%x\n", h.Sum(nil))
	stamp := filepath.Clean(dst) + ".vendored"
	if have, err := os.ReadFile(stamp); err == nil && string(have) == sum {
		if _, err := os.Stat(filepath.Join(dst, "vendor", "modules.txt")); err == nil {
			return nil
		}
	}
	abs, err := filepath.Abs(dst)
	if err != nil {
		return fmt.Errorf("standins: %w", err)
	}
	env := append(os.Environ(), "GOWORK="+filepath.Join(abs, "go.work"), "GOFLAGS=")
	if _, err := output(ctx, dst, env, m.Go, "work", "vendor"); err != nil {
		return err
	}
	if err := os.WriteFile(stamp, []byte(sum), 0o644); err != nil {
		return fmt.Errorf("standins: %w", err)
	}
	return nil
}
