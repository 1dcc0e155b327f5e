package proxy

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A gateway that has served nothing exposes its SLIs' series at zero: the
// no-data alert must read an idle gateway as no traffic, not as a scrape
// that stopped.
func TestSLISeriesExistBeforeTheFirstStream(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	NewMetrics(reg, "fixed", "test", nil)
	for _, c := range []struct {
		name   string
		series int
	}{
		{"gateway_stream_duration_seconds", 2 * 4}, // two routes × four outcomes
		{"gateway_stream_ttft_seconds", 2},         // two routes
	} {
		n, err := testutil.GatherAndCount(reg, c.name)
		if err != nil {
			t.Fatal(err)
		}
		if n != c.series {
			t.Errorf("%s: %d series before any stream, want %d", c.name, n, c.series)
		}
	}
}
