// Command slo-burn-demo is the write-up's standalone repro: the same seeded
// long-generation streams through the baseline and the fixed transcript
// parsers, with p50, p99, SLO breach rate, burn rate and allocation per phase.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"burnlab/gateway/internal/repro"
	"burnlab/shared/service"
)

func main() {
	service.Main("slo-burn-demo", func(ctx context.Context, args []string) error { return run(ctx, args, os.Stdout, os.Stderr) })
}

const usage = `slo-burn-demo replays the same synthetic long-generation streams through the
write-up's baseline parser (regexp + string +=) and its fix (HasPrefix +
strings.Builder), and reports p50, p99, SLO breach rate (600 ms), burn rate
(0.1%% budget) and allocation per phase.

By default the traffic is calibrated to this machine, as the lab's is: the
write-up's "1 %" is one long generation in 100, so before the phases the demo
times the baseline parser, fits its cost (it grows with events²), and makes
the last stream of every -long-every a long generation that takes about
2.5x the 600 ms threshold in the baseline; the others are ordinary streams
that take 30 %–75 % of it (-ordinary-min to -ordinary-max events, when
set), so the baseline's p50 is about half the threshold, as the write-up's
293 ms is. Then 1 stream in 100 breaches, as in the write-up, on a machine
of any speed. -calibrate=false replays the
write-up's own traffic (100 streams of -events-min to -events-max events):
on a 2-core machine a baseline stream costs ~10–28 ns × events² (1–3 s each
at 10k events, so every one breaches), and -phase-budget stops starting
baseline streams after 80 s; the fixed phase then replays exactly the
streams the baseline finished. -profile-only always profiles the write-up's
traffic.

Profile the way the write-up did:
  slo-burn-demo -profile-only -workers=1 -memprofile=baseline.pprof
  go tool pprof -top -sample_index=alloc_space baseline.pprof

Flags:
`

type options struct {
	workers, streams, eventsMin, eventsMax int
	longEvery, ordinaryMin, ordinaryMax    int
	seed                                   uint64
	profileOnly, asJSON, calibrate         bool
	phase, memprofile, cpuprofile          string
	profileFor, phaseBudget                time.Duration
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("slo-burn-demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	fs.IntVar(&o.workers, "workers", 1, "streams parsed concurrently (profile with 1: a clean signal)")
	fs.IntVar(&o.streams, "streams", 100, "streams per phase")
	fs.IntVar(&o.eventsMin, "events-min", 8000, "fewest events in a stream of the write-up's traffic (-calibrate=false, -profile-only)")
	fs.IntVar(&o.eventsMax, "events-max", 12000, "most events in a stream of the write-up's traffic (-calibrate=false, -profile-only)")
	fs.BoolVar(&o.calibrate, "calibrate", true, "fit one long generation in -long-every to take 2.5x the threshold in the baseline on this machine (false: the write-up's uniform traffic)")
	fs.IntVar(&o.longEvery, "long-every", 100, "with -calibrate, the last stream of every this many is a long generation")
	fs.IntVar(&o.ordinaryMin, "ordinary-min", 0, "with -calibrate, fewest events in an ordinary stream (0: as many as take 30 % of the threshold in the baseline)")
	fs.IntVar(&o.ordinaryMax, "ordinary-max", 0, "with -calibrate, most events in an ordinary stream (0: as many as take 75 % of the threshold in the baseline)")
	fs.Uint64Var(&o.seed, "seed", 1, "traffic seed; the same seed replays the same streams")
	fs.StringVar(&o.phase, "phase", "", "run only this phase: baseline or fixed (default both; baseline with -profile-only)")
	fs.BoolVar(&o.profileOnly, "profile-only", false, "no report: keep one phase under steady load for -profile-seconds, then write the profiles")
	fs.DurationVar(&o.profileFor, "profile-seconds", 25*time.Second, "steady-load time before -memprofile is written (with -profile-only)")
	fs.StringVar(&o.memprofile, "memprofile", "", "write an alloc_space heap profile to this file")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the run to this file")
	fs.DurationVar(&o.phaseBudget, "phase-budget", 80*time.Second, "stop starting new streams in a phase after this long (0: no limit)")
	fs.BoolVar(&o.asJSON, "json", false, "print one JSON object per phase (name, p50_ms, p99_ms, breach_rate, burn_rate, alloc_bytes)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.profileOnly && o.memprofile == "" && o.cpuprofile == "" {
		return o, errors.New("-profile-only needs -memprofile or -cpuprofile")
	}
	if o.calibrate && o.longEvery < 1 {
		return o, fmt.Errorf("-long-every must be at least 1, got %d", o.longEvery)
	}
	if o.ordinaryMin < 0 || o.ordinaryMax < 0 {
		return o, fmt.Errorf("-ordinary-min and -ordinary-max must not be negative, got %d and %d", o.ordinaryMin, o.ordinaryMax)
	}
	if o.profileFor <= 0 {
		return o, fmt.Errorf("-profile-seconds must be positive, got %s", o.profileFor)
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	traffic := repro.Traffic{Streams: o.streams, EventsMin: o.eventsMin, EventsMax: o.eventsMax, Seed: o.seed}
	if err := traffic.Validate(); err != nil {
		return err
	}
	phases := repro.Phases
	if o.phase == "" && o.profileOnly {
		o.phase = "baseline"
	}
	if o.phase != "" {
		p, err := repro.PhaseByName(o.phase)
		if err != nil {
			return err
		}
		phases = []repro.Phase{p}
	}
	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	fmt.Fprintln(stderr, "slo-burn-demo:", repro.Environment(o.workers))
	if o.calibrate && !o.profileOnly {
		baseline, _ := repro.PhaseByName("baseline")
		cost, err := repro.Calibrate(ctx, baseline, o.seed)
		if err != nil {
			return err
		}
		traffic.EventsMin, traffic.EventsMax = cmp.Or(o.ordinaryMin, cost.Events(repro.OrdinaryFastest)), cmp.Or(o.ordinaryMax, cost.Events(repro.OrdinarySlowest))
		traffic.LongEvery, traffic.LongEvents = o.longEvery, cost.Events(repro.LongTarget)
		if err := traffic.Validate(); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "slo-burn-demo: calibrated: the baseline takes %.1f ns × events² here; 1 stream in %d is a long generation of %d events (about %s), the others %d–%d events (%s–%s when unset)\n",
			cost.NSPerEvent2, o.longEvery, traffic.LongEvents, repro.LongTarget, traffic.EventsMin, traffic.EventsMax, repro.OrdinaryFastest, repro.OrdinarySlowest)
	}

	if o.profileOnly {
		soakCtx, cancel := context.WithTimeout(ctx, o.profileFor)
		defer cancel()
		n, err := repro.Soak(soakCtx, phases[0], traffic, o.workers)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "slo-burn-demo: %s parsed %d streams in %s\n", phases[0].Name, n, o.profileFor)
		return writeHeapProfile(o.memprofile)
	}

	var results []repro.Result
	for _, p := range phases {
		phaseCtx, cancel := ctx, context.CancelFunc(func() {})
		if o.phaseBudget > 0 {
			phaseCtx, cancel = context.WithTimeout(ctx, o.phaseBudget)
		}
		r, err := repro.Run(phaseCtx, p, traffic, o.workers)
		cancel()
		if errors.Is(err, repro.ErrBudget) && ctx.Err() == nil {
			// The same traffic for every phase: later phases replay only the
			// streams this one finished.
			fmt.Fprintln(stderr, "slo-burn-demo:", err)
			traffic.Streams = r.Streams
		} else if err != nil {
			return err
		}
		if r.Streams == 0 {
			return fmt.Errorf("%s finished no stream within -phase-budget %s", p.Name, o.phaseBudget)
		}
		results = append(results, r)
	}
	if err := writeHeapProfile(o.memprofile); err != nil {
		return err
	}
	if o.asJSON {
		return repro.WriteJSON(stdout, results)
	}
	return repro.WriteText(stdout, results)
}

// writeHeapProfile writes the allocs profile, whose default sample index is
// alloc_space: every byte allocated since the process started.
func writeHeapProfile(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	runtime.GC() // publish the most recent allocations in the profile
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("heap profile: %w", err)
	}
	return f.Close()
}
