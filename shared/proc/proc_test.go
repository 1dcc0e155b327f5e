package proc

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"burnlab/shared/freeport"
)

// The test binary is also the process the tests start: PROC_TEST_ROLE
// says what it plays.
func TestMain(m *testing.M) {
	switch os.Getenv("PROC_TEST_ROLE") {
	case "serve": // starts a child of its own (PROC_TEST_CHILD), then answers 200 at PROC_TEST_ADDR
		child := exec.Command(os.Args[0])
		child.Env = append(os.Environ(), "PROC_TEST_ROLE="+cmp.Or(os.Getenv("PROC_TEST_CHILD"), "sleep"))
		if err := child.Start(); err != nil {
			os.Exit(4)
		}
		_ = http.ListenAndServe(os.Getenv("PROC_TEST_ADDR"), http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		os.Exit(3)
	case "exit": // says why and exits
		println("no config")
		os.Exit(2)
	case "sleep":
		time.Sleep(time.Hour)
	case "stubborn": // ignores SIGTERM and never serves
		signal.Ignore(syscall.SIGTERM)
		println("ignoring SIGTERM")
		time.Sleep(time.Hour)
	default:
		os.Exit(m.Run())
	}
}

func spec(t *testing.T, role string) Spec {
	addr := freeport.ForTest(t)
	return Spec{Name: role, Args: []string{os.Args[0]}, Log: filepath.Join(t.TempDir(), role+".log"),
		Env: []string{"PROC_TEST_ROLE=" + role, "PROC_TEST_ADDR=" + addr}, Ready: "http://" + addr + "/"}
}

// gone says whether no process of the group is left within 5 s: a
// process killed with its parent is a zombie until init reaps it.
func gone(pgid int) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) {
			return true
		}
	}
	return false
}

func TestStartWaitsUntilReadyAndStopEndsTheGroup(t *testing.T) {
	p, err := Start(context.Background(), spec(t, "serve"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Alive(); err != nil {
		t.Fatal(err)
	}
	p.Stop(5 * time.Second)
	select {
	case <-p.Done():
	default:
		t.Fatal("Stop returned with the process running")
	}
	if !gone(p.Pid()) {
		t.Fatal("the process group (the child the process started) outlived Stop")
	}
	if err := p.Alive(); err == nil {
		t.Fatal("Alive says a stopped process runs")
	}
}

func TestStopEndsAChildThatOutlivesItsParent(t *testing.T) {
	s := spec(t, "serve")
	s.Env = append(s.Env, "PROC_TEST_CHILD=stubborn")
	p, err := Start(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	p.Stop(5 * time.Second) // the parent exits on SIGTERM at once
	if !gone(p.Pid()) {
		t.Fatal("the child that ignores SIGTERM outlived Stop")
	}
}

func TestKillIsSIGKILL(t *testing.T) {
	s := spec(t, "stubborn")
	s.Ready = ""
	p, err := Start(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p.Kill()
	if d := time.Since(start); d > 2*time.Second || !gone(p.Pid()) {
		t.Fatalf("Kill took %s; the group gone: %v", d, gone(p.Pid()))
	}
}

func TestAProcessThatExitsFirstIsAnErrorWithItsLog(t *testing.T) {
	s := spec(t, "exit")
	_, err := Start(context.Background(), s)
	if err == nil || !strings.Contains(err.Error(), "exited before it was ready") || !strings.Contains(err.Error(), "no config") {
		t.Fatalf("err = %v, want the exit and the log's last lines", err)
	}
}

func TestNotReadyInTimeIsStoppedEvenIfItIgnoresSIGTERM(t *testing.T) {
	// The process ignores SIGTERM from its first instruction: it inherits
	// SIG_IGN from this one, as exec keeps an ignored signal ignored, and
	// a shell and sleep keep it (a Go child would install its own
	// handler). The stubborn role ignores SIGTERM only once it runs, and
	// on a busy machine the ready timeout could end first: SIGTERM then
	// stopped it at once, and this test failed by chance.
	signal.Ignore(syscall.SIGTERM)
	defer signal.Reset(syscall.SIGTERM)
	s := spec(t, "stubborn")
	s.Args = []string{"/bin/sh", "-c", "exec sleep 3600"}
	s.ReadyTimeout = 300 * time.Millisecond
	start := time.Now()
	_, err := Start(context.Background(), s)
	if err == nil || !strings.Contains(err.Error(), "not ready") {
		t.Fatalf("err = %v, want not ready", err)
	}
	// Start stopped it: SIGTERM was ignored, so SIGKILL after the grace.
	if d := time.Since(start); d < 5*time.Second {
		t.Fatalf("Start returned after %s, before the SIGTERM grace ended", d)
	}
}

func TestACanceledContextStopsTheProcess(t *testing.T) {
	s := spec(t, "stubborn")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := Start(ctx, s); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's", err)
	}
}

func TestStartWithoutReadyReturnsAtOnce(t *testing.T) {
	s := spec(t, "stubborn")
	s.Ready = ""
	p, err := Start(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	p.Stop(100 * time.Millisecond)
	if !gone(p.Pid()) {
		t.Fatal("SIGKILL after the grace did not end it")
	}
}

func TestBadSpecsAreErrors(t *testing.T) {
	if _, err := Start(context.Background(), Spec{Name: "x", Log: filepath.Join(t.TempDir(), "x.log")}); err == nil {
		t.Fatal("no program: want an error")
	}
	if _, err := Start(context.Background(), Spec{Name: "x", Args: []string{"/nonexistent/x"}, Log: filepath.Join(t.TempDir(), "x.log")}); err == nil {
		t.Fatal("missing program: want an error")
	}
	if _, err := Start(context.Background(), Spec{Name: "x", Args: []string{os.Args[0]}, Log: filepath.Join(t.TempDir(), "no", "x.log")}); err == nil {
		t.Fatal("log in a missing directory: want an error")
	}
}

func TestBuildReportsGosOutput(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module x\n\ngo 1.26\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "bad.go"), []byte("//go:build broken\n\npackage main\n\nvar x int = \"s\"\n"), 0o644)
	b := Build{Dir: dir, Out: filepath.Join(dir, "x"), Pkgs: []string{"."}, Env: []string{"GOWORK=off"}}
	if err := b.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(b.Out); err != nil {
		t.Fatal(err)
	}
	b.Tags = "broken"
	err := b.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "bad.go") {
		t.Fatalf("err = %v, want go's message naming bad.go", err)
	}
}
