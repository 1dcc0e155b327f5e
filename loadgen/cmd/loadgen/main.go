// Command loadgen drives burnlab's gateway with an open-model SSE load:
// streams start on a schedule at -rate per second whatever the gateway's
// state, each timed from its scheduled start. `loadgen compare` prints the
// write-up's table from two reports; `loadgen calibrate` fits this machine.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"burnlab/loadgen/internal/calibrate"
	"burnlab/loadgen/internal/load"
	"burnlab/loadgen/internal/shape"
	"burnlab/shared/service"
)

var envs = map[string]string{
	"target":       "LOADGEN_TARGET",
	"tenants":      "LOADGEN_TENANTS",
	"shape":        "LOADGEN_SHAPE",
	"calibrate":    "LOADGEN_CALIBRATE",
	"admin":        "LOADGEN_ADMIN",
	"rate":         "LOADGEN_RATE",
	"duration":     "LOADGEN_DURATION",
	"max-inflight": "LOADGEN_MAX_INFLIGHT",
	"shard":        "LOADGEN_SHARD",
	"start-delay":  "LOADGEN_START_DELAY",
	"log-level":    "LOG_LEVEL",
}

func main() {
	service.Main("loadgen", func(ctx context.Context, args []string) error { return run(ctx, args, os.Stdout, os.Stderr) })
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "compare":
			return compare(args[1:], stdout)
		case "calibrate":
			return calibrateCmd(ctx, args[1:], stdout, stderr)
		case "run":
			args = args[1:]
		}
	}
	return runLoad(ctx, args, stdout, stderr)
}

const usage = `loadgen [run] [flags]          send load, print a report (-o report.json to keep it)
loadgen compare a.json b.json  the write-up's "What actually moved" table from two reports
loadgen calibrate [flags]      fit this machine's baseline gateway and write a traffic shape

Flags of run:
`

func runLoad(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	target := fs.String("target", "http://127.0.0.1:8080/v1/chat/stream", "URL streams are POSTed to")
	tenants := fs.String("tenants", "", "API keys, comma-separated (the gateway's key=tenant:tpm list works too)")
	shapePath := fs.String("shape", "", "traffic shape file from `loadgen calibrate` (default: built-in shape)")
	calibrateMissing := fs.Bool("calibrate", false, "when the -shape file does not exist, calibrate against -target (a baseline gateway) and write it first")
	rate := fs.Float64("rate", 0, "streams started per second (default: the shape's)")
	duration := fs.Duration("duration", time.Minute, "how long to start streams; 0 runs until stopped")
	ramp := fs.Duration("ramp", 0, "raise the rate linearly from 0 over this long")
	delay := fs.Duration("start-delay", 0, "wait this long before the load starts, after the calibration if one runs "+
		"(compose: the pager's rolling heap profiles then hold the idle gateway, the \"before\" of an incident that starts with the load, "+
		"not the calibration's long streams)")
	maxInFlight := fs.Int("max-inflight", 256, "most concurrent streams; starts beyond it are dropped and counted")
	shardFlag := fs.String("shard", "", "send only shard i/N of the schedule (/N: i from "+load.JobIndexEnv+", a Kubernetes Indexed Job's); N shards together send the whole")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up a stream after this long")
	admin := fs.String("admin", "127.0.0.1:6061", "address of /metrics, /healthz and /debug/pprof/ ('' for none; loopback by default: pprof reads the heap)")
	out := fs.String("o", "", "write the report as JSON to this file")
	name := fs.String("name", "", "name of this run in the report (e.g. baseline, fixed)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	service.Usage(fs, envs, usage)
	if err := service.Parse(fs, args, envs); err != nil {
		return err
	}
	log, err := service.NewLogger(stderr, *logLevel, "loadgen")
	if err != nil {
		return err
	}
	keys, err := load.ParseKeys(*tenants)
	if err == nil && *calibrateMissing && keys.Probe == "" {
		err = fmt.Errorf("-calibrate: %w", errNoProbe)
	}
	if err != nil {
		return fmt.Errorf("-tenants: %w", err)
	}
	if *delay < 0 {
		return fmt.Errorf("-start-delay %s: want 0 or more", *delay)
	}
	if *calibrateMissing {
		if err := calibrateIfMissing(ctx, log, *target, keys.Probe, *shapePath, stdout); err != nil {
			if ctx.Err() != nil {
				return nil // stopped while calibrating: a clean stop, as during the delay
			}
			return err
		}
	}
	if *delay > 0 {
		log.Info().Dur("start_delay", *delay).Msg("waiting before the load's first stream")
		select {
		case <-time.After(*delay):
		case <-ctx.Done():
			return nil
		}
	}
	sh, calibrated, err := shape.LoadOrDefault(*shapePath)
	if err != nil {
		return err
	}
	if *rate > 0 {
		sh.Rate = *rate
	}
	shard, err := load.ParseShard(*shardFlag, os.Getenv(load.JobIndexEnv))
	if err != nil {
		return fmt.Errorf("-shard: %w", err)
	}
	cfg := load.Config{Target: *target, Keys: keys.Load, Shape: sh, Duration: *duration, Ramp: *ramp, MaxInFlight: *maxInFlight, Timeout: *timeout, Shard: shard}
	if err := cfg.Validate(); err != nil {
		return err
	}
	reg := service.NewRegistry()
	rec := load.NewRecorder(reg)
	adminCtx, stopAdmin := context.WithCancel(ctx)
	defer stopAdmin()
	adminErr := make(chan error, 1)
	if *admin != "" {
		go func() {
			adminErr <- service.Serve(adminCtx, log, service.Drain{Timeout: 5 * time.Second}, service.Server{Name: "admin", Addr: *admin, Handler: service.AdminMux(reg, nil)})
		}()
	} else {
		adminErr <- nil
	}
	log.Info().Str("target", *target).Float64("rate", sh.Rate).Int("long_every", sh.LongEvery).Int("long_events", sh.LongEvents).
		Int("short_min", sh.ShortMin).Int("short_max", sh.ShortMax).Bool("calibrated", calibrated).
		Dur("duration", *duration).Int("tenants", len(keys.Load)).Stringer("shard", shard).Msg("starting load")

	started := time.Now()
	progressDone := make(chan struct{})
	progressCtx, stopProgress := context.WithCancel(ctx)
	go func() { progress(progressCtx, stderr, log, rec, started); close(progressDone) }()
	runErr := load.Run(ctx, cfg, rec)
	stopProgress()
	<-progressDone

	rep := rec.Report(*name, *target, started, time.Since(started), sh, *maxInFlight)
	if shard.Of > 1 {
		rep.Shard = shard.String()
	}
	rep.WriteText(stdout)
	if *out != "" {
		if err := rep.Save(*out); err != nil {
			return fmt.Errorf("report: %w", err)
		}
	}
	stopAdmin()
	if err := <-adminErr; err != nil {
		return err
	}
	return runErr
}

// progress shows a live line every second on a terminal, and a log line
// every ten seconds elsewhere (compose logs).
func progress(ctx context.Context, stderr io.Writer, log zerolog.Logger, rec *load.Recorder, started time.Time) {
	tty := false
	if f, ok := stderr.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	every := 10 * time.Second
	if tty {
		every = time.Second
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			if tty {
				fmt.Fprintln(stderr)
			}
			return
		case <-tick.C:
		}
		s := rec.Snapshot()
		elapsed := time.Since(started).Round(time.Second)
		if tty {
			fmt.Fprintf(stderr, "\r%s started %d ok %d errors %d in flight %d dropped %d p50 %s p99 %s breach %.2f%% burn %.1fx   ",
				elapsed, s.Scheduled-s.Dropped, s.OK, s.Failed, s.InFlight, s.Dropped,
				s.P50.Round(time.Millisecond), s.P99.Round(time.Millisecond), 100*s.BreachRate(), s.BurnRate())
			continue
		}
		log.Info().Dur("elapsed", elapsed).Int("started", s.Scheduled-s.Dropped).Int("ok", s.OK).Int("errors", s.Failed).
			Int("in_flight", s.InFlight).Int("dropped", s.Dropped).Dur("p50", s.P50).Dur("p99", s.P99).
			Float64("breach_rate", s.BreachRate()).Float64("burn_rate", s.BurnRate()).Msg("progress")
	}
}

func compare(args []string, stdout io.Writer) error {
	if len(args) != 2 {
		return errors.New("usage: loadgen compare baseline.json fixed.json")
	}
	base, err := load.ReadReport(args[0])
	if err != nil {
		return err
	}
	fixed, err := load.ReadReport(args[1])
	if err != nil {
		return err
	}
	if base.Name == "" {
		base.Name = "baseline"
	}
	if fixed.Name == "" {
		fixed.Name = "fixed"
	}
	return load.Compare(stdout, base, fixed)
}

func calibrateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o := calibrate.DefaultOptions()
	fs := flag.NewFlagSet("loadgen calibrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	target := fs.String("target", "http://127.0.0.1:8080/v1/chat/stream", "URL of the BASELINE gateway's stream route")
	tenants := fs.String("tenants", "", "the gateway's tenant list, or a list with the probe tenant's entry: its key times the streams (key=tenant:tokens-per-minute:streams:probe)")
	out := fs.String("o", "shape.json", "write the traffic shape here")
	sizes := fs.String("sizes", defaultSizes, "stream lengths to time")
	reps := fs.Int("reps", 3, "streams of each length (the fastest counts)")
	fs.DurationVar(&o.ShortWindow, "short-window", o.ShortWindow, "the lab's short page window")
	fs.IntVar(&o.MinBreaches, "min-breaches", o.MinBreaches, "breaches wanted per short window at a 10x burn")
	fs.Float64Var(&o.CPUBudget, "cpu-budget", o.CPUBudget, "cores the baseline gateway may keep busy on average")
	fs.IntVar(&o.LongEvery, "long-every", o.LongEvery, "one long generation per this many streams (100: a 10x burn)")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the ordinary streams' lengths")
	// The same variables as run's, for the flags the two share.
	envs := map[string]string{"target": envs["target"], "tenants": envs["tenants"]}
	service.Usage(fs, envs, "loadgen calibrate times streams through the baseline gateway, fits t(n) = a·n² + b·n + c and writes a shape\n\nFlags:\n")
	if err := service.Parse(fs, args, envs); err != nil {
		return err
	}
	keys, err := load.ParseKeys(*tenants)
	if err == nil && keys.Probe == "" {
		err = errNoProbe
	}
	if err != nil {
		return fmt.Errorf("-tenants: %w", err)
	}
	ns, err := parseSizes(*sizes)
	if err != nil {
		return err
	}
	if *reps < 1 {
		return fmt.Errorf("-reps must be at least 1, got %d", *reps)
	}
	sh, err := fitShape(ctx, *target, keys.Probe, ns, *reps, o, stdout)
	if err != nil {
		return err
	}
	if err := sh.Save(*out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", *out)
	return nil
}

// errNoProbe refuses a calibration without a probe tenant's key.
var errNoProbe = errors.New("no probe tenant's key (an entry key=tenant:tokens-per-minute:streams:probe, as in the gateway's list): " +
	"the calibration's streams breach the SLO on purpose, and sent as any other tenant's they would count in the SLI and fire the first page")

// defaultSizes are the stream lengths calibration times: long enough that
// the quadratic term dominates, short enough to take seconds in all.
const defaultSizes = "1000,2000,3000,4000,6000"

func parseSizes(list string) ([]int, error) {
	var ns []int
	for _, s := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-sizes: %q is not a positive number", s)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

// calibrateIfMissing writes a calibrated shape to path unless it exists:
// compose's loadgen keeps it on a volume, so a machine is fitted once. A
// gateway without the baseline's cost (the fixed build) leaves no file and
// the built-in shape runs, so the next start against the baseline fits.
func calibrateIfMissing(ctx context.Context, log zerolog.Logger, target, key, path string, stdout io.Writer) error {
	if path == "" {
		return errors.New("-calibrate needs -shape, the file to write")
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		return err
	}
	ns, err := parseSizes(defaultSizes)
	if err != nil {
		return err
	}
	log.Info().Str("target", target).Str("shape", path).Msg("no traffic shape yet: calibrating against the gateway")
	sh, err := fitShape(ctx, target, key, ns, 3, calibrate.DefaultOptions(), stdout)
	if errors.Is(err, calibrate.ErrNotBaseline) {
		log.Warn().Err(err).Msg("not calibrated: running the built-in shape; calibration runs again at the next start")
		return nil
	}
	if err != nil {
		return fmt.Errorf("calibration: %w", err)
	}
	if err := sh.Save(path); err != nil {
		return fmt.Errorf("calibration: %w", err)
	}
	log.Info().Str("shape", path).Float64("rate", sh.Rate).Int("long_events", sh.LongEvents).Msg("calibrated")
	return nil
}

// fitShape times streams through the baseline gateway at target, fits its
// cost curve and chooses a shape from it, printing what it measured and why
// it chose as it did.
func fitShape(ctx context.Context, target, key string, sizes []int, reps int, o calibrate.Options, stdout io.Writer) (shape.Shape, error) {
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer client.CloseIdleConnections()
	probe := func(ctx context.Context, n int) (time.Duration, error) {
		r := load.Once(ctx, client, target, key, n)
		if r.Outcome != load.OutcomeOK {
			return 0, fmt.Errorf("stream ended %s (status %d): %s", r.Outcome, r.Status, r.Err)
		}
		if r.Events < n {
			return 0, fmt.Errorf("asked for %d events, got %d: is -target a burnlab gateway?", n, r.Events)
		}
		return r.Duration, nil
	}
	pts, err := calibrate.Measure(ctx, probe, sizes, reps)
	if err != nil {
		return shape.Shape{}, err
	}
	for _, p := range pts {
		fmt.Fprintf(stdout, "measured  %6d events: %s\n", p.Events, p.Time.Round(100*time.Microsecond))
	}
	curve, err := calibrate.Fit(pts)
	if err != nil {
		return shape.Shape{}, err
	}
	sh, err := calibrate.Choose(curve, o)
	if err != nil {
		return shape.Shape{}, err
	}
	for _, w := range sh.Why {
		fmt.Fprintln(stdout, "chose    ", w)
	}
	return sh, nil
}
