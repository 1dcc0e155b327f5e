package benchproxy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"burnlab/shared/proc"
)

// groupCPU is the CPU time a process group has used so far: the sum over its
// processes and their threads of the scheduler's run time (nanoseconds,
// /proc/<pid>/task/<tid>/schedstat), which is what utime+stime are scaled
// from, without their 10 ms ticks: a short smoke run's proxy uses less than
// one tick.
func groupCPU(p *proc.Proc) (time.Duration, error) {
	pids, err := groupPIDs(p.Pid())
	if err != nil {
		return 0, err
	}
	var total time.Duration
	for _, pid := range pids {
		d, err := processCPU(pid)
		if err != nil {
			return 0, fmt.Errorf("process group %d: %w", p.Pid(), err)
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
