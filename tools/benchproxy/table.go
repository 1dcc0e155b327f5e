package benchproxy

import (
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"
)

// WriteTable prints the report: what ran where, one row per target and
// concurrency with each figure beside its ratio to the bare ReverseProxy at
// the same concurrency, and the heap per held stream.
func WriteTable(w io.Writer, r *Report) error {
	m := r.Machine
	nginx := ""
	if m.Nginx != "" {
		nginx = ", " + m.Nginx + " (worker_processes auto)"
	}
	fmt.Fprintf(w, "bench-proxy: %d-event SSE streams (payloads 24–96 characters, a PII item per ~%d tokens), each read whole and checked\n", r.Events, piiEvery)
	fmt.Fprintf(w, "machine: %d CPUs, %s, %s, %s%s\n", m.CPUs, m.CPU, m.Kernel, m.Go, nginx)
	fmt.Fprintf(w, "revision: %s; started %s (load average %s), took %s\n", r.Gateway, r.Started.Format("2006-01-02 15:04 MST"), m.Load, r.Elapsed)
	if slices.ContainsFunc(r.Rows, func(row Row) bool { return row.Target == Scanner }) {
		fmt.Fprintf(w, "%s: reads each event into reused buffers, flushing as the gateway does (none after a write over 8 KiB), and does nothing else (no JSON, redaction, accounting or transcript): the least CPU a proxy that redacts per event costs\n", Scanner)
	}
	if slices.ContainsFunc(r.Rows, func(row Row) bool { return row.Target == Untraced }) {
		fmt.Fprintf(w, "%s: the fixed gateway with its flight recorder off (-flight-recorder 0); %s keeps the last 10 s of execution trace, as deployed\n", Untraced, Fixed)
	}
	if r.Previous != "" {
		fmt.Fprintf(w, "%s: the fixed gateway built from revision %s, in the same run\n", Previous, r.Previous)
	}
	if r.Rounds > 1 {
		fmt.Fprintf(w, "rounds: each row measured in %d turns, the rows taking theirs in turn (the baseline's, with few streams, in fewer), so the machine's drift falls on every row alike\n", r.Rounds)
	}
	fmt.Fprintf(w, "CPU: the server's own processes (every thread's run time, before and after each turn); the upstream's only in \"direct\", the load generator's in none\n\n")

	rp := map[int]Row{}
	for _, row := range r.Rows {
		if row.Target == ReverseProxy {
			rp[row.Concurrency] = row
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target          \tconc\tstreams\tfailed\tCPU ms/stream\t×RP\tstreams/s\t×RP\tp50 ms\t×RP\tp99 ms\t×RP\t")
	for _, row := range r.Rows {
		base, ok := rp[row.Concurrency]
		rel := func(v, b float64) string {
			if !ok || b == 0 {
				return "—"
			}
			return ratio(v / b)
		}
		fmt.Fprintf(tw, "%-16s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", row.Target, row.Concurrency, row.Streams, row.Failures,
			num(row.CPUMsPerStream), rel(row.CPUMsPerStream, base.CPUMsPerStream),
			num(row.StreamsPerSec), rel(row.StreamsPerSec, base.StreamsPerSec),
			num(row.P50Ms), rel(row.P50Ms, base.P50Ms),
			num(row.P99Ms), rel(row.P99Ms, base.P99Ms))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, row := range r.Rows {
		if row.FirstError != "" {
			fmt.Fprintf(w, "%s c=%d first failure: %s\n", row.Target, row.Concurrency, row.FirstError)
		}
	}
	if err := writeLatency(w, r); err != nil {
		return err
	}
	if len(r.Memory) == 0 {
		return nil
	}
	held := r.Memory[0]
	fmt.Fprintf(w, "\nheap per in-flight stream: %d streams held open at once (the upstream sends an event every %d ms), read when each had %d events;\n"+
		"go_memstats_heap_inuse_bytes after a forced GC, held minus idle, over %d\n\n", held.Streams, r.MemPace, held.EventsEach, held.Streams)
	var rpMem float64
	for _, mem := range r.Memory {
		if mem.Target == ReverseProxy {
			rpMem = mem.BytesPerStream
		}
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target          \theap idle MiB\theap held MiB\tKiB/stream\t×RP\t")
	for _, mem := range r.Memory {
		rel := "—"
		if rpMem > 0 {
			rel = ratio(mem.BytesPerStream / rpMem)
		}
		fmt.Fprintf(tw, "%-16s\t%s\t%s\t%s\t%s\t\n", mem.Target, num(float64(mem.HeapIdle)/(1<<20)), num(float64(mem.HeapHeld)/(1<<20)),
			num(mem.BytesPerStream/1024), rel)
	}
	return tw.Flush()
}

// writeLatency prints what each target adds to the first event and to the
// gaps between events: each figure, its difference from going straight to
// the upstream (+direct), and for the first event its difference from the
// ReverseProxy's (+RP).
func writeLatency(w io.Writer, r *Report) error {
	if len(r.Latency) == 0 {
		return nil
	}
	var direct, rp Latency
	for _, l := range r.Latency {
		switch l.Target {
		case Direct:
			direct = l
		case ReverseProxy:
			rp = l
		}
	}
	l0 := r.Latency[0]
	fmt.Fprintf(w, "\nfirst event and gaps between events at the client: %d streams of %d events each, one at a time, the targets taking turns (each turn a stream uncounted, then one counted; the first turn uncounted), the upstream sending an event every %d ms;\n"+
		"first: request sent to first whole event read; +direct: the figure less direct's; +RP: less the ReverseProxy's\n\n", l0.Streams, l0.Events, r.LatencyPace)
	diff := func(v, b float64, ok bool) string {
		if !ok {
			return "—"
		}
		return fmt.Sprintf("%+d", int64(math.Round(v-b)))
	}
	rel := func(v, b float64) string {
		if b == 0 {
			return "—"
		}
		return ratio(v / b)
	}
	hasDirect, hasRP := direct.Streams > 0, rp.Streams > 0
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target          \tfirst p50 µs\t+direct\t+RP\t×RP\tfirst p99 µs\tgap p50 µs\t+direct\t×RP\tgap p99 µs\t+direct\t")
	for _, l := range r.Latency {
		fmt.Fprintf(tw, "%-16s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", l.Target,
			num(l.FirstP50Us), diff(l.FirstP50Us, direct.FirstP50Us, hasDirect), diff(l.FirstP50Us, rp.FirstP50Us, hasRP), rel(l.FirstP50Us, rp.FirstP50Us),
			num(l.FirstP99Us),
			num(l.GapP50Us), diff(l.GapP50Us, direct.GapP50Us, hasDirect), rel(l.GapP50Us, rp.GapP50Us),
			num(l.GapP99Us), diff(l.GapP99Us, direct.GapP99Us, hasDirect))
	}
	return tw.Flush()
}

// num prints about three significant digits without an exponent.
func num(v float64) string {
	switch a := max(v, -v); {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

// ratio prints a ratio to two decimals, and one far below 1 (the baseline
// gateway's throughput) with two significant digits rather than as 0.00.
func ratio(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 0.1 || v == 0:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.2g", v)
	}
}
