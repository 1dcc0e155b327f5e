// Package benchproxy is the side-by-side proxy benchmark (`make
// bench-proxy`): the same SSE traffic straight to an upstream, through a
// bare httputil.ReverseProxy, nginx, and the gateway in each build, each a
// process of its own on loopback, with the CPU of each server process
// measured from /proc so the load generator's own cost is in no figure.
package benchproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"burnlab/shared/freeport"
	"burnlab/shared/proc"
	"burnlab/shared/results"
)

// Targets, in the table's order.
const (
	Direct       = "direct"
	ReverseProxy = "reverseproxy"
	Nginx        = "nginx"
	// Scanner reads each event and does nothing else (NewScanner): the
	// least CPU a proxy that redacts per event could cost.
	Scanner = "scanner"
	Fixed   = "gateway-fixed"
	// Untraced is the fixed build with its flight recorder off
	// (-flight-recorder 0): the recorder's cost is Fixed's CPU over it.
	Untraced = "gateway-fixed-untraced"
	Baseline = "gateway-baseline"
	// Previous is the fixed build at Config.Previous, a revision of the
	// repository, so a change's gain is a ratio within one run.
	Previous = "gateway-previous"
)

// AllTargets are every target, in the table's order.
func AllTargets() []string {
	return []string{Direct, ReverseProxy, Nginx, Scanner, Fixed, Untraced, Baseline}
}

// Config is one benchmark run.
type Config struct {
	Root            string   // the repository, where the binaries are built from
	Targets         []string // a subset of AllTargets
	Events          int      // content events per stream
	Streams         int      // measured streams per row
	BaselineStreams int      // per row of the baseline gateway, whose streams take seconds each
	Concurrency     []int    // a row per target and concurrency
	// Rounds splits each row's streams into this many turns, taken in
	// turn with every other row's, so a drift in what the machine gives
	// (another tenant of the host, its clock) falls on every row alike
	// rather than on whichever ran while it lasted: a ratio of one run is
	// then a ratio of like with like (0: 1, the rows one after another).
	// A row with too few streams to keep its concurrency busy in each
	// turn (the baseline's) takes fewer turns.
	Rounds int
	// MemStreams streams are held open at once through each Go proxy to
	// measure its heap per in-flight stream (0: skip), once each has
	// received MemEvents events.
	MemStreams, MemEvents int
	// LatencyStreams streams of LatencyEvents events, paced, are sent one
	// at a time through each target to time its first event and the gaps
	// between events (0: skip).
	LatencyStreams, LatencyEvents int
	// LatencyPaceMS is the upstream's pause between the latency streams'
	// events, in ms (0: none; bench-proxy's default is 1). What a proxy
	// holds back until the next event arrives shows as a first-event
	// delay that grows with it.
	LatencyPaceMS int
	// TranscriptBytes is the gateways' -max-transcript-bytes (0: their
	// default, 1 MiB).
	TranscriptBytes int
	// Previous, a git revision (HEAD~1, a tag), adds the Previous target
	// after the fixed gateway: the fixed build of that revision's tree.
	Previous string
	Seed     uint64
	Log      io.Writer // progress lines; nil: none
}

// Report is a run's result; WriteTable prints it.
type Report struct {
	Started time.Time `json:"started"`
	Elapsed string    `json:"elapsed"`
	Machine Machine   `json:"machine"`
	// Gateway is the repository's revision the gateways were built from.
	Gateway string `json:"gateway_revision"`
	// Previous is the revision the Previous target was built from.
	Previous string `json:"previous_revision,omitempty"`
	Events   int    `json:"events_per_stream"`
	Rows     []Row  `json:"rows"`
	// Rounds is how many turns the rows were measured in (Config.Rounds).
	Rounds  int       `json:"rounds,omitempty"`
	Memory  []Memory  `json:"memory,omitempty"`
	MemPace int       `json:"memory_pace_ms,omitempty"`
	Latency []Latency `json:"latency,omitempty"`
	// LatencyPace is the latency run's upstream pace.
	LatencyPace int `json:"latency_pace_ms,omitempty"`
}

// Machine is where the run happened.
type Machine struct {
	CPUs   int    `json:"cpus"`
	CPU    string `json:"cpu_model"`
	Kernel string `json:"kernel"`
	Go     string `json:"go"`
	Nginx  string `json:"nginx,omitempty"`
	// Load is /proc/loadavg's 1, 5 and 15-minute figures at the start:
	// other work on the machine shows in every row.
	Load string `json:"load_average"`
}

// Row is one target at one concurrency.
type Row struct {
	Target         string  `json:"target"`
	Concurrency    int     `json:"concurrency"`
	Streams        int     `json:"streams"`
	Failures       int     `json:"failures"`
	FirstError     string  `json:"first_error,omitempty"`
	CPUMsPerStream float64 `json:"cpu_ms_per_stream"`
	StreamsPerSec  float64 `json:"streams_per_second"`
	P50Ms          float64 `json:"p50_ms"`
	P99Ms          float64 `json:"p99_ms"`
}

// Memory is one Go proxy's heap with MemStreams streams in flight.
type Memory struct {
	Target         string  `json:"target"`
	Streams        int     `json:"streams"`
	EventsEach     int     `json:"events_each"`
	HeapIdle       uint64  `json:"heap_inuse_idle_bytes"`
	HeapHeld       uint64  `json:"heap_inuse_held_bytes"`
	BytesPerStream float64 `json:"heap_bytes_per_stream"`
}

// memPaceMS paces the held streams: slow enough that 200 of them cost the
// proxies little CPU, fast enough that each reaches MemEvents in seconds.
const memPaceMS = 5

// warmupEvents is the length of the unmeasured streams before each row,
// which open the row's connections through the whole chain.
const warmupEvents = 200

func (c *Config) check() error {
	if c.Root == "" {
		return errors.New("bench-proxy: Root is required")
	}
	if c.Events < 1 || c.Streams < 1 || c.BaselineStreams < 1 {
		return fmt.Errorf("bench-proxy: events (%d), streams (%d) and baseline streams (%d) must be positive", c.Events, c.Streams, c.BaselineStreams)
	}
	if c.Rounds < 0 {
		return fmt.Errorf("bench-proxy: rounds (%d) must not be negative", c.Rounds)
	}
	c.Rounds = max(c.Rounds, 1)
	if len(c.Concurrency) == 0 || slices.ContainsFunc(c.Concurrency, func(n int) bool { return n < 1 }) {
		return fmt.Errorf("bench-proxy: concurrency %v: want positive numbers", c.Concurrency)
	}
	if len(c.Targets) == 0 {
		return errors.New("bench-proxy: no targets")
	}
	for _, t := range c.Targets {
		if t == Previous {
			return fmt.Errorf("bench-proxy: target %s is added by a previous revision to build (-previous), not named", Previous)
		}
		if !slices.Contains(AllTargets(), t) {
			return fmt.Errorf("bench-proxy: unknown target %q: want some of %s", t, strings.Join(AllTargets(), ","))
		}
	}
	if c.Previous != "" {
		if strings.HasPrefix(c.Previous, "-") {
			return fmt.Errorf("bench-proxy: previous revision %q: a revision, not an option", c.Previous)
		}
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.Previous != "" {
		i := slices.Index(c.Targets, Fixed)
		if i < 0 {
			fmt.Fprintf(c.Log, "bench-proxy: no row for previous revision %s: it is compared with %s, which is not among the targets\n", c.Previous, Fixed)
			c.Previous = ""
		} else {
			// Right after the fixed build; the copy keeps the caller's
			// slice as it was.
			c.Targets = slices.Insert(slices.Clone(c.Targets), i+1, Previous)
		}
	}
	if c.MemStreams < 0 || (c.MemStreams > 0 && (c.MemEvents < 1 || c.MemEvents >= c.Events)) {
		// The heap is read while every held stream is still in flight.
		return fmt.Errorf("bench-proxy: memory run of %d streams read at %d events: want 1 ≤ events read < %d events per stream", c.MemStreams, c.MemEvents, c.Events)
	}
	if c.LatencyPaceMS < 0 || c.LatencyPaceMS > 1000 {
		return fmt.Errorf("bench-proxy: latency pace %d ms: want 0 (unpaced) to 1000", c.LatencyPaceMS)
	}
	if c.LatencyStreams < 0 || (c.LatencyStreams > 0 && (c.LatencyEvents < 1 || c.LatencyEvents > c.Events)) {
		// The upstream streams at most Events events.
		return fmt.Errorf("bench-proxy: latency run of %d streams of %d events: want 1 to %d events", c.LatencyStreams, c.LatencyEvents, c.Events)
	}
	return nil
}

// target is one server under test.
type target struct {
	name  string
	url   string // where the load goes
	admin string // a Go server's admin address (heap figures); "" for nginx
	proc  *proc.Proc
}

// Run builds and starts every server, runs every row, measures the heap per
// held stream, and stops every process it started, also on failure. A
// report with failed streams is returned with an error saying so.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	rep := &Report{Started: time.Now().UTC(), Events: cfg.Events, Machine: machine(), Gateway: revision(cfg.Root)}
	if cfg.Previous != "" {
		var stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, "git", "-C", cfg.Root, "rev-parse", "--verify", "--end-of-options", cfg.Previous+"^{commit}")
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("bench-proxy: previous revision %q: %w: %s", cfg.Previous, err, bytes.TrimSpace(stderr.Bytes()))
		}
		// The commit, not the name, from here on: a branch may move.
		cfg.Previous = string(bytes.TrimSpace(out))
		rep.Previous = cfg.Previous[:min(12, len(cfg.Previous))]
	}
	say := func(format string, args ...any) { fmt.Fprintf(cfg.Log, "bench-proxy: "+format+"\n", args...) }
	targets, stop, err := servers(ctx, cfg, say, &rep.Machine)
	if err != nil {
		return nil, err
	}
	defer stop()

	client := newClient()
	defer client.CloseIdleConnections()
	rows, err := interleave(ctx, client, targets, cfg)
	if err != nil {
		return nil, err
	}
	var failed int
	for _, row := range rows {
		failed += row.Failures
		say("%-16s c=%d: %d streams, %d failed, %s CPU ms/stream, %s streams/s", row.Target, row.Concurrency, row.Streams, row.Failures, num(row.CPUMsPerStream), num(row.StreamsPerSec))
	}
	rep.Rows, rep.Rounds = rows, cfg.Rounds
	if cfg.LatencyStreams > 0 {
		rep.LatencyPace = cfg.LatencyPaceMS
		lat, err := streamTimes(ctx, client, targets, cfg.LatencyStreams, cfg.LatencyEvents, rep.LatencyPace)
		if err != nil {
			// The rows measured so far are the run's too.
			rep.Elapsed = time.Since(rep.Started).Round(time.Second).String()
			return rep, err
		}
		for _, l := range lat {
			say("%-16s first event p50 %s µs, gap p50 %s µs", l.Target, num(l.FirstP50Us), num(l.GapP50Us))
		}
		rep.Latency = lat
	}
	if cfg.MemStreams > 0 {
		rep.MemPace = memPaceMS
		for _, t := range targets {
			if t.admin == "" { // nginx's heap is no Go heap; direct has no proxy
				continue
			}
			m, err := heldHeap(ctx, t, cfg.MemStreams, cfg.Events, cfg.MemEvents)
			if err != nil {
				return nil, fmt.Errorf("bench-proxy: heap of %s with %d streams held: %w", t.name, cfg.MemStreams, err)
			}
			say("%-16s %d streams held: %.0f heap bytes per stream", t.name, m.Streams, m.BytesPerStream)
			rep.Memory = append(rep.Memory, m)
		}
	}
	rep.Elapsed = time.Since(rep.Started).Round(time.Second).String()
	if failed > 0 {
		return rep, fmt.Errorf("bench-proxy: %d streams failed (see the failed column)", failed)
	}
	return rep, nil
}

// servers builds and starts cfg's targets and their upstream in a
// temporary directory; stop ends every process and removes the directory.
func servers(ctx context.Context, cfg Config, say func(string, ...any), m *Machine) (targets []*target, stop func(), err error) {
	dir, err := os.MkdirTemp("", "bench-proxy-")
	if err != nil {
		return nil, nil, fmt.Errorf("bench-proxy: %w", err)
	}
	var procs []*proc.Proc
	var ports []freeport.Port
	stop = func() {
		for _, p := range slices.Backward(procs) {
			p.Stop(5 * time.Second)
		}
		for _, p := range ports {
			p.Release()
		}
		os.RemoveAll(dir)
	}
	if err := os.Mkdir(filepath.Join(dir, "logs"), 0o755); err != nil {
		stop()
		return nil, nil, fmt.Errorf("bench-proxy: %w", err)
	}
	if targets, err = startAll(ctx, cfg, dir, say, &procs, &ports, m); err != nil {
		stop()
		return nil, nil, err
	}
	return targets, stop, nil
}

// startAll builds the Go servers and starts the upstream and every target,
// appending each process to procs as it starts so the caller stops it, and
// each port it picks to ports so the caller releases it.
func startAll(ctx context.Context, cfg Config, dir string, say func(string, ...any), procs *[]*proc.Proc, ports *[]freeport.Port, m *Machine) ([]*target, error) {
	bin := func(name string) string { return filepath.Join(dir, "bin", name) }
	type binary struct{ name, root, pkg, tags string }
	builds := []binary{{"bench-upstream", cfg.Root, "./tools/benchproxy/cmd/bench-upstream", ""}}
	for _, t := range cfg.Targets {
		switch t {
		case ReverseProxy, Scanner:
			if !slices.ContainsFunc(builds, func(b binary) bool { return b.name == "bench-reverseproxy" }) {
				builds = append(builds, binary{"bench-reverseproxy", cfg.Root, "./tools/benchproxy/cmd/bench-reverseproxy", ""})
			}
		case Fixed, Untraced:
			if !slices.ContainsFunc(builds, func(b binary) bool { return b.name == Fixed }) {
				builds = append(builds, binary{Fixed, cfg.Root, "./gateway/cmd/gateway", "fixed"})
			}
		case Previous:
			src := filepath.Join(dir, "previous")
			if err := checkout(ctx, cfg.Root, cfg.Previous, src); err != nil {
				return nil, err
			}
			builds = append(builds, binary{Previous, src, "./gateway/cmd/gateway", "fixed"})
		case Baseline:
			builds = append(builds, binary{Baseline, cfg.Root, "./gateway/cmd/gateway", ""})
		}
	}
	say("building %d binaries", len(builds))
	for _, b := range builds {
		build := proc.Build{Dir: b.root, Out: bin(b.name), Pkgs: []string{b.pkg}, Tags: b.tags}
		if err := build.Run(ctx); err != nil {
			return nil, fmt.Errorf("bench-proxy: %w", err)
		}
	}
	addrs := func(n int) ([]string, error) {
		var as []string
		for range n {
			p, err := freeport.Pick()
			if err != nil {
				return nil, fmt.Errorf("bench-proxy: %w", err)
			}
			*ports = append(*ports, p)
			as = append(as, p.Addr)
		}
		return as, nil
	}
	start := func(name string, args []string, ready string) (*proc.Proc, error) {
		p, err := proc.Start(ctx, proc.Spec{Name: name, Args: args, Log: filepath.Join(dir, "logs", name+".log"),
			Ready: ready, ReadyTimeout: 30 * time.Second})
		if err != nil {
			return nil, fmt.Errorf("bench-proxy: %w", err)
		}
		*procs = append(*procs, p)
		return p, nil
	}

	a, err := addrs(2)
	if err != nil {
		return nil, err
	}
	upstream := a[0]
	up, err := start("upstream", []string{bin("bench-upstream"), "-listen", upstream, "-admin", a[1],
		"-events", fmt.Sprint(cfg.Events), "-seed", fmt.Sprint(cfg.Seed)}, "http://"+a[1]+"/readyz")
	if err != nil {
		return nil, err
	}
	var targets []*target
	for _, name := range cfg.Targets {
		a, err := addrs(2)
		if err != nil {
			return nil, err
		}
		t := &target{name: name, admin: a[1]}
		var args []string
		ready := "http://" + a[1] + "/readyz"
		switch name {
		case Direct:
			t.url, t.admin, t.proc = "http://"+upstream+"/v1/chat/completions", "", up
			targets = append(targets, t)
			continue
		case ReverseProxy, Scanner:
			t.url = "http://" + a[0] + "/v1/chat/completions"
			args = []string{bin("bench-reverseproxy"), "-listen", a[0], "-admin", a[1], "-upstream", "http://" + upstream}
			if name == Scanner {
				args = append(args, "-scan")
			}
		case Nginx:
			nginx, err := FindNginx()
			if err != nil {
				return nil, fmt.Errorf("bench-proxy: %w", err)
			}
			m.Nginx = nginxVersion(nginx)
			conf, err := writeNginxConf(filepath.Join(dir, "nginx"), a[0], upstream)
			if err != nil {
				return nil, err
			}
			t.url, t.admin = "http://"+a[0]+"/v1/chat/completions", ""
			// -e: the error log before the config is read, which
			// would otherwise be the system's /var/log/nginx.
			args = []string{nginx, "-p", filepath.Dir(conf), "-c", conf, "-e", filepath.Join(filepath.Dir(conf), "error.log")}
			ready = "http://" + a[0] + "/readyz" // through nginx to the upstream
		case Fixed, Untraced, Previous, Baseline:
			t.url = "http://" + a[0] + "/v1/chat/stream"
			exe := bin(name)
			if name == Untraced {
				exe = bin(Fixed)
			}
			args = []string{exe, "-listen", a[0], "-admin", a[1], "-upstream", "http://" + upstream,
				"-tenants", apiKey + "=bench:1000000000000:1000", "-log-level", "error", "-drain-grace", "0s"}
			if name == Untraced {
				args = append(args, "-flight-recorder", "0")
			}
			if cfg.TranscriptBytes > 0 {
				args = append(args, "-max-transcript-bytes", fmt.Sprint(cfg.TranscriptBytes))
			}
		}
		p, err := start(name, args, ready)
		if err != nil {
			return nil, err
		}
		t.proc = p
		targets = append(targets, t)
	}
	say("started the upstream and %s", strings.Join(cfg.Targets, ", "))
	return targets, nil
}

// checkout writes the tree of commit rev of the repository at root into
// dst, for a build of that revision beside the working tree's.
func checkout(ctx context.Context, root, rev, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("bench-proxy: %w", err)
	}
	tarball := dst + ".tar"
	defer os.Remove(tarball)
	for _, args := range [][]string{{"git", "-C", root, "archive", "--format=tar", "-o", tarball, rev}, {"tar", "-x", "-f", tarball, "-C", dst}} {
		if out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("bench-proxy: previous revision %s: %s: %w: %s", rev, args[0], err, bytes.TrimSpace(out))
		}
	}
	return nil
}

// interleave measures a row per target and concurrency, in cfg.Rounds
// rounds: each round runs a share of every row's streams, the rows in
// turn, each round starting one row further on, so no row always follows
// the same one. A row that takes fewer turns (turns) takes them spread
// over the rounds, not bunched in the first.
func interleave(ctx context.Context, c *http.Client, targets []*target, cfg Config) ([]Row, error) {
	type tally struct {
		t         *target
		conc      int
		streams   int // the row's, over every round
		turns     int // how many of the rounds it takes a turn in
		res       loadResult
		cpu, wall time.Duration
	}
	var tallies []*tally
	for _, t := range targets {
		streams := cfg.Streams
		if t.name == Baseline {
			streams = cfg.BaselineStreams
		}
		for _, conc := range cfg.Concurrency {
			tallies = append(tallies, &tally{t: t, conc: conc, streams: streams, turns: turns(streams, conc, cfg.Rounds)})
		}
	}
	for round := range cfg.Rounds {
		for i := range tallies {
			ty := tallies[(round+i)%len(tallies)]
			turn, ok := turnIn(round, ty.turns, cfg.Rounds)
			if !ok {
				continue
			}
			n := share(ty.streams, ty.turns, turn)
			res, cpu, err := runTurn(ctx, c, ty.t, cfg.Events, n, ty.conc)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(cfg.Log, "bench-proxy: round %d/%d: %-16s c=%d: %d streams\n", round+1, cfg.Rounds, ty.t.name, ty.conc, n)
			if ty.res.firstErr == nil {
				ty.res.firstErr = res.firstErr
			}
			ty.res.failures += res.failures
			ty.res.durations = append(ty.res.durations, res.durations...)
			ty.cpu += cpu
			ty.wall += res.wall
		}
	}
	rows := make([]Row, 0, len(tallies))
	for _, ty := range tallies {
		// The streams the turns ran, which the shares must add up to.
		measured := len(ty.res.durations) + ty.res.failures
		row := Row{Target: ty.t.name, Concurrency: ty.conc, Streams: measured, Failures: ty.res.failures}
		if ty.res.firstErr != nil {
			row.FirstError = ty.res.firstErr.Error()
		}
		row.CPUMsPerStream = ms(ty.cpu) / float64(measured)
		slices.Sort(ty.res.durations) // each turn's are sorted, not their union
		row.StreamsPerSec = float64(len(ty.res.durations)) / ty.wall.Seconds()
		row.P50Ms, row.P99Ms = ms(quantile(ty.res.durations, 0.5)), ms(quantile(ty.res.durations, 0.99))
		rows = append(rows, row)
	}
	return rows, nil
}

// turns is how many of rounds a row of streams at conc takes a turn in:
// every round, unless that would leave a turn fewer streams than conc
// (its workers idle), then as many as keep each turn at conc; at least 1.
func turns(streams, conc, rounds int) int { return max(1, min(rounds, streams/conc)) }

// turnIn says whether a row of turns turns takes one in round (of
// rounds), and which: the turns spread evenly over the rounds.
func turnIn(round, turns, rounds int) (turn int, ok bool) {
	turn = round * turns / rounds
	return turn, (round+1)*turns/rounds > turn
}

// share is a turn's share of a row's streams: the turns split them
// evenly, the first taking one more each while some are left over.
func share(streams, turns, turn int) int {
	return streams/turns + min(1, max(0, streams%turns-turn))
}

// runTurn runs n streams through t, conc at a time, after a warm-up (the
// target may have sat idle while the other rows ran), and returns what
// they did and the CPU t's processes spent on them.
func runTurn(ctx context.Context, c *http.Client, t *target, events, n, conc int) (loadResult, time.Duration, error) {
	if err := t.proc.Alive(); err != nil {
		return loadResult{}, 0, fmt.Errorf("bench-proxy: %w", err)
	}
	warm := runLoad(ctx, c, t.url, requestBody(warmupEvents, 0), conc, conc, EventsPerStream(warmupEvents))
	if warm.failures > 0 {
		return loadResult{}, 0, fmt.Errorf("bench-proxy: %s: warm-up streams failed: %w", t.name, warm.firstErr)
	}
	cpu0, err := groupCPU(t.proc)
	if err != nil {
		return loadResult{}, 0, err
	}
	res := runLoad(ctx, c, t.url, requestBody(events, 0), n, conc, EventsPerStream(events))
	cpu1, err := groupCPU(t.proc)
	if err != nil {
		return loadResult{}, 0, err
	}
	return res, cpu1 - cpu0, ctx.Err()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// heldHeap measures a Go proxy's heap idle and with n streams in flight.
func heldHeap(ctx context.Context, t *target, n, events, eventsEach int) (Memory, error) {
	m := Memory{Target: t.name, Streams: n, EventsEach: eventsEach}
	var err error
	if m.HeapIdle, err = heapInuse(ctx, t.admin); err != nil {
		return m, err
	}
	err = holdStreams(ctx, t.url, n, events, eventsEach, memPaceMS, func() (err error) {
		m.HeapHeld, err = heapInuse(ctx, t.admin)
		return err
	})
	if err != nil {
		return m, err
	}
	m.BytesPerStream = (float64(m.HeapHeld) - float64(m.HeapIdle)) / float64(n)
	// Let the proxy see the cancels and free the streams before the next
	// target's idle figure is taken (each target is its own process, so
	// this only keeps the CPU quiet).
	time.Sleep(500 * time.Millisecond)
	return m, t.proc.Alive()
}

// machine describes where the run happens.
func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), CPU: "unknown", Kernel: "unknown"}
	if model := results.CPUModel(); model != "" {
		m.CPU = model
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil && len(strings.Fields(string(b))) >= 3 {
		m.Load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	return m
}

// revision is the commit the gateways are built from, and whether the
// gateway's own files had changes not yet committed.
func revision(root string) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown (no git)"
	}
	rev := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--", "gateway").Output(); err == nil && len(st) > 0 {
		rev += " + uncommitted changes in gateway/"
	}
	return rev
}
