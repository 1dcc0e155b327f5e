package standins

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// untar reads a layout's stream back: each name with its header and
// content.
func untar(t *testing.T, l *layout) (order []string, hdrs map[string]*tar.Header, data map[string]string) {
	t.Helper()
	var buf bytes.Buffer
	if err := l.write(&buf); err != nil {
		t.Fatal(err)
	}
	hdrs, data = map[string]*tar.Header{}, map[string]string{}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return order, hdrs, data
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		order = append(order, h.Name)
		hdrs[h.Name], data[h.Name] = h, string(b)
	}
}

func TestLayoutSetsOwnersAndModesAndMakesParents(t *testing.T) {
	host := t.TempDir()
	os.MkdirAll(filepath.Join(host, "tree", "sub"), 0o700)
	os.WriteFile(filepath.Join(host, "tree", "tool"), []byte("#!/bin/sh\n"), 0o700)
	os.WriteFile(filepath.Join(host, "tree", "sub", "doc"), []byte("doc"), 0o600)
	os.Symlink("tool", filepath.Join(host, "tree", "alias"))
	var l layout
	l.dir("/tmp", 0o777|fs.ModeSticky, 0, 0)
	l.dir("/data", 0o775, nobody, nobody)
	l.file("/etc/passwd", 0o644, 0, 0, "root:x:0:0::/root:/sbin/nologin\n")
	l.copy("/opt/tree", filepath.Join(host, "tree"), 7, 8)
	l.symlink("/bin/sh", "busybox")
	os.Symlink(filepath.Join(host, "tree", "sub", "doc"), filepath.Join(host, "bundle"))
	l.copy("/etc/bundle", filepath.Join(host, "bundle"), 0, 0)
	order, hdrs, data := untar(t, &l)

	for name, want := range map[string]struct {
		typ      byte
		mode     int64
		uid, gid int
	}{
		"tmp/":             {tar.TypeDir, 0o1777, 0, 0},
		"data/":            {tar.TypeDir, 0o775, nobody, nobody},
		"etc/":             {tar.TypeDir, 0o755, 0, 0}, // made for etc/passwd
		"etc/passwd":       {tar.TypeReg, 0o644, 0, 0},
		"opt/tree/":        {tar.TypeDir, 0o755, 7, 8},
		"opt/tree/tool":    {tar.TypeReg, 0o755, 7, 8}, // the host's 0700 is executable
		"opt/tree/sub/doc": {tar.TypeReg, 0o644, 7, 8}, // and its 0600 not
		"opt/tree/alias":   {tar.TypeSymlink, 0o777, 7, 8},
		"bin/sh":           {tar.TypeSymlink, 0o777, 0, 0},
	} {
		h := hdrs[name]
		if h == nil {
			t.Errorf("%s: not in the image (%v)", name, order)
			continue
		}
		if h.Typeflag != want.typ || h.Mode != want.mode || h.Uid != want.uid || h.Gid != want.gid || !h.ModTime.Equal(hdrs["tmp/"].ModTime) {
			t.Errorf("%s: type %c mode %o owner %d:%d; want %c %o %d:%d", name, h.Typeflag, h.Mode, h.Uid, h.Gid, want.typ, want.mode, want.uid, want.gid)
		}
	}
	if data["opt/tree/sub/doc"] != "doc" || hdrs["opt/tree/alias"].Linkname != "tool" || hdrs["bin/sh"].Linkname != "busybox" {
		t.Errorf("content: %q, links %q %q", data["opt/tree/sub/doc"], hdrs["opt/tree/alias"].Linkname, hdrs["bin/sh"].Linkname)
	}
	// Every folder comes before what is in it, as an unpacked tar needs.
	seen := map[string]bool{}
	for _, name := range order {
		for _, p := range parents(name) {
			if !seen[p+"/"] {
				t.Errorf("%s comes before its folder %s/", name, p)
			}
		}
		seen[name] = true
	}
}

func TestLayoutRefusesBadPathsAndDuplicates(t *testing.T) {
	for _, l := range []layout{
		{entries: []entry{{path: "etc/passwd"}}},
		{entries: []entry{{path: "/etc/../passwd"}}},
		{entries: []entry{{path: "/"}}},
		{entries: []entry{{path: "/etc/passwd", data: []byte("a")}, {path: "/etc/passwd", data: []byte("b")}}},
		{entries: []entry{{path: "/src", src: filepath.Join(t.TempDir(), "missing")}}},
	} {
		if err := l.write(io.Discard); err == nil {
			t.Errorf("%+v: written", l.entries)
		}
	}
}

func describe(t *testing.T, l *layout) string {
	t.Helper()
	h := sha256.New()
	if err := l.describe(h); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// The description changes with every byte, mode and owner of the image,
// and not with what a build will make: that is described by the build.
func TestDescribeFollowsContentNotBuildOutput(t *testing.T) {
	host := t.TempDir()
	src, bin := filepath.Join(host, "config"), filepath.Join(host, "bin")
	os.WriteFile(src, []byte("a"), 0o644)
	mk := func(uid int) *layout {
		var l layout
		l.copy("/etc/config", src, uid, 0)
		l.binary("/bin/tool", bin)
		return &l
	}
	before := describe(t, mk(0))
	if describe(t, mk(0)) != before {
		t.Fatal("the same layout describes two ways")
	}
	os.WriteFile(bin, []byte("built"), 0o755)
	if describe(t, mk(0)) != before {
		t.Error("a built file's bytes changed the description")
	}
	if describe(t, mk(1)) == before {
		t.Error("an owner change did not change the description")
	}
	os.WriteFile(src, []byte("b"), 0o644)
	if describe(t, mk(0)) == before {
		t.Error("a content change did not change the description")
	}
	// The stream holds the built file as it is when written.
	_, hdrs, data := untar(t, mk(0))
	if data["bin/tool"] != "built" || hdrs["bin/tool"].Mode != 0o755 || hdrs["bin/tool"].Size != 5 {
		t.Errorf("bin/tool: %q, %+v", data["bin/tool"], hdrs["bin/tool"])
	}
}
