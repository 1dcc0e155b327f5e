package repro

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"

	"burnlab/shared/slo"
)

// WriteJSON prints one object per phase, the contract other tools read.
func WriteJSON(w io.Writer, results []Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(results)
}

// WriteText prints each phase's figures and, when both phases ran, the
// write-up's "What actually moved" table of this run, then the write-up's
// own.
func WriteText(w io.Writer, results []Result) error {
	for _, r := range results {
		fmt.Fprintf(w, "%-8s streams=%d p50=%s p99=%s breach=%.1f%% burn=%.1fx alloc=%s\n",
			r.Name, r.Streams, slo.FormatDuration(r.Summary().P50), slo.FormatDuration(r.Summary().P99),
			100*r.BreachRate, r.BurnRate, slo.FormatBytes(r.AllocBytes))
	}
	if len(results) != 2 {
		return nil
	}
	fmt.Fprintln(w)
	if err := slo.WriteTable(w, results[0].Summary(), results[1].Summary()); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nThe write-up's, on its machine (allocations over its 25 s profile, not this run's):")
	return slo.WriteTable(w, slo.WriteUp[0], slo.WriteUp[1])
}

// Environment is printed with every result: the breach rate swings with these
// settings, so a figure without them cannot be compared.
func Environment(workers int) string {
	return fmt.Sprintf("GOMAXPROCS=%d GOGC=%s GOMEMLIMIT=%s workers=%d %s",
		runtime.GOMAXPROCS(0), envOr("GOGC", "100"), memLimit(), workers, runtime.Version())
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func memLimit() string {
	if l := debug.SetMemoryLimit(-1); l != 1<<63-1 {
		return slo.FormatBytes(uint64(l)) //nolint:gosec // G115: a set limit is positive
	}
	return "off"
}
