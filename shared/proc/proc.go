// Package proc is the process kit of burnlab's tests and tools: it builds
// the project's Go binaries and runs real processes, each in a process
// group of its own, logging to a file, waited on until ready, stopped with
// its children, and tailed when it fails. The native lab, the proxy
// benchmark, the browser test, and the compose and Kubernetes checks use
// it, so a process is started, and a binary built, one way everywhere.
package proc

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"burnlab/shared/service"
)

// A Build is one `go build -trimpath`. -trimpath because the Makefile
// builds with it too: the build cache then serves both.
type Build struct {
	Dir  string   // where go runs: the module, or the workspace root
	Out  string   // the binary; a directory ending in "/" for several packages
	Pkgs []string // the packages, relative to Dir (./gateway/cmd/gateway)
	Tags string   // build tags, comma-separated; "" for none
	Env  []string // added to the environment, e.g. GOWORK=off for a module out of go.work
}

// Run builds, with go's own output in the error.
func (b Build) Run(ctx context.Context) error {
	args := []string{"build", "-trimpath", "-o", b.Out}
	if b.Tags != "" {
		args = append(args, "-tags", b.Tags)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, b.Pkgs...)...)
	cmd.Dir = b.Dir
	if len(b.Env) > 0 {
		cmd.Env = append(os.Environ(), b.Env...)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %w\n%s", strings.Join(b.Pkgs, " "), err, out)
	}
	return nil
}

// A Spec is a process to start.
type Spec struct {
	Name string   // for errors
	Args []string // the program and its arguments
	Log  string   // its stdout and stderr are appended here
	Env  []string // added to the environment
	// Ready is a URL that answers 200 once the process serves; "" starts
	// it without waiting.
	Ready        string
	ReadyTimeout time.Duration // 60 s when zero
}

// A Proc is a started process.
type Proc struct {
	name, log string
	cmd       *exec.Cmd
	done      chan struct{}
}

// Start runs the process in a new process group and waits until it is
// ready. When it exits first, the context ends or it is not ready in time,
// Start stops it and says why, with the end of its log.
func Start(ctx context.Context, s Spec) (*Proc, error) {
	if len(s.Args) == 0 {
		return nil, fmt.Errorf("starting %s: no program", s.Name)
	}
	f, err := os.OpenFile(s.Log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", s.Name, err)
	}
	cmd := exec.Command(s.Args[0], s.Args[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	if len(s.Env) > 0 {
		cmd.Env = append(os.Environ(), s.Env...)
	}
	// Its own process group, so Stop reaches its children too (nginx's
	// workers); and a SIGTERM should the parent die without stopping it,
	// so a killed run leaves nothing behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", s.Name, err)
	}
	p := &Proc{name: s.Name, log: s.Log, cmd: cmd, done: make(chan struct{})}
	// Its exit status is in its log; the caller only needs to know it ended.
	go func() { _ = cmd.Wait(); f.Close(); close(p.done) }()
	if s.Ready == "" {
		return p, nil
	}
	if err := p.waitReady(ctx, s.Ready, cmp.Or(s.ReadyTimeout, 60*time.Second)); err != nil {
		p.Stop(5 * time.Second)
		return nil, err
	}
	return p, nil
}

func (p *Proc) waitReady(ctx context.Context, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before it was ready:\n%s", p.name, p.Tail(20))
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", p.name, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
		probe, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := service.Probe(probe, url)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready at %s after %s (%v):\n%s", p.name, url, timeout, err, p.Tail(20))
		}
	}
}

// Pid is the process's ID, which is also its group's.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Alive is an error, with the end of its log, once the process has exited.
func (p *Proc) Alive() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited:\n%s", p.name, p.Tail(20))
	default:
		return nil
	}
}

// Stop ends the process's whole group: SIGTERM, then SIGKILL after grace.
// It returns once the process has exited; a child of it that outlived it
// (one that ignores SIGTERM) is killed then.
func (p *Proc) Stop(grace time.Duration) {
	// ESRCH, the only error a kill of our own child's group can give,
	// means no process of it is left.
	_ = syscall.Kill(-p.Pid(), syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
	}
	p.Kill()
}

// Kill is kill -9 of the whole group, for a test of what survives a crash:
// no drain, no deferred Close. It returns once the process has exited.
func (p *Proc) Kill() {
	_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	<-p.done
}

// Tail is the last n lines of the process's log.
func (p *Proc) Tail(n int) string { return Tail(p.log, n) }

// Tail is the last n lines of a log file.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
