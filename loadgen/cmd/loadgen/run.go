package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"

	"burnlab/loadgen/internal/load"
	"burnlab/loadgen/internal/shape"
	"burnlab/shared/service"
)

// runOptions are run's flags.
type runOptions struct {
	target, tenants, shapePath string
	calibrateMissing           bool
	rate                       float64
	duration, ramp, delay      time.Duration
	creep                      time.Duration
	maxInFlight                int
	shard                      string
	timeout                    time.Duration
	admin, out, name, logLevel string
	direct                     string
}

func (o *runOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.target, "target", "http://127.0.0.1:8080/v1/chat/stream", "URL streams are POSTed to")
	fs.StringVar(&o.tenants, "tenants", "", "API keys, comma-separated (the gateway's key=tenant:tpm list works too)")
	fs.StringVar(&o.shapePath, "shape", "", "traffic shape file from `loadgen calibrate` (default: built-in shape)")
	fs.BoolVar(&o.calibrateMissing, "calibrate", false, "when the -shape file does not exist, calibrate against -target (a baseline gateway) and write it first")
	fs.Float64Var(&o.rate, "rate", 0, "streams started per second (default: the shape's)")
	fs.DurationVar(&o.duration, "duration", time.Minute, "how long to start streams; 0 runs until stopped")
	fs.DurationVar(&o.ramp, "ramp", 0, "raise the rate linearly from 0 over this long")
	fs.DurationVar(&o.delay, "start-delay", 0, "wait this long before the load starts, after the calibration if one runs "+
		"(compose: the pager's rolling heap profiles then hold the idle gateway, the \"before\" of an incident that starts with the load, "+
		"not the calibration's long streams)")
	fs.DurationVar(&o.creep, "creep", 0, "grow the long generations over this long, as in the write-up's three days: on the baseline every one "+
		"is far under the SLO at the start, the share over it climbs over most of the run, and all are over it at the end (burn 0x → 10x); 0: no creep")
	fs.IntVar(&o.maxInFlight, "max-inflight", 256, "most concurrent streams; starts beyond it are dropped and counted")
	fs.StringVar(&o.shard, "shard", "", "send only shard i/N of the schedule (/N: i from "+load.JobIndexEnv+", a Kubernetes Indexed Job's); N shards together send the whole")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up a stream after this long")
	fs.StringVar(&o.direct, "direct", "", "also send the provider's direct clients' non-streaming completions to this URL "+
		"(e.g. http://127.0.0.1:8081/v1/chat/completions): the traffic of the provider's own SLO; '' for none")
	fs.StringVar(&o.admin, "admin", "127.0.0.1:6061", "address of /metrics, /healthz and /debug/pprof/ ('' for none; loopback by default: pprof reads the heap)")
	fs.StringVar(&o.out, "o", "", "write the report as JSON to this file")
	fs.StringVar(&o.name, "name", "", "name of this run in the report (e.g. baseline, fixed)")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
}

// Validate checks the flags that need no file, saying each that is wrong;
// the shape file is read after the calibration that may write it.
func (o *runOptions) Validate() (load.Keys, load.Shard, error) {
	var errs []error
	keys, err := load.ParseKeys(o.tenants)
	if err == nil && o.calibrateMissing && keys.Probe == "" {
		err = fmt.Errorf("-calibrate: %w", errNoProbe)
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("-tenants: %w", err))
	}
	if o.creep < 0 {
		errs = append(errs, fmt.Errorf("-creep %s: want 0 or more", o.creep))
	}
	if o.delay < 0 {
		errs = append(errs, fmt.Errorf("-start-delay %s: want 0 or more", o.delay))
	}
	if o.calibrateMissing && o.shapePath == "" {
		errs = append(errs, errors.New("-calibrate needs -shape, the file to write"))
	}
	shard, err := load.ParseShard(o.shard, os.Getenv(load.JobIndexEnv))
	if err != nil {
		errs = append(errs, fmt.Errorf("-shard: %w", err))
	}
	if o.direct != "" {
		if err := (load.Direct{URL: o.direct}).Validate(); err != nil {
			errs = append(errs, fmt.Errorf("-%w", err))
		}
	}
	return keys, shard, errors.Join(errs...)
}

func runLoad(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o runOptions
	o.register(fs)
	service.Usage(fs, envs, usage)
	if err := service.Parse(fs, args, envs); err != nil {
		return err
	}
	log, err := service.NewLogger(stderr, o.logLevel, "loadgen")
	if err != nil {
		return err
	}
	keys, shard, err := o.Validate()
	if err != nil {
		return err
	}
	if o.calibrateMissing {
		if err := calibrateIfMissing(ctx, log, o.target, keys.Probe, o.shapePath, stdout); err != nil {
			if ctx.Err() != nil {
				return nil // stopped while calibrating: a clean stop, as during the delay
			}
			return err
		}
	}
	if o.delay > 0 {
		log.Info().Dur("start_delay", o.delay).Msg("waiting before the load's first stream")
		select {
		case <-time.After(o.delay):
		case <-ctx.Done():
			return nil
		}
	}
	sh, calibrated, err := shape.LoadOrDefault(o.shapePath)
	if err != nil {
		return err
	}
	if o.rate > 0 {
		sh.Rate = o.rate
	}
	sh.Creep = o.creep
	cfg := load.Config{Target: o.target, Keys: keys.Load, Shape: sh, Duration: o.duration, Ramp: o.ramp, MaxInFlight: o.maxInFlight, Timeout: o.timeout, Shard: shard}
	if err := cfg.Validate(); err != nil {
		return err
	}
	reg := service.NewRegistry()
	rec := load.NewRecorder(reg)
	adminCtx, stopAdmin := context.WithCancel(ctx)
	defer stopAdmin()
	adminErr := make(chan error, 1)
	if o.admin != "" {
		go func() {
			adminErr <- service.Serve(adminCtx, log, service.Drain{Timeout: 5 * time.Second}, service.Server{Name: "admin", Addr: o.admin, Handler: service.AdminMux(reg, nil)})
		}()
	} else {
		adminErr <- nil
	}
	log.Info().Str("target", o.target).Float64("rate", sh.Rate).Int("long_every", sh.LongEvery).Int("long_events", sh.LongEvents).
		Int("short_min", sh.ShortMin).Int("short_max", sh.ShortMax).Bool("calibrated", calibrated).Dur("creep", sh.Creep).
		Dur("duration", o.duration).Int("tenants", len(keys.Load)).Stringer("shard", shard).Str("direct", o.direct).Msg("starting load")

	started := time.Now()
	progressDone := make(chan struct{})
	progressCtx, stopProgress := context.WithCancel(ctx)
	go func() { progress(progressCtx, stderr, log, rec, started); close(progressDone) }()
	directCtx, stopDirect := context.WithCancel(ctx)
	directErr := make(chan error, 1)
	if o.direct != "" {
		go func() { directErr <- load.RunDirect(directCtx, load.Direct{URL: o.direct, Shard: shard}, reg) }()
	} else {
		directErr <- nil
	}
	runErr := load.Run(ctx, cfg, rec)
	stopDirect()
	runErr = errors.Join(runErr, <-directErr)
	stopProgress()
	<-progressDone

	rep := rec.Report(o.name, o.target, started, time.Since(started), sh, o.maxInFlight)
	if shard.Of > 1 {
		rep.Shard = shard.String()
	}
	rep.WriteText(stdout)
	if o.out != "" {
		if err := rep.Save(o.out); err != nil {
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
