package load

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"time"

	"burnlab/loadgen/internal/shape"
	"burnlab/shared/slo"
)

// Report is the final summary of a run, written with -o as JSON and read
// back by `loadgen compare`.
type Report struct {
	Name        string      `json:"name"`
	Target      string      `json:"target"`
	Started     time.Time   `json:"started"`
	Seconds     float64     `json:"seconds"`
	Shape       shape.Shape `json:"shape"`
	MaxInFlight int         `json:"max_inflight"`
	// Shard is "i/N" when this run sent one shard of the schedule: its
	// counts and rates are that shard's, the shape's rate the whole's.
	Shard       string         `json:"shard,omitempty"`
	Environment string         `json:"environment"`
	Scheduled   int            `json:"scheduled"`
	Dropped     int            `json:"dropped_starts"`
	Outcomes    map[string]int `json:"outcomes"`
	Errors      map[string]int `json:"errors,omitempty"`
	Counted     int            `json:"counted"`
	Breaches    int            `json:"breaches"`
	LongBreach  int            `json:"long_breaches"`
	LongOK      int            `json:"long_ok"`
	BreachRate  float64        `json:"breach_rate"`
	BurnRate    float64        `json:"burn_rate"`
	// Stream time of ok streams and time to first token, in milliseconds.
	Duration    Percentiles `json:"duration_ms"`
	TTFT        Percentiles `json:"ttft_ms"`
	StreamsPerS float64     `json:"streams_per_second"`
	EventsPerS  float64     `json:"events_per_second"`
	BytesPerS   float64     `json:"bytes_per_second"`
}

// Percentiles of a distribution, in milliseconds.
type Percentiles struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
}

// Report summarises what rec saw over elapsed.
func (r *Recorder) Report(name, target string, started time.Time, elapsed time.Duration, sh shape.Shape, maxInFlight int) Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	pct := func(h interface {
		ValueAtQuantile(float64) int64
		Max() int64
	}) Percentiles {
		ms := func(v int64) float64 { return float64(v) / 1000 }
		return Percentiles{P50: ms(h.ValueAtQuantile(50)), P90: ms(h.ValueAtQuantile(90)), P99: ms(h.ValueAtQuantile(99)),
			P999: ms(h.ValueAtQuantile(99.9)), Max: ms(h.Max())}
	}
	secs := elapsed.Seconds()
	return Report{
		Name: name, Target: target, Started: started, Seconds: secs, Shape: sh, MaxInFlight: maxInFlight,
		Environment: fmt.Sprintf("GOMAXPROCS=%d %s", runtime.GOMAXPROCS(0), runtime.Version()),
		Scheduled:   r.scheduled, Dropped: r.dropped,
		Outcomes: cloneMap(r.outcomes), Errors: cloneMap(r.errors),
		Counted: r.counted, Breaches: r.breaches, LongBreach: r.longBreach, LongOK: r.longOK,
		BreachRate:  slo.BreachRate(r.breaches, r.counted),
		BurnRate:    slo.BurnRate(r.breaches, r.counted),
		Duration:    pct(r.duration),
		TTFT:        pct(r.ttft),
		StreamsPerS: float64(r.outcomes[OutcomeOK]) / secs,
		EventsPerS:  float64(r.events) / secs,
		BytesPerS:   float64(r.bytes) / secs,
	}
}

func cloneMap(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// WriteText prints the report for a person.
func (rep Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "%s: %.0f s against %s (%s)\n", titleOr(rep.Name, "run"), rep.Seconds, rep.Target, rep.Environment)
	fmt.Fprintf(w, "  shape      %.1f streams/s, 1 long (%d events) per %d, short %d–%d events\n",
		rep.Shape.Rate, rep.Shape.LongEvents, rep.Shape.LongEvery, rep.Shape.ShortMin, rep.Shape.ShortMax)
	if rep.Shard != "" {
		fmt.Fprintf(w, "  shard      %s of the schedule (the figures below are this shard's)\n", rep.Shard)
	}
	fmt.Fprintf(w, "  starts     %d scheduled, %d dropped (max in flight %d)\n", rep.Scheduled, rep.Dropped, rep.MaxInFlight)
	fmt.Fprintf(w, "  stream     p50 %s  p90 %s  p99 %s  p99.9 %s  max %s\n",
		msStr(rep.Duration.P50), msStr(rep.Duration.P90), msStr(rep.Duration.P99), msStr(rep.Duration.P999), msStr(rep.Duration.Max))
	fmt.Fprintf(w, "  ttft       p50 %s  p99 %s\n", msStr(rep.TTFT.P50), msStr(rep.TTFT.P99))
	fmt.Fprintf(w, "  SLO        %d of %d streams breached %s: %.2f %% → burn %.1fx (long generations: %d breached, %d within)\n",
		rep.Breaches, rep.Counted, slo.Threshold, 100*rep.BreachRate, rep.BurnRate, rep.LongBreach, rep.LongOK)
	fmt.Fprintf(w, "  throughput %.1f ok streams/s, %.0f events/s, %s/s\n", rep.StreamsPerS, rep.EventsPerS, slo.FormatBytes(uint64(rep.BytesPerS)))
	keys := make([]string, 0, len(rep.Outcomes))
	for k := range rep.Outcomes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	fmt.Fprint(w, "  outcomes  ")
	for _, k := range keys {
		fmt.Fprintf(w, " %s=%d", k, rep.Outcomes[k])
	}
	fmt.Fprintln(w)
	errs := make([]string, 0, len(rep.Errors))
	for k := range rep.Errors {
		errs = append(errs, k)
	}
	slices.Sort(errs)
	for _, k := range errs {
		fmt.Fprintf(w, "  error      %d× %s\n", rep.Errors[k], k)
	}
}

func titleOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func msStr(ms float64) string {
	return slo.FormatDuration(time.Duration(ms * float64(time.Millisecond)))
}

// Summary converts the report for the comparison table.
func (rep Report) Summary() slo.Summary {
	return slo.Summary{Name: rep.Name, BreachRate: rep.BreachRate, BurnRate: rep.BurnRate,
		P50: time.Duration(rep.Duration.P50 * float64(time.Millisecond)),
		P99: time.Duration(rep.Duration.P99 * float64(time.Millisecond))}
}

// Save writes the report as JSON.
func (rep Report) Save(path string) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadReport reads a report written by Save.
func ReadReport(path string) (Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Report{}, fmt.Errorf("report: %w", err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return Report{}, fmt.Errorf("report %s: %w", path, err)
	}
	if rep.Counted == 0 && rep.Scheduled == 0 {
		return Report{}, fmt.Errorf("report %s: no streams in it (is it a loadgen report?)", path)
	}
	return rep, nil
}

// Compare prints the write-up's "What actually moved" table for two runs.
func Compare(w io.Writer, base, fixed Report) error {
	return slo.WriteTable(w, base.Summary(), fixed.Summary())
}
