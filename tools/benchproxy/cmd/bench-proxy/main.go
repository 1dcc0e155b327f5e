// Command bench-proxy runs the side-by-side proxy benchmark (`make
// bench-proxy`): the same 10k-event SSE streams straight to an upstream,
// through a bare httputil.ReverseProxy, nginx, and the fixed and baseline
// gateways, each in its own process on loopback, and prints one table of
// CPU per stream, streams per second and p50/p99 stream time, each beside
// its ratio to the ReverseProxy, the heap per in-flight stream, and what
// each target adds to the first event and to the gaps between events.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"burnlab/shared/results"
	"burnlab/shared/service"
	"burnlab/tools/benchproxy"
)

func main() {
	service.Main("bench-proxy", func(ctx context.Context, args []string) error { return run(ctx, args, os.Stdout, os.Stderr) })
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench-proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	streams := fs.Int("streams", 500, "measured streams per row")
	baseline := fs.Int("baseline-streams", 8, "measured streams per row of the baseline gateway (each takes seconds)")
	events := fs.Int("events", 10000, "content events per stream")
	conc := fs.String("concurrency", "1,8", "comma-separated concurrencies: a row per target and concurrency")
	rounds := fs.Int("rounds", 5, "measure each row in this many turns, taken in turn with the other rows', so the machine's drift falls on every row alike")
	targets := fs.String("targets", strings.Join(benchproxy.AllTargets(), ","), "comma-separated targets")
	memStreams := fs.Int("mem-streams", 200, "streams held open at once to measure each Go proxy's heap per stream (0: skip)")
	memEvents := fs.Int("mem-events", 200, "events each held stream has received when the heap is read")
	latStreams := fs.Int("latency-streams", 200, "paced streams sent one at a time through each target to time its first event and the gaps between events (0: skip)")
	latEvents := fs.Int("latency-events", 100, "events per latency stream")
	latPace := fs.Int("latency-pace-ms", 1, "ms the upstream waits between a latency stream's events, 0 for none: at 1 ms each event is a read of its own at the client on a quiet machine, and what a proxy holds until the next event shows as a first-event delay that grows with the pace")
	previous := fs.String("previous", "", "a git revision whose fixed gateway gets rows too, built from that revision's tree in this run (make bench-proxy: the gateway before its last change)")
	seed := fs.Uint64("seed", 1, "seed of the streams' tokens")
	out := fs.String("o", "", "also write the report as JSON to this file")
	save := fs.String("save", "", "also write the run as a result file, Markdown with its revision, date and machine (make bench-proxy SAVE=1: docs/results/bench-proxy.md)")
	root := fs.String("root", ".", "the repository (the binaries are built from it)")
	from := fs.String("from", "", "run nothing: print the table of a report saved with -o")
	if err := service.Parse(fs, args, nil); err != nil {
		return err
	}
	if *from != "" {
		return printSaved(stdout, *from)
	}
	var cs []int
	for _, f := range strings.Split(*conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("-concurrency %q: %w", *conc, err)
		}
		cs = append(cs, n)
	}
	abs, err := filepath.Abs(*root)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(abs, "go.work")); err != nil {
		return errors.New("run bench-proxy from the repository root (make bench-proxy), or give -root")
	}
	rep, runErr := benchproxy.Run(ctx, benchproxy.Config{
		Root: abs, Targets: strings.Split(*targets, ","), Events: *events, Streams: *streams, BaselineStreams: *baseline,
		Concurrency: cs, Rounds: *rounds, MemStreams: *memStreams, MemEvents: *memEvents,
		LatencyStreams: *latStreams, LatencyEvents: *latEvents, LatencyPaceMS: *latPace, Previous: *previous, Seed: *seed, Log: stderr,
	})
	if rep == nil {
		return runErr
	}
	fmt.Fprintln(stdout)
	var table strings.Builder
	if err := benchproxy.WriteTable(io.MultiWriter(stdout, &table), rep); err != nil {
		return errors.Join(runErr, err)
	}
	if *save != "" && runErr == nil {
		var set []string
		fs.Visit(func(f *flag.Flag) {
			if f.Name != "save" {
				set = append(set, "-"+f.Name+" "+f.Value.String())
			}
		})
		if err := saveRun(*save, abs, rep, table.String(), set); err != nil {
			return err
		}
	}
	if *out != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return errors.Join(runErr, err)
		}
		if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
			return errors.Join(runErr, fmt.Errorf("-o: %w", err))
		}
	}
	return runErr
}

// saveRun writes the run's table as a result file (shared/results).
func saveRun(path, root string, rep *benchproxy.Report, table string, flags []string) error {
	m := rep.Machine
	facts := []string{m.Kernel, "load average " + m.Load + " at the start"}
	if m.Nginx != "" {
		facts = append(facts, m.Nginx)
	}
	set := "none: the defaults"
	if len(flags) > 0 {
		set = "`" + strings.Join(flags, " ") + "`"
	}
	if err := results.Write(path, results.Run{
		Title: "The proxy benchmark", By: "`make bench-proxy SAVE=1` (tools/benchproxy/cmd/bench-proxy)",
		Root: root, Date: rep.Started, Machine: facts,
		Notes: []string{"flags: " + set,
			"ratios (×RP) are to the bare httputil.ReverseProxy in the same run; compare ratios, not seconds, across runs and machines"},
		Body: table,
	}); err != nil {
		return fmt.Errorf("-save: %w", err)
	}
	return nil
}

// printSaved prints the table of a report saved with -o, so a run's table
// can be shown again (in another layout, say) without running it again.
func printSaved(stdout io.Writer, path string) error {
	b, err := os.ReadFile(path) //nolint:gosec // G304: the user's own -from file
	if err != nil {
		return fmt.Errorf("-from: %w", err)
	}
	var rep benchproxy.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("-from %s: %w", path, err)
	}
	return benchproxy.WriteTable(stdout, &rep)
}
