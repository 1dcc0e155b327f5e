package freeport

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// Ports come from below the ephemeral range, are never given twice while
// held, and are held against any other picker (a flock conflicts between
// two opens of one file even in one process, as between processes).
func TestPicksHeldPortsBelowTheEphemeralRange(t *testing.T) {
	lo, err := ephemeralStart()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var held []Port
	for range 200 {
		p, err := Pick()
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, p)
		if seen[p.Addr] {
			t.Fatalf("%s given twice while held", p.Addr)
		}
		seen[p.Addr] = true
		_, ps, _ := net.SplitHostPort(p.Addr)
		port, _ := strconv.Atoi(ps)
		if port >= lo || port < max(1024, lo-span) {
			t.Fatalf("port %d is outside %d..%d", port, max(1024, lo-span), lo-1)
		}
		ln, err := net.Listen("tcp", p.Addr)
		if err != nil {
			t.Fatalf("a picked port cannot be bound: %v", err)
		}
		ln.Close()
	}
	for _, p := range held {
		_, ps, _ := net.SplitHostPort(p.Addr)
		f, err := os.OpenFile(filepath.Join(lockDir(), ps), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			t.Fatalf("%s is held, yet its lock could be taken", p.Addr)
		}
		f.Close()
		p.Release()
	}
}

// A port something else listens on is passed by, even with its lock free.
func TestPassesByABoundPort(t *testing.T) {
	lo, err := ephemeralStart()
	if err != nil {
		t.Fatal(err)
	}
	// Pick cannot be aimed at one port, so a fifth of its range is bound
	// and none of those may ever be picked. Each is bound only under its
	// lock, so no port another test holds is taken from it, and bound
	// with the lock let go, as by a process that is not burnlab's.
	dir := lockDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	bound := map[string]bool{}
	for port := max(1024, lo-span); port < lo && len(bound) < 2000; port += 5 {
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close()
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		f.Close()
		if err != nil {
			continue
		}
		defer ln.Close()
		bound[ln.Addr().String()] = true
	}
	if len(bound) < 1000 {
		t.Fatalf("only %d ports could be bound to test with", len(bound))
	}
	for range 500 {
		p, err := Pick()
		if err != nil {
			t.Fatal(err)
		}
		defer p.Release()
		if bound[p.Addr] {
			t.Fatalf("picked %s, which a listener holds", p.Addr)
		}
	}
}
