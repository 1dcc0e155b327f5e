package standins

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The stand-ins' image repositories start with this: no registry serves
// them, and no pinned image is ever tagged over by one.
const repoPrefix = "burnlab-standin/"

// Users of the images: distroless's nonroot, and the nobody the official
// Prometheus and Alertmanager images run as.
const (
	nonroot = 65532
	nobody  = 65534
)

// The CA bundle of Debian's ca-certificates, where distroless keeps its own.
const caBundle = "/etc/ssl/certs/ca-certificates.crt"

// base lays out what every stand-in has: /tmp, and root's and nobody's
// accounts with those given.
func (l *layout) base(accounts ...string) {
	l.dir("/tmp", 0o777|fs.ModeSticky, 0, 0)
	l.dir("/root", 0o700, 0, 0)
	passwd := "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" //nolint:gosec // G101 reads passwd's x as a password; it is the format's placeholder
	group := "root:x:0:\nnobody:x:65534:\n"
	for _, a := range accounts {
		name, id, _ := strings.Cut(a, ":")
		passwd += fmt.Sprintf("%s:x:%s:%s:%s:/home/%s:/sbin/nologin\n", name, id, id, name, name)
		group += fmt.Sprintf("%s:x:%s:\n", name, id)
	}
	l.file("/etc/passwd", 0o644, 0, 0, passwd)
	l.file("/etc/group", 0o644, 0, 0, group)
	// Go's resolver reads it to choose files before DNS, as glibc would.
	l.file("/etc/nsswitch.conf", 0o644, 0, 0, "hosts: files dns\n")
}

// busybox puts the static busybox at /bin/busybox, each applet a symlink
// to it beside: /bin/sh, /bin/mkdir, /bin/wget.
func (l *layout) busybox(m Machine) {
	l.copy("/bin/busybox", m.Busybox, 0, 0)
	for _, a := range m.Applets {
		if a != "busybox" && !strings.Contains(a, "/") {
			l.symlink("/bin/"+a, "busybox")
		}
	}
}

// goImage stands in for the golang image (the Dockerfile's GO_IMAGE): the
// host's GOROOT at /usr/local/go with GOPATH /go, as the official image
// has them. GOPROXY=off makes a missing module fail at once: a build
// container here cannot reach the module proxy, so the staged context
// vendors them.
func goImage(m Machine, pin string) *image {
	v := strings.TrimPrefix(m.GoVersion, "go")
	im := &image{
		name: "go", repo: repoPrefix + "golang", version: v, arg: "GO_IMAGE", pin: pin,
		differs: "the host's " + m.GoVersion + " (its GOROOT less test, api, doc and misc) with a static busybox as /bin/sh; " +
			"no Debian userland (git, gcc, curl); GOPROXY=off, so modules come vendored in the staged build context",
	}
	l := &im.rootfs
	l.base()
	l.busybox(m)
	for _, d := range []string{"bin", "pkg", "src", "lib", "go.env", "VERSION"} {
		l.copy("/usr/local/go/"+d, filepath.Join(m.GOROOT, d), 0, 0)
	}
	l.dir("/go", 0o777|fs.ModeSticky, 0, 0)
	l.dir("/go/bin", 0o777|fs.ModeSticky, 0, 0)
	l.dir("/go/src", 0o777|fs.ModeSticky, 0, 0)
	im.config = []string{
		"ENV PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"ENV GOLANG_VERSION=" + v,
		"ENV GOPATH=/go",
		"ENV GOTOOLCHAIN=local",
		"ENV GOPROXY=off",
		"WORKDIR /go",
	}
	return im
}

// runtimeImage stands in for distroless static's nonroot variant (the
// Dockerfile's RUNTIME_IMAGE): accounts, CA certificates, /tmp and the
// nonroot user's home; no shell, as there.
func runtimeImage(m Machine, pin string) *image {
	im := &image{
		name: "runtime", repo: repoPrefix + "static", version: "nonroot", arg: "RUNTIME_IMAGE", pin: pin,
		differs: "passwd, group, nsswitch.conf, /tmp, /home/nonroot and the host's CA certificates only: " +
			"no tzdata, os-release or package list; user 65532 and no shell, as distroless's nonroot",
	}
	l := &im.rootfs
	l.base("nonroot:" + strconv.Itoa(nonroot))
	l.dir("/home", 0o755, 0, 0)
	l.dir("/home/nonroot", 0o700, nonroot, nonroot)
	if _, err := os.Stat(caBundle); err == nil {
		l.copy(caBundle, caBundle, 0, 0)
	}
	im.config = []string{
		"ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"ENV SSL_CERT_FILE=" + caBundle,
		"USER " + strconv.Itoa(nonroot),
		"WORKDIR /home/nonroot",
	}
	return im
}

// A prom describes one of Prometheus's official images, whose Dockerfiles
// (in the modules) the stand-ins follow: busybox, the binaries in /bin,
// the example configuration in /etc/<name>, a data folder that is the
// working directory and a volume, all the nobody user's.
type prom struct {
	name     string   // prometheus
	module   string   // github.com/prometheus/prometheus
	tools    string   // tools/prometheus: the module that pins it
	binaries []string // the commands built from module/cmd/, the first the entrypoint
	tags     []string // build tags besides netgo
	config   string   // the example configuration in the module
	data     string   // /prometheus
	port     int
	cmd      []string
	differs  string
	patch    *patch
}

// image reads the module's release version (its VERSION file: 3.16.0 for
// module v0.316.0) and lays out the image.
func (p prom) image(ctx context.Context, m Machine) (*image, error) {
	out := filepath.Join(m.Out, "bin", p.name)
	b, dir, modVersion, release, err := p.build(ctx, m, out)
	if err != nil {
		return nil, err
	}
	im := &image{
		name: p.name, repo: repoPrefix + p.name, version: "v" + release, pin: "prom/" + p.name + ":v" + release,
		differs: "built from the Go module " + p.module + " " + modVersion + " with the host's " + m.GoVersion + "; " +
			p.differs + "; Debian's static busybox in place of Prometheus's busybox image",
		builds: []goBuild{b},
	}
	l := &im.rootfs
	l.base()
	l.busybox(m)
	for _, c := range p.binaries {
		l.binary("/bin/"+c, filepath.Join(out, c))
	}
	etc := "/etc/" + p.name
	l.dir(etc, 0o755, nobody, nobody)
	l.copy(etc+"/"+filepath.Base(p.config), filepath.Join(dir, p.config), nobody, nobody)
	l.copy("/LICENSE", filepath.Join(dir, "LICENSE"), 0, 0)
	l.copy("/NOTICE", filepath.Join(dir, "NOTICE"), 0, 0)
	l.dir(p.data, 0o775, nobody, nobody)
	entrypoint, _ := json.Marshal([]string{"/bin/" + p.binaries[0]})
	cmd, _ := json.Marshal(p.cmd)
	volume, _ := json.Marshal([]string{p.data})
	im.config = []string{
		"USER nobody",
		"EXPOSE " + strconv.Itoa(p.port),
		"VOLUME " + string(volume),
		"WORKDIR " + p.data,
		"ENTRYPOINT " + string(entrypoint),
		"CMD " + string(cmd),
	}
	return im, nil
}

// build is the Go build of the binaries into out, from the module at the
// version its tool module pins; dir is that module's source, release its
// VERSION file (3.16.0).
func (p prom) build(ctx context.Context, m Machine, out string) (b goBuild, dir, modVersion, release string, err error) {
	dir, modVersion, err = moduleDir(ctx, m, p.tools, p.module)
	if err != nil {
		return b, "", "", "", err
	}
	rel, err := os.ReadFile(filepath.Join(dir, "VERSION"))
	if err != nil {
		return b, "", "", "", fmt.Errorf("standins: %s: %w", p.module, err)
	}
	release = strings.TrimSpace(string(rel))
	b = goBuild{
		module:  p.tools,
		tags:    p.tags,
		ldflags: "-X github.com/prometheus/common/version.Version=" + release + " -X github.com/prometheus/common/version.BuildUser=burnlab-standin",
		out:     out,
		patch:   p.patch,
	}
	for _, c := range p.binaries {
		b.pkgs = append(b.pkgs, p.module+"/cmd/"+c)
	}
	return b, dir, modVersion, release, nil
}

// Tools builds the pinned Prometheus, promtool, Alertmanager and amtool
// for this machine into dir: the builds the stand-in images hold, so the
// native lab, the rule and config checks and compose run one version.
// Go's build cache makes a build with nothing changed take seconds.
func Tools(ctx context.Context, root, goCmd, dir string, log io.Writer) error {
	root, err := filepath.Abs(root)
	if err != nil {
		return fmt.Errorf("standins: %w", err)
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return fmt.Errorf("standins: %w", err)
	}
	// Out holds the patched module copy; no busybox is needed.
	m := Machine{Root: root, Out: filepath.Join(dir, ".standins"), Go: goCmd}
	env, err := output(ctx, "", nil, goCmd, "env", "GOVERSION")
	if err != nil {
		return err
	}
	m.GoVersion = strings.TrimSpace(string(env))
	for _, p := range []prom{prometheus, alertmanager} {
		b, _, modVersion, release, err := p.build(ctx, m, dir)
		if err != nil {
			return err
		}
		fmt.Fprintf(log, "standins: %s %s (module %s): go build %s into %s\n", p.name, release, modVersion, strings.Join(p.binaries, ", "), dir)
		if err := b.run(ctx, m); err != nil {
			return fmt.Errorf("standins: %s: %w", p.name, err)
		}
	}
	return nil
}

var prometheus = prom{
	name: "prometheus", module: "github.com/prometheus/prometheus", tools: "tools/prometheus",
	binaries: []string{"prometheus", "promtool"},
	// Without the service discoveries Prometheus 3.10 and later leave out
	// for this tag (DNS, Consul, Docker and the cloud providers' among
	// them): burnlab scrapes static targets only, and the cloud SDKs were a
	// sixth of the packages the build compiled.
	tags:   []string{"remove_all_sd"},
	config: "documentation/examples/prometheus.yml",
	data:   "/prometheus", port: 9090,
	cmd:     []string{"--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"},
	differs: "no web UI (its React build needs npm): the API, /-/ready and /metrics are Prometheus's own; built with the remove_all_sd tag, so without the service discoveries burnlab does not use, DNS, Consul, Docker and the cloud providers' among them (its targets are static)",
}

// alertmanagerUI is the page Alertmanager's web UI serves in the stand-in.
const alertmanagerUI = "<!doctype html><title>Alertmanager</title>\n" +
	"<p>This Alertmanager stand-in was built from its Go module, which holds no web UI (the release builds it with npm and Elm). " +
	"Its API is at <a href=\"api/v2/status\">api/v2/</a>.\n"

var alertmanager = prom{
	name: "alertmanager", module: "github.com/prometheus/alertmanager", tools: "tools/alertmanager",
	binaries: []string{"alertmanager", "amtool"},
	config:   "examples/ha/alertmanager.yml",
	data:     "/alertmanager", port: 9093,
	cmd:     []string{"--config.file=/etc/alertmanager/alertmanager.yml", "--storage.path=/alertmanager"},
	differs: "no web UI: ui/app/dist, which the module lacks and ui/web.go embeds, holds a placeholder page (no Go file changes); the API and /-/ready are Alertmanager's own",
	patch: &patch{module: "github.com/prometheus/alertmanager", add: map[string]string{
		// ui/web.go serves the release build's compressed HTML only.
		"ui/app/dist/elm/index.html.gz":     alertmanagerUI,
		"ui/app/dist/mantine/index.html.gz": alertmanagerUI,
	}},
}
