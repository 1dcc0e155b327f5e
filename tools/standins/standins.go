// Package standins makes burnlab's compose stack run on a Docker engine that
// can pull nothing: no registry, and no image to start with. It builds, from
// what the machine has, a stand-in for every image the Dockerfile and
// docker-compose.yml name and the engine lacks —
//
//   - the Go build image, from the host's Go (GOROOT) and a static busybox
//     for the shell the Dockerfile's RUN steps need;
//   - the distroless runtime: passwd, group and certificates, non-root
//     65532, no shell;
//   - Prometheus and Alertmanager at the pinned versions, built from their
//     Go modules (tools/prometheus, tools/alertmanager), in images laid out
//     as the official ones are, without the web UIs (they need npm);
//
// — then stages a copy of the repo as the build context, with every module
// the build needs vendored into it (a build container here cannot reach the
// Go module proxy), and writes a compose override that passes the
// stand-ins: burnlab's Dockerfile takes its bases as build arguments, and
// the other services get the stand-in as their image. A service that needs
// an image with no stand-in (Grafana) is left out by a profile.
//
// An image's inputs — every file of its root filesystem, its configuration,
// the description of each Go build — are hashed, and the hash is in its
// tag: an image whose tag exists is not built again. A user's own
// `docker compose up --build` is untouched: the repo's files name the pins,
// and the staged folder is outside the build context (.dockerignore).
package standins

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// Machine is what the stand-ins are made from.
type Machine struct {
	Root      string // the repo: tools/ holds the pinned tool modules
	Out       string // where builds, the staged context and the override go
	Go        string // the go command; its GOROOT is copied into the Go image
	GOROOT    string
	GoVersion string // go1.26.8
	Busybox   string // a statically linked busybox
	Applets   []string
}

// Discover reads the machine's facts: the go command's GOROOT and version,
// and busybox's applets. The busybox must be static (Debian's
// busybox-static): an image holds no C library for it.
func Discover(ctx context.Context, root, out, goCmd, busybox string) (Machine, error) {
	m := Machine{Root: root, Out: out, Go: goCmd, Busybox: busybox}
	env, err := output(ctx, "", nil, goCmd, "env", "GOROOT", "GOVERSION")
	if err != nil {
		return m, err
	}
	lines := strings.Fields(string(env))
	if len(lines) != 2 {
		return m, fmt.Errorf("standins: go env GOROOT GOVERSION printed %q", env)
	}
	m.GOROOT, m.GoVersion = lines[0], lines[1]
	if err := static(busybox); err != nil {
		return m, err
	}
	list, err := output(ctx, "", nil, busybox, "--list")
	if err != nil {
		return m, err
	}
	m.Applets = strings.Fields(string(list))
	if !slices.Contains(m.Applets, "sh") {
		return m, fmt.Errorf("standins: %s has no sh applet", busybox)
	}
	return m, nil
}

// static fails unless the file at p is a statically linked ELF executable:
// one that names no dynamic loader.
func static(p string) error {
	f, err := elf.Open(p)
	if err != nil {
		return fmt.Errorf("standins: busybox: %w (install Debian's busybox-static)", err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("standins: %s is dynamically linked, and an image has no C library for it: install Debian's busybox-static", p)
		}
	}
	return nil
}

// An image is one stand-in.
type image struct {
	name    string // a short name for messages: go, runtime, prometheus, alertmanager
	repo    string // burnlab-standin/<something>
	version string // the tag is <version>-<first 12 hex digits of the hash>
	// What it stands for: a global ARG of the Dockerfile (passed as a build
	// argument), or an image a compose service runs (its image replaced).
	arg, pin string
	differs  string // how it differs from the pinned image: a label, and docs/compose.md's table
	rootfs   layout
	config   []string  // docker import --change instructions
	builds   []goBuild // run before the root filesystem is written
}

// inputs hashes everything the image is made of. The hash names the image,
// so a change in any input makes a new one and nothing else does.
func (im *image) inputs(m Machine) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "burnlab stand-in 1\n%s %s\n%q\n", im.repo, im.version, im.config)
	for _, b := range im.builds {
		d, err := b.describe(m)
		if err != nil {
			return "", err
		}
		h.Write(d)
	}
	if err := im.rootfs.describe(h); err != nil {
		return "", err
	}
	return fmt.Sprintf("%x", h.Sum(nil)), nil
}

// changes is the image's configuration with the labels that say what it
// is, as docker import --change takes them.
func (im *image) changes(sum string) []string {
	labels := map[string]string{
		"burnlab.standin":         im.name,
		"burnlab.standin.inputs":  "sha256:" + sum,
		"burnlab.standin.for":     im.pin,
		"burnlab.standin.differs": im.differs,
	}
	out := slices.Clone(im.config)
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		// The Dockerfile parser reads \" and \\ in a quoted word as Go does.
		out = append(out, fmt.Sprintf("LABEL %s=%q", k, labels[k]))
	}
	return out
}

// Engine is the Docker engine the stand-ins go into.
type Engine interface {
	// HasImage reports whether the engine has an image by this name.
	HasImage(ctx context.Context, ref string) (bool, error)
	// Import makes an image of the tar stream rootfs, with the changes.
	Import(ctx context.Context, ref string, changes []string, rootfs io.Reader) error
}

// Docker is an Engine through the docker CLI.
type Docker struct {
	Command string // docker
}

// HasImage runs docker image inspect: no such image is false, any other
// failure (no daemon, say) an error.
func (d Docker) HasImage(ctx context.Context, ref string) (bool, error) {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, d.Command, "image", "inspect", "--format", "{{.Id}}", ref) //nolint:gosec // G204: the docker CLI with an image name made here
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if strings.Contains(strings.ToLower(stderr.String()), "no such image") {
			return false, nil
		}
		return false, fmt.Errorf("standins: docker image inspect %s: %w: %s", ref, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return true, nil
}

// Import runs docker import, the tar stream on its standard input.
func (d Docker) Import(ctx context.Context, ref string, changes []string, rootfs io.Reader) error {
	args := []string{"import"}
	for _, c := range changes {
		args = append(args, "--change", c)
	}
	args = append(args, "-", ref)
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, d.Command, args...) //nolint:gosec // G204: the docker CLI with arguments made here
	cmd.Stdin, cmd.Stdout, cmd.Stderr = rootfs, &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("standins: docker import %s: %w: %s", ref, err, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}

// A Built is a stand-in the engine has.
type Built struct {
	Name, Ref string
	Arg, Pin  string // what it stands for (see image)
	Differs   string
	Fresh     bool // built by this run, not found already
}

// ensure builds each image the engine lacks, by its hashed name.
func ensure(ctx context.Context, m Machine, e Engine, log io.Writer, images []*image) ([]Built, error) {
	var out []Built
	for _, im := range images {
		sum, err := im.inputs(m)
		if err != nil {
			return nil, fmt.Errorf("standins: %s: %w", im.name, err)
		}
		b := Built{Name: im.name, Ref: im.repo + ":" + im.version + "-" + sum[:12], Arg: im.arg, Pin: im.pin, Differs: im.differs}
		has, err := e.HasImage(ctx, b.Ref)
		if err != nil {
			return nil, err
		}
		if has {
			fmt.Fprintf(log, "standins: %-12s %s (inputs unchanged)\n", im.name, b.Ref)
			out = append(out, b)
			continue
		}
		for _, gb := range im.builds {
			fmt.Fprintf(log, "standins: %-12s go build %s in %s\n", im.name, strings.Join(gb.pkgs, " "), gb.module)
			if err := gb.run(ctx, m); err != nil {
				return nil, fmt.Errorf("standins: %s: %w", im.name, err)
			}
		}
		fmt.Fprintf(log, "standins: %-12s docker import %s\n", im.name, b.Ref)
		if err := importLayout(ctx, e, b.Ref, im.changes(sum), &im.rootfs); err != nil {
			return nil, err
		}
		b.Fresh = true
		out = append(out, b)
	}
	return out, nil
}

// errImportEnded stops a layout's writer when the import stopped reading.
var errImportEnded = errors.New("standins: the import ended")

// importLayout streams the layout into the engine's import. A failure to
// write the layout (a file gone) is the error to report: the import's own
// would only say its stream was cut short.
func importLayout(ctx context.Context, e Engine, ref string, changes []string, l *layout) error {
	pr, pw := io.Pipe()
	written := make(chan error, 1)
	go func() {
		err := l.write(pw)
		pw.CloseWithError(err)
		written <- err
	}()
	err := e.Import(ctx, ref, changes, pr)
	pr.CloseWithError(errImportEnded)
	if werr := <-written; werr != nil && !errors.Is(werr, errImportEnded) {
		return werr
	}
	return err
}

// A goBuild builds binaries on the host, in one of the repo's pinned tool
// modules (out of go.work, as `make lint` builds golangci-lint), static,
// for the engine's platform. patch, when set, builds against a copy of one
// required module with files added (see patch).
type goBuild struct {
	module  string // tools/prometheus, relative to the repo
	pkgs    []string
	tags    []string // build tags besides netgo
	ldflags string
	out     string // the folder the binaries go to
	patch   *patch
}

// args are the go build flags, shared by the build and its description.
func (b goBuild) args() []string {
	tags := strings.Join(append([]string{"netgo"}, b.tags...), ",")
	return append([]string{"build", "-trimpath", "-tags", tags, "-ldflags", b.ldflags}, b.pkgs...)
}

func (b goBuild) env() []string {
	return append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH, "GOFLAGS=-mod=readonly")
}

// describe is the build's part of an image's inputs: the toolchain, the
// tool module's go.mod and go.sum (which fix every dependency), the flags
// and the patch.
func (b goBuild) describe(m Machine) ([]byte, error) {
	var d bytes.Buffer
	fmt.Fprintf(&d, "go build %s %s %s %q\n", m.GoVersion, runtime.GOARCH, b.module, b.args())
	for _, f := range []string{"go.mod", "go.sum"} {
		c, err := os.ReadFile(filepath.Join(m.Root, b.module, f))
		if err != nil {
			return nil, fmt.Errorf("standins: %w", err)
		}
		fmt.Fprintf(&d, "%s %x\n", f, sha256.Sum256(c))
	}
	if b.patch != nil {
		fmt.Fprintf(&d, "patch %s", b.patch.module)
		for _, f := range slices.Sorted(maps.Keys(b.patch.add)) {
			fmt.Fprintf(&d, " %q %x", f, sha256.Sum256([]byte(b.patch.add[f])))
		}
		fmt.Fprintln(&d)
	}
	return d.Bytes(), nil
}

func (b goBuild) run(ctx context.Context, m Machine) error {
	if err := os.MkdirAll(b.out, 0o755); err != nil {
		return fmt.Errorf("standins: %w", err)
	}
	args := b.args()
	if b.patch != nil {
		modfile, err := b.patch.apply(ctx, m, b.module, filepath.Join(m.Out, "src"))
		if err != nil {
			return err
		}
		args = slices.Insert(args, 1, "-modfile="+modfile)
	}
	args = slices.Insert(args, len(args)-len(b.pkgs), "-o", b.out+string(filepath.Separator))
	_, err := output(ctx, filepath.Join(m.Root, b.module), b.env(), m.Go, args...)
	return err
}

// A patch builds a tool against a copy of one module it requires, with
// files added that the published module lacks. Alertmanager's web UI
// package embeds app/dist, which its release build makes with npm and Elm
// and the module does not hold: the patch adds a placeholder page there,
// and no Go file changes.
type patch struct {
	module string            // the module path, e.g. github.com/prometheus/alertmanager
	add    map[string]string // path in the module → content, gzipped when the path ends in .gz
}

// apply copies the module from the module cache to dir, adds the files,
// and writes a go.mod for the build: the tool module's, with the module
// replaced by the copy. It returns that go.mod's path (go build -modfile).
func (p *patch) apply(ctx context.Context, m Machine, toolModule, dir string) (string, error) {
	src, version, err := moduleDir(ctx, m, toolModule, p.module)
	if err != nil {
		return "", err
	}
	dst := filepath.Join(dir, filepath.Base(p.module)+"@"+version)
	if err := os.RemoveAll(dst); err != nil {
		return "", fmt.Errorf("standins: %w", err)
	}
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		return "", fmt.Errorf("standins: copying %s: %w", p.module, err)
	}
	for rel, content := range p.add {
		f := filepath.Join(dst, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return "", fmt.Errorf("standins: %w", err)
		}
		data := []byte(content)
		if strings.HasSuffix(rel, ".gz") {
			var z bytes.Buffer
			zw := gzip.NewWriter(&z)
			if _, err := zw.Write(data); err != nil {
				return "", fmt.Errorf("standins: %w", err)
			}
			if err := zw.Close(); err != nil {
				return "", fmt.Errorf("standins: %w", err)
			}
			data = z.Bytes()
		}
		if err := os.WriteFile(f, data, 0o644); err != nil {
			return "", fmt.Errorf("standins: %w", err)
		}
	}
	modDir := dst + ".mod"
	if err := os.MkdirAll(modDir, 0o755); err != nil {
		return "", fmt.Errorf("standins: %w", err)
	}
	for _, f := range []string{"go.mod", "go.sum"} {
		c, err := os.ReadFile(filepath.Join(m.Root, toolModule, f))
		if err != nil {
			return "", fmt.Errorf("standins: %w", err)
		}
		// modDir is under the -out folder the user chose; f is go.mod or go.sum.
		if err := os.WriteFile(filepath.Join(modDir, f), c, 0o644); err != nil { //nolint:gosec // G703: see above
			return "", fmt.Errorf("standins: %w", err)
		}
	}
	modfile := filepath.Join(modDir, "go.mod")
	abs, err := filepath.Abs(dst)
	if err != nil {
		return "", fmt.Errorf("standins: %w", err)
	}
	if _, err := output(ctx, filepath.Join(m.Root, toolModule), append(os.Environ(), "GOWORK=off"), m.Go, "mod", "edit", "-modfile="+modfile, "-replace="+p.module+"="+abs); err != nil {
		return "", err
	}
	return modfile, nil
}

// moduleDir downloads (when the module cache lacks it) the version of
// module that the tool module requires, and returns its folder there.
func moduleDir(ctx context.Context, m Machine, toolModule, module string) (dir, version string, err error) {
	b, err := output(ctx, filepath.Join(m.Root, toolModule), append(os.Environ(), "GOWORK=off"), m.Go, "mod", "download", "-json", module)
	if err != nil {
		return "", "", err
	}
	var info struct{ Dir, Version, Error string }
	if err := json.Unmarshal(b, &info); err != nil {
		return "", "", fmt.Errorf("standins: go mod download %s: %w", module, err)
	}
	if info.Error != "" || info.Dir == "" {
		return "", "", fmt.Errorf("standins: go mod download %s: %s", module, info.Error)
	}
	return info.Dir, info.Version, nil
}

// output runs a command and returns its standard output; its standard
// error is in the error when it fails.
func output(ctx context.Context, dir string, env []string, name string, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...) //nolint:gosec // G204: go, busybox and docker, with arguments made here
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("standins: %s %s: %w\n%s", name, strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}

// Options says where the stand-ins come from and go.
type Options struct {
	Root    string // the repo
	Out     string // builds, the staged context and the override: .offline
	Go      string // the go command
	Busybox string // a static busybox: Debian's busybox-static is /bin/busybox
	Engine  Engine
	Log     io.Writer
}

// Result is what Run made.
type Result struct {
	Images   []Built
	Context  string            // the staged build context
	Override string            // the compose override, for docker compose -f docker-compose.yml -f <Override>
	LeftOut  map[string]string // services with no stand-in, and why
}

// Run builds the stand-ins the engine lacks, stages the build context and
// writes the override.
func Run(ctx context.Context, o Options) (Result, error) {
	var r Result
	root, err := filepath.Abs(o.Root)
	if err != nil {
		return r, fmt.Errorf("standins: %w", err)
	}
	out, err := filepath.Abs(o.Out)
	if err != nil {
		return r, fmt.Errorf("standins: %w", err)
	}
	m, err := Discover(ctx, root, out, o.Go, o.Busybox)
	if err != nil {
		return r, err
	}
	dockerfileText, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		return r, fmt.Errorf("standins: %w", err)
	}
	composeYAML, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		return r, fmt.Errorf("standins: %w", err)
	}
	df, err := parseDockerfile(dockerfileText)
	if err != nil {
		return r, err
	}
	images := []*image{goImage(m, df.globals["GO_IMAGE"]), runtimeImage(m, df.globals["RUNTIME_IMAGE"])}
	for _, p := range []prom{prometheus, alertmanager} {
		im, err := p.image(ctx, m)
		if err != nil {
			return r, err
		}
		images = append(images, im)
	}
	for _, im := range images {
		if im.arg != "" && im.pin == "" {
			return r, fmt.Errorf("standins: the Dockerfile has no global ARG %s for the %s stand-in", im.arg, im.name)
		}
	}
	if r.Images, err = ensure(ctx, m, o.Engine, o.Log, images); err != nil {
		return r, err
	}
	r.Context = filepath.Join(out, "context")
	if err := stageContext(ctx, m, r.Context); err != nil {
		return r, err
	}
	text, leftOut, err := Override(composeYAML, dockerfileText, r.Context, r.Images)
	if err != nil {
		return r, err
	}
	r.Override, r.LeftOut = filepath.Join(out, "compose.yml"), leftOut
	// The override goes in the -out folder the user chose.
	if err := os.WriteFile(r.Override, text, 0o644); err != nil { //nolint:gosec // G703: see above
		return r, fmt.Errorf("standins: %w", err)
	}
	return r, nil
}
