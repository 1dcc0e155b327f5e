// Package freeport picks loopback ports for servers that a test or a
// benchmark starts in another process: the server binds the port itself,
// later, so no listener can be handed over.
//
// The usual way, net.Listen on port 0 and Close, leaves the port to chance
// until the server binds it. The kernel takes both those ports and the
// local ports of outgoing connections from one ephemeral range, and
// burnlab's tests make thousands of connections beside each other: CI once
// lost a gateway's admin port to one of them. So Pick takes a port below
// the ephemeral range, where neither outgoing connections nor port-0
// listeners land, and holds a lock file on it, so that burnlab's other test
// processes, which pick the same way, pass it by until it is released.
// The lock files stay behind, one empty file per port ever picked: removing
// a file another process may be locking would let two processes lock two
// files of one name.
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// span is how many ports below the ephemeral range Pick chooses from: far
// more than burnlab ever holds at once, and above the fixed ports compose
// publishes.
const span = 10000

// Port is a picked loopback port, reserved until Release.
type Port struct {
	Addr string // 127.0.0.1:port
	lock *os.File
}

// Release lets other processes pick the port again. The server using it
// should have stopped.
func (p Port) Release() {
	if p.lock != nil {
		p.lock.Close() // closing the file drops its lock
	}
}

// Pick reserves an unused loopback port.
func Pick() (Port, error) {
	lo, err := ephemeralStart()
	if err != nil {
		return Port{}, err
	}
	first := max(1024, lo-span)
	dir := lockDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Port{}, fmt.Errorf("free port: %w", err)
	}
	n := lo - first
	start := rand.IntN(n)
	for i := range n {
		port := first + (start+i)%n
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return Port{}, fmt.Errorf("free port: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				continue // another burnlab process holds it
			}
			return Port{}, fmt.Errorf("free port: lock %d: %w", port, err)
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			f.Close() // something else serves there
			continue
		}
		ln.Close()
		return Port{Addr: addr, lock: f}, nil
	}
	return Port{}, fmt.Errorf("free port: all %d ports from %d to %d are taken", n, first, lo-1)
}

// TB is the part of testing.TB that ForTest uses. The package does not
// import testing: bench-proxy links it into a command.
type TB interface {
	Helper()
	Fatal(args ...any)
	Cleanup(func())
}

// ForTest picks a port for a test, released when the test ends, and fails
// the test when there is none.
func ForTest(tb TB) string {
	tb.Helper()
	p, err := Pick()
	if err != nil {
		tb.Fatal(err)
		return "" // for a TB whose Fatal returns
	}
	tb.Cleanup(p.Release)
	return p.Addr
}

// lockDir holds the lock files, one directory per user, whom another
// user's files would lock out.
func lockDir() string {
	return filepath.Join(os.TempDir(), "burnlab-ports-"+strconv.Itoa(os.Getuid()))
}

// ephemeralStart is the first port of Linux's ephemeral range, or the
// range's default where the file cannot be read (another system).
func ephemeralStart() (int, error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if errors.Is(err, os.ErrNotExist) {
		return 32768, nil
	}
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, fmt.Errorf("free port: ip_local_port_range %q: want two port numbers", b)
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo <= 1024 {
		return 0, fmt.Errorf("free port: ip_local_port_range %q: want two port numbers, the first above 1024", b)
	}
	return lo, nil
}
