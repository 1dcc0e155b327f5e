package standins

import (
	"archive/tar"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// A layout is an image's root filesystem, written as the tar stream that
// `docker import` reads. Every entry's owner and permission bits are set
// here, not taken from the host: the image is the same whoever builds it,
// and building it needs no root. Time stamps are all the zero time, so the
// same inputs give the same stream.
type layout struct {
	entries []entry
}

// An entry is one path of a layout: a folder, a symlink, or a file whose
// content is made here (data) or read from the host (src). A src that is
// a host folder copies the whole tree under path.
type entry struct {
	path     string      // absolute, in the image
	mode     fs.FileMode // permission bits, with fs.ModeDir or fs.ModeSymlink
	uid, gid int
	data     []byte
	src      string
	link     string
	// built marks a file that a Go build writes into src: its bytes are
	// not an input, the build's description is (goBuild.describe), so the
	// image's hash is known before anything is built.
	built bool
}

func (l *layout) dir(p string, mode fs.FileMode, uid, gid int) {
	l.entries = append(l.entries, entry{path: p, mode: fs.ModeDir | mode, uid: uid, gid: gid})
}

func (l *layout) file(p string, mode fs.FileMode, uid, gid int, data string) {
	l.entries = append(l.entries, entry{path: p, mode: mode, uid: uid, gid: gid, data: []byte(data)})
}

// copy copies the host's file or folder src to p, owned by uid:gid.
// Folders get 0755, files 0755 when the host's is executable and 0644
// otherwise.
func (l *layout) copy(p, src string, uid, gid int) {
	l.entries = append(l.entries, entry{path: p, src: src, uid: uid, gid: gid})
}

// binary is a file a Go build writes at src.
func (l *layout) binary(p, src string) {
	l.entries = append(l.entries, entry{path: p, mode: 0o755, src: src, built: true})
}

func (l *layout) symlink(p, target string) {
	l.entries = append(l.entries, entry{path: p, mode: fs.ModeSymlink | 0o777, link: target})
}

// An item is one tar entry of a layout, with a way to read its content.
type item struct {
	hdr   *tar.Header
	open  func() (io.ReadCloser, error) // nil for anything but a regular file
	built string                        // a built file's host path
}

// walk calls fn with every item of the layout, in order, trees expanded in
// lexical order. A folder missing from the layout is made (root's, 0755)
// before its first child, as an unpacked tar would leave it; a path given
// twice is an error, as the second would silently win.
func (l *layout) walk(fn func(item) error) error {
	seen := map[string]bool{"": true}
	emit := func(it item) error {
		name := it.hdr.Name
		if seen[strings.TrimSuffix(name, "/")] {
			return fmt.Errorf("standins: %s is in the image twice", name)
		}
		for _, parent := range parents(name) {
			if !seen[parent] {
				seen[parent] = true
				if err := fn(item{hdr: &tar.Header{Typeflag: tar.TypeDir, Name: parent + "/", Mode: 0o755, Format: tar.FormatPAX}}); err != nil {
					return err
				}
			}
		}
		seen[strings.TrimSuffix(name, "/")] = true
		return fn(it)
	}
	for _, e := range l.entries {
		if !path.IsAbs(e.path) || path.Clean(e.path) != e.path || e.path == "/" {
			return fmt.Errorf("standins: image path %q: want a clean absolute path below /", e.path)
		}
		name := strings.TrimPrefix(e.path, "/")
		hdr := &tar.Header{Name: name, Mode: tarMode(e.mode), Uid: e.uid, Gid: e.gid, Format: tar.FormatPAX}
		switch {
		case e.mode&fs.ModeDir != 0:
			hdr.Typeflag, hdr.Name = tar.TypeDir, name+"/"
			if err := emit(item{hdr: hdr}); err != nil {
				return err
			}
		case e.mode&fs.ModeSymlink != 0:
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.link
			if err := emit(item{hdr: hdr}); err != nil {
				return err
			}
		case e.src == "":
			data := e.data
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(data))
			if err := emit(item{hdr: hdr, open: func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(string(data))), nil }}); err != nil {
				return err
			}
		case e.built:
			hdr.Typeflag = tar.TypeReg
			if err := emit(item{hdr: hdr, built: e.src, open: opener(e.src)}); err != nil {
				return err
			}
		default:
			if err := l.walkHost(e, name, emit); err != nil {
				return err
			}
		}
	}
	return nil
}

// walkHost emits the host's file or tree at e.src as name.
// A src that is a symlink is followed (Debian's CA bundle may be one); the
// symlinks inside a tree are kept.
func (l *layout) walkHost(e entry, name string, emit func(item) error) error {
	src, err := filepath.EvalSymlinks(e.src)
	if err != nil {
		return fmt.Errorf("standins: %w", err)
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("standins: %w", err)
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return fmt.Errorf("standins: %w", err)
		}
		hdr := &tar.Header{Name: path.Join(name, filepath.ToSlash(rel)), Uid: e.uid, Gid: e.gid, Format: tar.FormatPAX}
		switch t := d.Type(); {
		case t.IsDir():
			hdr.Typeflag, hdr.Mode, hdr.Name = tar.TypeDir, 0o755, hdr.Name+"/"
			return emit(item{hdr: hdr})
		case t&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return fmt.Errorf("standins: %w", err)
			}
			hdr.Typeflag, hdr.Mode, hdr.Linkname = tar.TypeSymlink, 0o777, target
			return emit(item{hdr: hdr})
		case t.IsRegular():
			info, err := d.Info()
			if err != nil {
				return fmt.Errorf("standins: %w", err)
			}
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, info.Size()
			if info.Mode()&0o111 != 0 {
				hdr.Mode = 0o755
			}
			return emit(item{hdr: hdr, open: opener(p)})
		default:
			return fmt.Errorf("standins: %s is a %v, which no image holds", p, t)
		}
	})
}

// tarMode is a mode's permission and sticky bits as tar keeps them: /tmp
// is 1777.
func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

func opener(p string) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) {
		f, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("standins: %w", err)
		}
		return f, nil
	}
}

// parents lists the folders above a tar name, outermost first: a/b/c gives
// a and a/b.
func parents(name string) []string {
	var out []string
	parts := strings.Split(strings.TrimSuffix(name, "/"), "/")
	for i := 1; i < len(parts); i++ {
		out = append(out, strings.Join(parts[:i], "/"))
	}
	return out
}

// write writes the layout as a tar stream. A built file's size is read
// when it is written: the build ran after the layout was described.
func (l *layout) write(w io.Writer) error {
	tw := tar.NewWriter(w)
	err := l.walk(func(it item) error {
		if it.open == nil {
			return tw.WriteHeader(it.hdr)
		}
		if it.built != "" {
			info, err := os.Stat(it.built)
			if err != nil {
				return fmt.Errorf("standins: %w", err)
			}
			it.hdr.Size = info.Size()
		}
		f, err := it.open()
		if err != nil {
			return err
		}
		defer f.Close()
		if err := tw.WriteHeader(it.hdr); err != nil {
			return fmt.Errorf("standins: %s: %w", it.hdr.Name, err)
		}
		if _, err := io.Copy(tw, f); err != nil {
			return fmt.Errorf("standins: %s: %w", it.hdr.Name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// describe writes into h one line per item — type, name, mode, owner,
// link — and the SHA-256 of each file's content, except a built file's:
// what the image holds, byte for byte, but for what the builds make.
func (l *layout) describe(h hash.Hash) error {
	return l.walk(func(it item) error {
		fmt.Fprintf(h, "%c %q %o %d:%d %q", it.hdr.Typeflag, it.hdr.Name, it.hdr.Mode, it.hdr.Uid, it.hdr.Gid, it.hdr.Linkname)
		if it.open != nil && it.built == "" {
			f, err := it.open()
			if err != nil {
				return err
			}
			defer f.Close()
			c := sha256.New()
			if _, err := io.Copy(c, f); err != nil {
				return fmt.Errorf("standins: %s: %w", it.hdr.Name, err)
			}
			fmt.Fprintf(h, " %x", c.Sum(nil))
		}
		fmt.Fprintln(h)
		return nil
	})
}
