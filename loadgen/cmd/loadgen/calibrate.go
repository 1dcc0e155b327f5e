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

// calibrateCmd times streams through the baseline gateway and writes the
// traffic shape it fits.
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

// calibrateIfMissing writes a calibrated shape to path (runOptions.Validate
// holds it non-empty) unless it exists: compose's loadgen keeps it on a
// volume, so a machine is fitted once. A gateway without the baseline's
// cost (the fixed build) leaves no file and the built-in shape runs, so the
// next start against the baseline fits.
func calibrateIfMissing(ctx context.Context, log zerolog.Logger, target, key, path string, stdout io.Writer) error {
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
