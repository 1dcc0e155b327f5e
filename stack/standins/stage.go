package standins

import (
	"bytes"
	"context"
	"crypto/sha256"
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
	keep := map[string]bool{}
	for _, rel := range strings.Split(strings.TrimRight(string(list), "\x00"), "\x00") {
		if rel == "" || rel == "vendor" || strings.HasPrefix(rel, "vendor/") {
			continue
		}
		copied, err := syncFile(filepath.Join(m.Root, rel), filepath.Join(dst, rel))
		if err != nil {
			return err
		}
		if copied {
			keep[rel] = true
		}
	}
	if err := prune(dst, keep); err != nil {
		return err
	}
	return vendor(ctx, m, dst, keep)
}

// syncFile makes dst a copy of src: a regular file with the same content
// and executable bit, or the same symlink. A src that is gone (deleted,
// not yet committed) is not copied.
func syncFile(src, dst string) (bool, error) {
	info, err := os.Lstat(src)
	if err != nil {
		if os.IsNotExist(err) {
			return false, nil
		}
		return false, fmt.Errorf("standins: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return false, fmt.Errorf("standins: %w", err)
	}
	if info.Mode()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(src)
		if err != nil {
			return false, fmt.Errorf("standins: %w", err)
		}
		if have, err := os.Readlink(dst); err == nil && have == target {
			return true, nil
		}
		os.Remove(dst)
		if err := os.Symlink(target, dst); err != nil {
			return false, fmt.Errorf("standins: %w", err)
		}
		return true, nil
	}
	if !info.Mode().IsRegular() {
		return false, nil
	}
	mode := fs.FileMode(0o644)
	if info.Mode()&0o111 != 0 {
		mode = 0o755
	}
	want, err := os.ReadFile(src)
	if err != nil {
		return false, fmt.Errorf("standins: %w", err)
	}
	if have, err := os.ReadFile(dst); err == nil && bytes.Equal(have, want) {
		if di, err := os.Lstat(dst); err == nil && di.Mode() == mode {
			return true, nil
		}
	}
	os.Remove(dst) // a symlink or a read-only file in the way
	if err := os.WriteFile(dst, want, mode); err != nil {
		return false, fmt.Errorf("standins: %w", err)
	}
	return true, os.Chmod(dst, mode)
}

// prune removes from dst what keep does not hold, vendor/ aside, and the
// folders left empty.
func prune(dst string, keep map[string]bool) error {
	var dirs []string
	err := filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dst, p)
		rel = filepath.ToSlash(rel)
		switch {
		case rel == ".":
			return nil
		case rel == "vendor":
			return filepath.SkipDir
		case d.IsDir():
			dirs = append(dirs, p)
			return nil
		case !keep[rel]:
			return os.Remove(p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("standins: %w", err)
	}
	slices.Reverse(dirs)
	for _, d := range dirs {
		os.Remove(d) // fails, as it should, when not empty
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
