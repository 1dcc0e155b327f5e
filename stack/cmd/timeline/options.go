package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"burnlab/shared/freeport"
	"burnlab/shared/variant"
	"burnlab/stack/lab"
	"burnlab/stack/timeline"
)

// options are the command's flags.
type options struct {
	variant, dir, shape, json, save string
	duration                        time.Duration
	freePorts                       bool
}

func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.variant, "variant", string(variant.Baseline), "gateway build: baseline or fixed")
	fs.DurationVar(&o.duration, "duration", timeline.Days/timeline.Compression, "how long the three days take; shorter compresses them more than the lab's windows are")
	fs.StringVar(&o.dir, "dir", ".timeline", "the lab's binaries, configs, data and logs (a directory per build under it)")
	fs.StringVar(&o.shape, "shape", filepath.Join(".lab", "shape.json"), "the calibrated traffic shape, the lab's (calibrated against the baseline when missing)")
	fs.BoolVar(&o.freePorts, "free-ports", false, "run on free loopback ports, beside a lab or another timeline, instead of the lab's own")
	fs.StringVar(&o.json, "json", "", "write the result as JSON to this file")
	fs.StringVar(&o.save, "save", "", "write the run as Markdown to this file (docs/results)")
}

// Validate says every flag that is wrong.
func (o *options) Validate() error {
	var errs []error
	if _, err := variant.Parse(o.variant); err != nil {
		errs = append(errs, fmt.Errorf("-variant: %w", err))
	}
	// Each hour of the three days is read as a rate: over two scrapes at
	// least (the lab scrapes every 5 s).
	if least := 10 * time.Second * time.Duration(timeline.Days.Hours()); o.duration < least {
		errs = append(errs, fmt.Errorf("-duration %s: want at least %s, so that each hour of the three days holds two scrapes", o.duration, least))
	}
	return errors.Join(errs...)
}

// meaning says what a duration other than the lab's compression costs.
func (o *options) meaning() string {
	lab := timeline.Days / timeline.Compression
	if o.duration == lab {
		return ""
	}
	return fmt.Sprintf("the three days take %s, not %s: the creep runs %.2gx as fast as the lab's alert windows, so the hours the ticket and the page come at are not production's",
		o.duration, lab, lab.Seconds()/o.duration.Seconds())
}

// config is the run's configuration, and a release of the ports it
// picked.
func (o *options) config(log io.Writer) (timeline.Config, func(), error) {
	release := func() {}
	if err := o.Validate(); err != nil {
		return timeline.Config{}, release, err
	}
	root, err := os.Getwd()
	if err != nil {
		return timeline.Config{}, release, err
	}
	if _, err := os.Stat(filepath.Join(root, "go.work")); err != nil {
		return timeline.Config{}, release, errors.New("run the timeline from the repository root (make timeline)")
	}
	v, _ := variant.Parse(o.variant)
	dir, err := filepath.Abs(filepath.Join(o.dir, string(v)))
	if err != nil {
		return timeline.Config{}, release, err
	}
	shape, err := filepath.Abs(o.shape)
	if err == nil {
		err = os.MkdirAll(filepath.Dir(shape), 0o755) // where a calibration writes it
	}
	if err != nil {
		return timeline.Config{}, release, err
	}
	// Each run starts with empty Prometheus, Alertmanager and pager data.
	for _, d := range []string{"data", "logs"} {
		os.RemoveAll(filepath.Join(dir, d))
	}
	addrs := lab.DefaultAddrs()
	if o.freePorts {
		var ports []freeport.Port
		release = func() {
			for _, p := range ports {
				p.Release()
			}
		}
		for _, a := range []*string{&addrs.GatewayPublic, &addrs.GatewayAdmin, &addrs.Upstream, &addrs.LoadgenAdmin, &addrs.Pager, &addrs.Prometheus, &addrs.Alertmanager} {
			p, err := freeport.Pick()
			if err != nil {
				release()
				return timeline.Config{}, func() {}, err
			}
			ports = append(ports, p)
			*a = p.Addr
		}
	}
	return timeline.Config{Root: root, Dir: dir, Variant: v, Duration: o.duration, Shape: shape, Addrs: addrs, Log: log}, release, nil
}
