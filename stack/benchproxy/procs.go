package benchproxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is one server process, in its own process group: nginx's workers
// are its master's children, and the group is what the CPU figure sums and
// what stop kills.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// startProc runs args in a new process group, logging to logs/<name>.log
// under dir, and waits until ready answers 200.
func startProc(ctx context.Context, dir, name string, args []string, ready string) (*proc, error) {
	logPath := filepath.Join(dir, "logs", name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	// A SIGTERM should the benchmark die without stopping it, so a killed
	// run leaves no server behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), log: logPath}
	// Its exit status is in its log; the benchmark only needs to know it ended.
	go func() { _ = cmd.Wait(); f.Close(); close(p.done) }()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-p.done:
			return nil, fmt.Errorf("%s exited before it was ready:\n%s", name, p.tail(20))
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if resp, err := client.Get(ready); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("%s not ready at %s after 30 s:\n%s", name, ready, p.tail(20))
		}
	}
}

// stop ends the process's whole group: SIGTERM, then SIGKILL.
func (p *proc) stop() {
	// ESRCH, the only error a kill of our own child's group can give,
	// means it has already exited.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// alive reports an error when the process has exited.
func (p *proc) alive() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited:\n%s", p.name, p.tail(20))
	default:
		return nil
	}
}

func (p *proc) tail(n int) string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// cpu is the CPU time the process group has used so far: the sum over its
// processes and their threads of the scheduler's run time (nanoseconds,
// /proc/<pid>/task/<tid>/schedstat), which is what utime+stime are scaled
// from, without their 10 ms ticks: a short smoke run's proxy uses less than
// one tick.
func (p *proc) cpu() (time.Duration, error) {
	pids, err := groupPIDs(p.cmd.Process.Pid)
	if err != nil {
		return 0, err
	}
	var total time.Duration
	for _, pid := range pids {
		d, err := processCPU(pid)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", p.name, err)
		}
		total += d
	}
	return total, nil
}

// groupPIDs lists the processes whose process group is pgid.
func groupPIDs(pgid int) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("reading /proc: %w", err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := statFields(pid)
		if err != nil {
			continue // it exited meanwhile
		}
		if g, _ := strconv.Atoi(f[2]); g == pgid {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("no process in group %d", pgid)
	}
	return pids, nil
}

// statFields are /proc/<pid>/stat's fields after the command name (which
// may hold spaces): state, ppid, pgrp, … utime is [11], stime [12].
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return nil, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	return f, nil
}

// processCPU sums the run time of a process's threads; on a kernel without
// schedstat it falls back to utime+stime in ticks (USER_HZ is 100 on every
// Linux architecture Go supports).
func processCPU(pid int) (time.Duration, error) {
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return 0, fmt.Errorf("threads of %d: %w", pid, err)
	}
	var total time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "task", t.Name(), "schedstat"))
		if errors.Is(err, os.ErrNotExist) {
			if _, serr := os.Stat(filepath.Join("/proc", strconv.Itoa(pid), "task", t.Name())); serr == nil {
				return ticksCPU(pid) // no schedstat on this kernel
			}
			continue // the thread exited meanwhile
		}
		if err != nil {
			return 0, err
		}
		ns, err := strconv.ParseInt(strings.Fields(string(b) + " x")[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("schedstat of %d/%s: %w", pid, t.Name(), err)
		}
		total += time.Duration(ns)
	}
	return total, nil
}

func ticksCPU(pid int) (time.Duration, error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(u+s) * 10 * time.Millisecond, nil
}
