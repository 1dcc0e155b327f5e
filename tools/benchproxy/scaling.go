package benchproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"text/tabwriter"
	"time"
)

// The complexity gate (`make scaling`): streams of growing length through
// each gateway build, and how its cost per stream grows with the length.
// A cost that grows as n² is the write-up's `out +=`; a linear one is its
// fix. The exponent, unlike a time, does not depend on how fast or busy
// the machine is, so it can stop a merge.

// MaxAllocExponent is the gate: a build whose bytes allocated per stream
// grow faster than n^1.2 with the stream's length n fails it. A build that
// allocates what it keeps measures about 1 (its fixed costs per stream
// pull it a little under), one that reuses its buffers less; the
// write-up's baseline about 2.
const MaxAllocExponent = 1.2

// allocMetric is the runtime's count of bytes allocated on the heap since
// the process started (/gc/heap/allocs:bytes), as client_golang's Go
// collector exports it.
const allocMetric = "go_gc_heap_allocs_bytes_total"

// MaxScalingEvents bounds a size: the gateway ends a stream at 200,000
// events, and the baseline's O(n²) stream of 100,000 already takes minutes.
const MaxScalingEvents = 100_000

// probeReads is how many times a measurement's own bytes are read.
const probeReads = 5

// Builds, as ScalingConfig.Builds names them.
var scalingBuilds = map[string]string{"fixed": Fixed, "baseline": Baseline}

// ScalingConfig is one complexity run.
type ScalingConfig struct {
	Root   string   // the repository, where the gateways are built from
	Builds []string // "fixed", "baseline" or both
	Sizes  []int    // content events per stream, at least three distinct
	// Each size is measured over at least MinStreams streams and at least
	// MinWall of streaming, whichever takes longer: a short stream of the
	// fixed build costs a fraction of a millisecond, a long one of the
	// baseline seconds.
	MinStreams int
	MinWall    time.Duration
	Seed       uint64
	Log        io.Writer // progress lines; nil: none
}

// Validate says what is wrong with the configuration, if anything.
func (c *ScalingConfig) Validate() error {
	if c.Root == "" {
		return errors.New("scaling: Root is required")
	}
	if len(c.Builds) == 0 {
		return errors.New("scaling: no builds")
	}
	for i, b := range c.Builds {
		if _, ok := scalingBuilds[b]; !ok {
			return fmt.Errorf("scaling: unknown build %q: want fixed, baseline or both", b)
		}
		if slices.Contains(c.Builds[:i], b) {
			return fmt.Errorf("scaling: build %q named twice", b)
		}
	}
	if slices.ContainsFunc(c.Sizes, func(n int) bool { return n < 1 || n > MaxScalingEvents }) {
		return fmt.Errorf("scaling: sizes %v: want event counts from 1 to %d", c.Sizes, MaxScalingEvents)
	}
	if distinct := len(slices.Compact(slices.Sorted(slices.Values(c.Sizes)))); distinct < 3 {
		return fmt.Errorf("scaling: sizes %v: want at least three distinct ones, or the fit says nothing", c.Sizes)
	}
	if c.MinStreams < 1 || c.MinWall < 0 {
		return fmt.Errorf("scaling: at least %d streams and %s a size: want one stream or more and a wall time ≥ 0", c.MinStreams, c.MinWall)
	}
	return nil
}

// ScalingReport is a complexity run's result; WriteScalingTable prints it.
type ScalingReport struct {
	Started time.Time      `json:"started"`
	Elapsed string         `json:"elapsed"`
	Machine Machine        `json:"machine"`
	Gateway string         `json:"gateway_revision"`
	Builds  []BuildScaling `json:"builds"`
}

// BuildScaling is one build's cost per stream at each size, and the power
// laws fitted to it.
type BuildScaling struct {
	Variant       string  `json:"variant"`
	AllocExponent float64 `json:"alloc_exponent"`
	AllocR2       float64 `json:"alloc_r2"`
	CPUExponent   float64 `json:"cpu_exponent"`
	CPUR2         float64 `json:"cpu_r2"`
	// ProbeBytes is what one measurement allocates in the gateway by
	// itself (the forced collection's heap profile and the /metrics
	// answer), measured with no stream between two of them and taken
	// off every size's figure.
	ProbeBytes float64        `json:"probe_bytes"`
	Points     []ScalingPoint `json:"points"`
}

// ScalingPoint is one size's measurement.
type ScalingPoint struct {
	Events         int     `json:"events"`
	Streams        int     `json:"streams"`
	AllocBytes     float64 `json:"alloc_bytes_per_stream"`
	CPUMsPerStream float64 `json:"cpu_ms_per_stream"`
}

// CheckAlloc is the gate: an error when the build's allocation per stream
// grows faster than n^max.
func (b BuildScaling) CheckAlloc(max float64) error {
	if b.AllocExponent <= max {
		return nil
	}
	first, last := b.Points[0].Events, b.Points[len(b.Points)-1].Events
	return fmt.Errorf("the %s gateway's bytes allocated per stream grow as n^%.2f (R² %.3f) over %d–%d events, above the gate's n^%.1f: its cost per event grows with the stream",
		b.Variant, b.AllocExponent, b.AllocR2, first, last, max)
}

// RunScaling builds and starts the gateways and an upstream, measures each
// build at each size, one stream at a time, and fits cost ∝ n^k.
//
// Bytes come from the runtime's allocation counter, read after a forced
// collection before and after each size (afterGC says why that makes it
// exact), less ProbeBytes. CPU is the gateway process's own, from /proc.
// The transcript's cap is raised out of the way: it is a limit that stops
// the transcript growing, and the gate measures the builder.
func RunScaling(ctx context.Context, cfg ScalingConfig) (*ScalingReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	sizes := slices.Sorted(slices.Values(cfg.Sizes))
	rep := &ScalingReport{Started: time.Now().UTC(), Machine: machine(), Gateway: revision(cfg.Root)}
	say := func(format string, args ...any) { fmt.Fprintf(cfg.Log, "scaling: "+format+"\n", args...) }
	var names []string
	for _, b := range cfg.Builds {
		names = append(names, scalingBuilds[b])
	}
	largest := sizes[len(sizes)-1]
	targets, stop, err := servers(ctx, Config{Root: cfg.Root, Targets: names, Events: largest, Seed: cfg.Seed,
		// Room for every event's line, which is about 100 bytes.
		TranscriptBytes: largest * 256}, say, &rep.Machine)
	if err != nil {
		return nil, err
	}
	defer stop()
	client := newClient()
	defer client.CloseIdleConnections()
	for i, t := range targets {
		b, err := scaleBuild(ctx, client, t, cfg, sizes, say)
		if err != nil {
			return nil, err
		}
		b.Variant = cfg.Builds[i]
		rep.Builds = append(rep.Builds, b)
	}
	rep.Elapsed = time.Since(rep.Started).Round(time.Second).String()
	return rep, nil
}

// scaleBuild measures one gateway at every size and fits both costs.
func scaleBuild(ctx context.Context, c *http.Client, t *target, cfg ScalingConfig, sizes []int, say func(string, ...any)) (BuildScaling, error) {
	var b BuildScaling
	// One unmeasured stream opens the connections and warms the
	// gateway's caches and pools.
	if warm := runLoad(ctx, c, t.url, requestBody(sizes[0], 0), 1, 1, EventsPerStream(sizes[0])); warm.failures > 0 {
		return b, fmt.Errorf("scaling: %s: warm-up stream failed: %w", t.name, warm.firstErr)
	}
	// A measurement's own bytes are the least of a few: the reads cost the
	// same each time, and whatever else the gateway allocates meanwhile
	// (its flight recorder copies the trace into the heap in chunks as
	// large as a fixed stream's whole allocation) only adds. One reading
	// that caught a chunk once made a size's bytes per stream negative.
	prev, err := afterGC(ctx, t.admin, allocMetric)
	if err != nil {
		return b, err
	}
	for i := range probeReads {
		next, err := afterGC(ctx, t.admin, allocMetric)
		if err != nil {
			return b, err
		}
		if d := next - prev; i == 0 || d < b.ProbeBytes {
			b.ProbeBytes = d
		}
		prev = next
	}
	var ns, bytes, cpu []float64
	for _, n := range sizes {
		p, err := measureSize(ctx, c, t, n, cfg, b.ProbeBytes)
		if err != nil {
			return b, err
		}
		say("%-16s %6d events: %3d streams, %s bytes and %s CPU ms a stream", t.name, n, p.Streams, num(p.AllocBytes), num(p.CPUMsPerStream))
		b.Points = append(b.Points, p)
		ns, bytes, cpu = append(ns, float64(n)), append(bytes, p.AllocBytes), append(cpu, p.CPUMsPerStream)
	}
	alloc, err := FitPower(ns, bytes)
	if err != nil {
		return b, fmt.Errorf("scaling: %s bytes: %w", t.name, err)
	}
	cpus, err := FitPower(ns, cpu)
	if err != nil {
		return b, fmt.Errorf("scaling: %s CPU: %w", t.name, err)
	}
	b.AllocExponent, b.AllocR2, b.CPUExponent, b.CPUR2 = alloc.Exponent, alloc.R2, cpus.Exponent, cpus.R2
	return b, nil
}

// measureSize streams n-event streams through t, one at a time, until it
// has both cfg.MinStreams streams and cfg.MinWall of them.
func measureSize(ctx context.Context, c *http.Client, t *target, n int, cfg ScalingConfig, probe float64) (ScalingPoint, error) {
	p := ScalingPoint{Events: n}
	body := requestBody(n, 0)
	// One unmeasured stream of this size first: the last size's two
	// forced collections emptied the fixed build's block pool (its
	// primary, then its victim cache), and refilling it in the measured
	// streams would charge them a cost spread over however many streams
	// this machine runs in MinWall. One collection (a0's) leaves the
	// victim cache to lend from.
	if warm := runLoad(ctx, c, t.url, body, 1, 1, EventsPerStream(n)); warm.failures > 0 {
		return p, fmt.Errorf("scaling: %s, %d events: warm-up stream failed: %w", t.name, n, warm.firstErr)
	}
	a0, err := afterGC(ctx, t.admin, allocMetric)
	if err != nil {
		return p, err
	}
	cpu0, err := groupCPU(t.proc)
	if err != nil {
		return p, err
	}
	start := time.Now()
	for p.Streams < cfg.MinStreams || time.Since(start) < cfg.MinWall {
		res := runLoad(ctx, c, t.url, body, 1, 1, EventsPerStream(n))
		if err := ctx.Err(); err != nil {
			return p, err
		}
		if res.failures > 0 {
			return p, fmt.Errorf("scaling: %s, %d events: %w", t.name, n, res.firstErr)
		}
		p.Streams++
	}
	cpu1, err := groupCPU(t.proc)
	if err != nil {
		return p, err
	}
	a1, err := afterGC(ctx, t.admin, allocMetric)
	if err != nil {
		return p, err
	}
	p.AllocBytes = (a1 - a0 - probe) / float64(p.Streams)
	p.CPUMsPerStream = ms(cpu1-cpu0) / float64(p.Streams)
	return p, t.proc.Alive()
}

// WriteScalingTable prints the run: each build's cost per stream at each
// size, then its fitted exponents and the gate's verdict.
func WriteScalingTable(w io.Writer, r *ScalingReport) error {
	m := r.Machine
	fmt.Fprintf(w, "scaling: streams of growing length through each gateway build, one at a time (payloads 24–96 characters, a PII item per ~%d tokens)\n", piiEvery)
	fmt.Fprintf(w, "machine: %d CPUs, %s, %s, %s\n", m.CPUs, m.CPU, m.Kernel, m.Go)
	fmt.Fprintf(w, "revision: %s; started %s (load average %s), took %s\n", r.Gateway, r.Started.Format("2006-01-02 15:04 MST"), m.Load, r.Elapsed)
	fmt.Fprintf(w, "bytes: the gateway's %s after a forced GC, before and after each size, less one measurement's own; CPU: the gateway process's, from /proc\n\n", allocMetric)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "build   \tevents\tstreams\tKiB allocated/stream\tCPU ms/stream\t")
	for _, b := range r.Builds {
		for _, p := range b.Points {
			fmt.Fprintf(tw, "%-8s\t%d\t%d\t%s\t%s\t\n", b.Variant, p.Events, p.Streams, num(p.AllocBytes/1024), num(p.CPUMsPerStream))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\ncost per stream ∝ n^k, a least-squares line through the logarithms (R²: on the logarithms); the gate: bytes grow no faster than n^%.1f\n\n", MaxAllocExponent)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "build   \tbytes k\tR²\tCPU k\tR²\tgate\t")
	for _, b := range r.Builds {
		verdict := "pass"
		if b.CheckAlloc(MaxAllocExponent) != nil {
			verdict = "FAIL"
		}
		fmt.Fprintf(tw, "%-8s\t%.2f\t%.3f\t%.2f\t%.3f\t%s\t\n", b.Variant, b.AllocExponent, b.AllocR2, b.CPUExponent, b.CPUR2, verdict)
	}
	return tw.Flush()
}
