package standins

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeEngine keeps what was imported, by name.
type fakeEngine struct {
	images  map[string][]string // ref → changes
	files   map[string][]string // ref → tar names
	imports int
}

func (f *fakeEngine) HasImage(_ context.Context, ref string) (bool, error) {
	_, ok := f.images[ref]
	return ok, nil
}

func (f *fakeEngine) Import(_ context.Context, ref string, changes []string, rootfs io.Reader) error {
	tr := tar.NewReader(rootfs)
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		names = append(names, h.Name)
	}
	if f.images == nil {
		f.images, f.files = map[string][]string{}, map[string][]string{}
	}
	f.images[ref], f.files[ref] = changes, names
	f.imports++
	return nil
}

func testImages(config string) []*image {
	a := &image{name: "a", repo: repoPrefix + "a", version: "1", arg: "A_IMAGE", pin: "a:1", config: []string{"USER 1"}}
	a.rootfs.file("/etc/a", 0o644, 0, 0, config)
	b := &image{name: "b", repo: repoPrefix + "b", version: "2", pin: "b:2", config: []string{"USER 2"}}
	b.rootfs.file("/etc/b", 0o644, 0, 0, "b")
	return []*image{a, b}
}

// An image is built when the engine lacks its hashed name, and only then:
// a second run builds nothing, and a changed input builds that image alone,
// under a new name.
func TestEnsureBuildsOnlyWhatChanged(t *testing.T) {
	ctx, e, m := context.Background(), &fakeEngine{}, Machine{GoVersion: "go1.0"}
	first, err := ensure(ctx, m, e, io.Discard, testImages("a"))
	if err != nil || e.imports != 2 || !first[0].Fresh || !first[1].Fresh {
		t.Fatalf("first run: %d imports, %+v, %v", e.imports, first, err)
	}
	again, err := ensure(ctx, m, e, io.Discard, testImages("a"))
	if err != nil || e.imports != 2 || again[0].Fresh || again[0].Ref != first[0].Ref {
		t.Fatalf("second run: %d imports, %+v, %v", e.imports, again, err)
	}
	changed, err := ensure(ctx, m, e, io.Discard, testImages("a, changed"))
	if err != nil || e.imports != 3 || !changed[0].Fresh || changed[0].Ref == first[0].Ref || changed[1].Ref != first[1].Ref {
		t.Fatalf("after a change: %d imports, %+v, %v", e.imports, changed, err)
	}
	ref := changed[0].Ref
	if !strings.HasPrefix(ref, "burnlab-standin/a:1-") || len(ref) != len("burnlab-standin/a:1-")+12 {
		t.Errorf("ref %s: want burnlab-standin/a:1-<12 hex digits>", ref)
	}
	// The labels say what the image is and what it was made of.
	changes := e.images[ref]
	for _, want := range []string{`USER 1`, `LABEL burnlab.standin="a"`, `LABEL burnlab.standin.for="a:1"`, `LABEL burnlab.standin.inputs="sha256:` + strings.TrimPrefix(ref, "burnlab-standin/a:1-")} {
		if !slices.ContainsFunc(changes, func(c string) bool { return strings.HasPrefix(c, want) }) {
			t.Errorf("changes %q lack %s", changes, want)
		}
	}
	if !slices.Contains(e.files[ref], "etc/a") {
		t.Errorf("imported %v", e.files[ref])
	}
}

// A stand-in whose file is gone fails with that file's name, not with the
// import's word that its stream was cut short.
func TestEnsureReportsAMissingInput(t *testing.T) {
	im := &image{name: "a", repo: repoPrefix + "a", version: "1"}
	missing := filepath.Join(t.TempDir(), "built")
	im.rootfs.binary("/bin/a", missing)
	_, err := ensure(context.Background(), Machine{}, &fakeEngine{}, io.Discard, []*image{im})
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("ensure: %v; want it to name %s", err, missing)
	}
}

// The description of a Go build follows the tool module's go.mod and
// go.sum, the toolchain and the patch.
func TestGoBuildDescriptionFollowsItsInputs(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "tools", "x"), 0o755)
	os.WriteFile(filepath.Join(root, "tools", "x", "go.mod"), []byte("module x\n"), 0o644)
	os.WriteFile(filepath.Join(root, "tools", "x", "go.sum"), []byte("a\n"), 0o644)
	m := Machine{Root: root, GoVersion: "go1.0"}
	b := goBuild{module: "tools/x", pkgs: []string{"example.com/cmd/x"}, ldflags: "-X v=1"}
	d := func(b goBuild, m Machine) string {
		out, err := b.describe(m)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	base := d(b, m)
	os.WriteFile(filepath.Join(root, "tools", "x", "go.sum"), []byte("b\n"), 0o644)
	sum := d(b, m)
	m2 := m
	m2.GoVersion = "go1.1"
	b2 := b
	b2.patch = &patch{module: "example.com", add: map[string]string{"ui/index.html": "x"}}
	b3 := b
	b3.tags = []string{"remove_all_sd"}
	for name, got := range map[string]string{"go.sum": sum, "toolchain": d(b, m2), "patch": d(b2, m), "tags": d(b3, m)} {
		if got == base {
			t.Errorf("a changed %s left the description as it was", name)
		}
	}
	os.Remove(filepath.Join(root, "tools", "x", "go.sum"))
	if _, err := b.describe(m); err == nil {
		t.Error("a tool module with no go.sum was described")
	}
}

func TestStaticRefusesADynamicBusybox(t *testing.T) {
	notELF := filepath.Join(t.TempDir(), "busybox")
	os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755)
	if err := static(notELF); err == nil || !strings.Contains(err.Error(), "busybox-static") {
		t.Errorf("a script: %v", err)
	}
	for _, dynamic := range []string{"/bin/sh", "/usr/bin/env"} {
		if _, err := os.Stat(dynamic); err != nil {
			continue
		}
		if err := static(dynamic); err == nil || !strings.Contains(err.Error(), "dynamically linked") {
			t.Errorf("%s: %v", dynamic, err)
		}
		return
	}
	t.Skip("no dynamically linked program here to try")
}

// fakeDocker writes a docker CLI that answers image inspect as script
// says, and keeps import's arguments and standard input.
func fakeDocker(t *testing.T, inspect string) (Docker, string) {
	t.Helper()
	dir := t.TempDir()
	script := "#!/bin/sh\ncase $1 in\n  image) " + inspect + " ;;\n  import) printf '%s\\n' \"$@\" > " + dir + "/args; cat > " + dir + "/stdin ;;\nesac\n"
	p := filepath.Join(dir, "docker")
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return Docker{Command: p}, dir
}

func TestDockerTellsAMissingImageFromAFailure(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		inspect string
		has     bool
		fails   bool
	}{
		{"echo sha256:1", true, false},
		{"echo 'Error response from daemon: No such image: x' >&2; exit 1", false, false},
		{"echo 'Cannot connect to the Docker daemon' >&2; exit 1", false, true},
	} {
		d, _ := fakeDocker(t, c.inspect)
		has, err := d.HasImage(ctx, "x")
		if has != c.has || (err != nil) != c.fails {
			t.Errorf("%s: %v, %v", c.inspect, has, err)
		}
	}
	d, dir := fakeDocker(t, "exit 1")
	if err := d.Import(ctx, "r:1", []string{"USER 1", `LABEL a="b c"`}, strings.NewReader("tar")); err != nil {
		t.Fatal(err)
	}
	args, _ := os.ReadFile(filepath.Join(dir, "args"))
	stdin, _ := os.ReadFile(filepath.Join(dir, "stdin"))
	if string(args) != "import\n--change\nUSER 1\n--change\nLABEL a=\"b c\"\n-\nr:1\n" || string(stdin) != "tar" {
		t.Errorf("docker %q, stdin %q", args, stdin)
	}
}
