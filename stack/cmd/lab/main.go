// Command lab runs burnlab natively — the compose stack as local processes
// with real Prometheus and Alertmanager on 127.0.0.1 — and switches its
// gateway build while it runs.
//
//	lab up       [-variant baseline|fixed] [-windows lab|production]
//	lab switch   -variant fixed
//	lab scenario -name upstream-tail   (the lab's or compose's stack; no name lists them)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"burnlab/shared/scenario"
	"burnlab/shared/service"
	"burnlab/shared/variant"
	"burnlab/stack/lab"
)

var envs = map[string]string{"variant": "GATEWAY_TAG", "windows": "SLO_WINDOWS", "control": "LAB_CONTROL", "compose": "COMPOSE"}

func main() {
	service.Main("lab", func(ctx context.Context, args []string) error { return run(ctx, args, os.Stdout) })
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: lab up|switch|scenario [flags]")
	}
	fs := flag.NewFlagSet("lab "+args[0], flag.ContinueOnError)
	build := fs.String("variant", string(variant.Baseline), "gateway build: baseline or fixed")
	windows := fs.String("windows", "lab", "SLO rule set: lab or production")
	dir := fs.String("dir", ".lab", "binaries, rendered configs, data and logs")
	shape := fs.String("shape", "", "traffic shape file (default <dir>/shape.json; calibrated when missing)")
	control := fs.String("control", lab.DefaultControl, "address where a running lab takes `lab switch`")
	stack := lab.DefaultStack()
	name := fs.String("name", "", "scenario: the one to put in place (none clears the fault; empty lists them)")
	fs.StringVar(&stack.Upstream, "upstream", stack.Upstream, "scenario: the upstream's address, where the fault is set")
	fs.StringVar(&stack.GatewayAdmin, "gateway-admin", stack.GatewayAdmin, "scenario: the gateway's admin address, where its build is read")
	fs.Float64Var(&stack.Share, "share", 0, "scenario: run a one-step fault at this share of streams instead of the table's (e.g. 0.03)")
	compose := fs.String("compose", strings.Join(stack.Compose, " "), "scenario: the compose command that switches the gateway when no lab answers at -control")
	service.Usage(fs, envs, "lab up: run the stack natively; lab switch: change a running lab's gateway build;\nlab scenario: inject a fault scenario into the running lab or compose stack\n\nFlags:\n")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if err := service.Env(fs, envs); err != nil {
		return err
	}
	switch args[0] {
	case "up":
		return up(ctx, stdout, *build, *windows, *dir, *shape, *control)
	case "scenario":
		stack.Control, stack.Compose, stack.Out = *control, strings.Fields(*compose), stdout
		if *name == "" {
			listScenarios(stdout)
			return nil
		}
		return lab.ApplyScenario(ctx, *name, stack)
	case "switch":
		resp, err := http.Post("http://"+*control+"/switch?variant="+*build, "", nil)
		if err != nil {
			return fmt.Errorf("no running lab at %s (start one with `make lab`): %w", *control, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			return fmt.Errorf("switch: %s", b)
		}
		fmt.Fprintf(stdout, "%s", b)
		return nil
	}
	return fmt.Errorf("unknown command %q: want up, switch or scenario", args[0])
}

func listScenarios(w io.Writer) {
	fmt.Fprintln(w, "scenarios (make scenario S=<name>; S=none clears the fault):")
	for _, sc := range scenario.All() {
		fmt.Fprintf(w, "  %-17s %-8s %s → fires %s\n", sc.Name, sc.Build, sc.What, sc.Expected())
	}
}

func up(ctx context.Context, stdout io.Writer, build, windows, dir, shape, control string) error {
	v, err := variant.Parse(build)
	if err != nil {
		return err
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(root, "go.work")); err != nil {
		return errors.New("run the lab from the repository root (make lab)")
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return err
	}
	// Each run starts with empty Prometheus, Alertmanager and pager data;
	// the calibrated shape and the binaries are kept.
	for _, d := range []string{"data", "logs"} {
		os.RemoveAll(filepath.Join(dir, d))
	}
	l, err := lab.Start(ctx, lab.Config{Root: root, Dir: dir, Variant: v, Windows: windows, Shape: shape, Log: stdout})
	if err != nil {
		return err
	}
	defer l.Stop()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /switch", func(w http.ResponseWriter, r *http.Request) {
		v, err := variant.Parse(r.URL.Query().Get("variant"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := l.Switch(r.Context(), v); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		// Plain text, and v is a variant Parse accepted: nothing to escape.
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "gateway is now the %s build\n", v) //nolint:gosec // G705: see above
	})
	srv := &http.Server{Addr: control, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(stdout, "lab: the switch control on %s stopped: %v (make lab-switch will not reach it)\n", control, err)
		}
	}()
	defer srv.Close()
	fmt.Fprintf(stdout, "\nburnlab is up (gateway: %s build, %s SLO windows). Ctrl-C stops everything.\n", v, windows)
	for _, u := range l.URLs() {
		fmt.Fprintf(stdout, "  %-16s %s\n", u[0], u[1])
	}
	fmt.Fprintf(stdout, "  %-16s make lab-switch GATEWAY_TAG=fixed\n  %-16s %s/logs/\n", "switch", "logs", dir)
	<-ctx.Done()
	fmt.Fprintln(stdout, "\nstopping every process…")
	return nil
}
