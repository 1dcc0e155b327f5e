package heapdelta

import (
	"bytes"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The functions of the built profiles, named as the gateway's are.
const (
	appendFn = "burnlab/gateway/internal/transcript.(*Baseline).Append"
	copyFn   = "burnlab/gateway/internal/proxy.(*Proxy).copyStream"
	sseFn    = "burnlab/gateway/internal/sse.(*Writer).Event"
	jsonFn   = "encoding/json.Marshal"
	redactFn = "burnlab/gateway/internal/redact.Line"
)

// MB is a decimal megabyte, the unit the verdict's words use.
const MB = 1e6

// deltaProfile builds a delta heap profile the way Go's net/http/pprof
// serves one: the four sample types of the runtime's heap profile,
// alloc_space the default, sampled every 512 KiB, with a duration. Each
// function of rates allocates rate bytes a second over seconds, flat in
// itself, called from main.main (so main.main has cum but no flat).
func deltaProfile(t testing.TB, seconds float64, rates map[string]float64) []byte {
	t.Helper()
	p := &profile.Profile{
		SampleType: []*profile.ValueType{
			{Type: "alloc_objects", Unit: "count"}, {Type: "alloc_space", Unit: "bytes"},
			{Type: "inuse_objects", Unit: "count"}, {Type: "inuse_space", Unit: "bytes"},
		},
		DefaultSampleType: "alloc_space",
		PeriodType:        &profile.ValueType{Type: "space", Unit: "bytes"},
		Period:            512 << 10,
		TimeNanos:         time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC).UnixNano(),
		DurationNanos:     int64(seconds * 1e9),
	}
	caller := &profile.Function{ID: 1, Name: "main.main", SystemName: "main.main", Filename: "main.go"}
	callerLoc := &profile.Location{ID: 1, Address: 0x1000, Line: []profile.Line{{Function: caller, Line: 10}}}
	p.Function, p.Location = []*profile.Function{caller}, []*profile.Location{callerLoc}
	for i, name := range slices.Sorted(maps.Keys(rates)) {
		id := uint64(i + 2)
		fn := &profile.Function{ID: id, Name: name, SystemName: name, Filename: "x.go"}
		loc := &profile.Location{ID: id, Address: 0x1000 + id*0x10, Line: []profile.Line{{Function: fn, Line: 20}}}
		p.Function, p.Location = append(p.Function, fn), append(p.Location, loc)
		space := int64(rates[name] * seconds)
		p.Sample = append(p.Sample, &profile.Sample{
			Location: []*profile.Location{loc, callerLoc},
			Value:    []int64{space / 1024, space, 0, 0},
		})
	}
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// sampleAt is a 10 s delta ending at to, with the given rates.
func sampleAt(t testing.TB, to time.Time, rates map[string]float64) Sample {
	t.Helper()
	var total float64
	for _, r := range rates {
		total += r * 10
	}
	return Sample{From: to.Add(-10 * time.Second), To: to, Raw: deltaProfile(t, 10, rates), Total: int64(total)}
}
