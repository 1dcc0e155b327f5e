package heapdelta

import (
	"bytes"
	"compress/gzip"
	"math"
	"strings"
	"testing"
	"time"
)

// steady is a gateway's allocation by function when nothing is wrong.
var steady = map[string]float64{copyFn: 40 * MB, sseFn: 20 * MB, jsonFn: 10 * MB, redactFn: 0.2 * MB}

func scaled(rates map[string]float64, by map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for fn, r := range rates {
		out[fn] = r
		if f, ok := by[fn]; ok {
			out[fn] = r * f
		}
	}
	return out
}

func with(rates map[string]float64, fn string, rate float64) map[string]float64 {
	out := scaled(rates, nil)
	out[fn] = rate
	return out
}

const unchanged = "no function's allocation grew by more than 50 % beyond sampling noise (of those making at least 5 % of it): the profiled process's heap did not change; look at what it calls, or at its machine"

func TestCompare(t *testing.T) {
	for _, c := range []struct {
		name           string
		before, during map[string]float64
		want           string // the words
		wantFn         string // the function named, if any
	}{
		{
			// A regression: a new function allocates most of the heap.
			name: "regression", before: steady,
			during: with(scaled(steady, map[string]float64{copyFn: 1.1, sseFn: 0.9}), appendFn, 300*MB),
			want:   "transcript.(*Baseline).Append grew from 0 B/s to 300.0 MB/s (81% of the allocation during the burn)", wantFn: appendFn,
		},
		{
			// A slow upstream: the same functions, each within ±20 %.
			name: "upstream tail", before: steady,
			during: scaled(steady, map[string]float64{copyFn: 1.2, sseFn: 0.8, jsonFn: 1.15, redactFn: 0.85}),
			want:   unchanged,
		},
		{
			// 10x, but 2.8 % of the heap: below MinShare, not named.
			name: "small noisy function", before: steady,
			during: scaled(steady, map[string]float64{redactFn: 10}),
			want:   unchanged,
		},
		{
			// An idle gateway before: the grower is still the one named.
			name: "idle before", before: map[string]float64{jsonFn: 200},
			during: with(steady, appendFn, 50*MB),
			want:   "transcript.(*Baseline).Append grew from 0 B/s to 50.0 MB/s (42% of the allocation during the burn)", wantFn: appendFn,
		},
		{
			// Twice the traffic: the heap changed, and the top grower is
			// the largest function (the totals tell it is load).
			name: "all traffic doubled", before: steady,
			during: scaled(steady, map[string]float64{copyFn: 2, sseFn: 2, jsonFn: 2, redactFn: 2}),
			want:   "proxy.(*Proxy).copyStream grew from 40.0 MB/s to 80.0 MB/s (57% of the allocation during the burn)", wantFn: copyFn,
		},
		{
			// copyStream grew most, by 16 MB/s, but only 40 %; Marshal grew
			// 150 %, by 15 MB/s: the one that changed is named.
			name: "a big function under the threshold hides no other", before: steady,
			during: scaled(steady, map[string]float64{copyFn: 1.4, jsonFn: 2.5}),
			want:   "json.Marshal grew from 10.0 MB/s to 25.0 MB/s (25% of the allocation during the burn)", wantFn: jsonFn,
		},
		{
			// A quiet gateway: 2 sampled allocations' worth (1 MiB in 10 s)
			// against none is all of the delta but within sampling noise.
			name: "within sampling noise", before: map[string]float64{jsonFn: 1 << 20 / 10},
			during: map[string]float64{jsonFn: 1 << 20 / 10, appendFn: 1 << 20 / 10},
			want:   unchanged,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, during := sampleAt(t, t0, c.before), sampleAt(t, t0.Add(time.Minute), c.during)
			v, err := Compare(before, during, DefaultThreshold)
			if err != nil {
				t.Fatal(err)
			}
			if v.Words != c.want || v.Function != c.wantFn || v.Changed != (c.wantFn != "") {
				t.Fatalf("verdict %+v\nwant words %q naming %q", v, c.want, c.wantFn)
			}
			if math.Abs(v.TotalDuring-float64(during.Total)/10) > 1 || math.Abs(v.TotalBefore-float64(before.Total)/10) > 1 {
				t.Errorf("totals %v and %v B/s, want %v and %v", v.TotalBefore, v.TotalDuring, before.Total/10, during.Total/10)
			}
			if v.Changed && (v.Before != c.before[c.wantFn] || math.Abs(v.During-c.during[c.wantFn]) > 1) {
				t.Errorf("rates %v -> %v, want %v -> %v", v.Before, v.During, c.before[c.wantFn], c.during[c.wantFn])
			}
		})
	}
}

// Rates, not bytes: a 20 s delta and a 10 s one of the same traffic are
// the same.
func TestCompareUsesRates(t *testing.T) {
	long := Sample{From: t0.Add(-20 * time.Second), To: t0, Raw: deltaProfile(t, 20, steady)}
	v, err := Compare(long, sampleAt(t, t0.Add(time.Minute), steady), 0.01)
	if err != nil || v.Changed || math.Abs(v.TotalBefore-v.TotalDuring) > 1 {
		t.Fatalf("%+v, %v: want the same rates", v, err)
	}
}

func TestCompareRefusesWhatItCannotRead(t *testing.T) {
	good := sampleAt(t, t0, steady)
	truncated := good
	truncated.Raw = good.Raw[:len(good.Raw)/2]
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write([]byte("not a profile at all"))
	w.Close()
	for _, c := range []struct {
		name           string
		before, during Sample
		threshold      float64
	}{
		{"empty", Sample{From: t0.Add(-time.Second), To: t0}, good, 0.5},
		{"garbage", good, Sample{From: t0.Add(-time.Second), To: t0, Raw: []byte("garbage")}, 0.5},
		{"gzipped garbage", good, Sample{From: t0.Add(-time.Second), To: t0, Raw: gz.Bytes()}, 0.5},
		{"truncated", truncated, good, 0.5},
		{"empty window", good, Sample{From: t0, To: t0, Raw: good.Raw}, 0.5},
		{"zero threshold", good, good, 0},
		{"NaN threshold", good, good, math.NaN()},
	} {
		if v, err := Compare(c.before, c.during, c.threshold); err == nil {
			t.Errorf("%s: %+v, want an error", c.name, v)
		}
	}
}

// Whatever the bytes, Compare returns an error or a verdict: never a panic.
func FuzzCompare(f *testing.F) {
	good := deltaProfile(f, 10, steady)
	f.Add(good)
	f.Add(good[:len(good)-7])
	f.Add([]byte{})
	f.Add([]byte("heap profile: 1: 2 [3: 4] @ heap/1048576\n1: 2 [3: 4] @ 0x1\n"))
	before := Sample{From: t0.Add(-10 * time.Second), To: t0, Raw: good}
	f.Fuzz(func(t *testing.T, raw []byte) {
		Compare(before, Sample{From: t0, To: t0.Add(10 * time.Second), Raw: raw}, DefaultThreshold)
	})
}

func TestWords(t *testing.T) {
	for in, want := range map[float64]string{0: "0 B", 999: "999 B", 999.6: "1.0 kB", 1234: "1.2 kB", 999_960: "1.0 MB", 1.25e6: "1.2 MB", 3.4e9: "3.4 GB"} {
		if got := decimalBytes(in); got != want {
			t.Errorf("decimalBytes(%v) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		appendFn:                           "transcript.(*Baseline).Append",
		"runtime.malg":                     "runtime.malg",
		"a/b.F[go.shape.*example.com/x.T]": "b.F[go.shape.*example.com/x.T]",
	} {
		if got := shortName(in); got != want {
			t.Errorf("shortName(%q) = %q, want %q", in, got, want)
		}
	}
	v, err := Compare(sampleAt(t, t0, steady), sampleAt(t, t0.Add(time.Minute), steady), 0.25)
	if err != nil || !strings.Contains(v.Words, "more than 25 %") {
		t.Errorf("%q, %v: want the threshold, 25 %%, in words", v.Words, err)
	}
}
