package load

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"burnlab/loadgen/internal/shape"
)

// The union of N shards is the unsharded schedule — every start once, at its
// time and length — for rates from one stream every two seconds to a
// thousand a second, with and without a ramp, for shard counts that share
// factors with the one-in-100 long placement and counts that do not.
func TestShardsTogetherSendExactlyTheUnshardedSchedule(t *testing.T) {
	rates := []float64{0.5, 1, 7.3, 25, 129, 1000}
	shards := []int{1, 2, 3, 4, 5, 7, 10, 16, 25, 50, 99, 100, 101, 128}
	pairs := 0
	for _, rate := range rates {
		for _, ramp := range []time.Duration{0, 10 * time.Second} {
			sh := shape.Default()
			sh.Rate = rate
			// 3,000 starts: 30 blocks of 100, each with its long one.
			duration := offset(3000, rate, ramp)
			whole := slices.Collect(Schedule(sh, ramp, duration, Shard{}))
			if len(whole) != 3000 {
				t.Fatalf("rate %v ramp %s: the whole schedule has %d starts", rate, ramp, len(whole))
			}
			for _, n := range shards {
				pairs++
				if err := unionIsWhole(sh, ramp, duration, n, whole); err != nil {
					t.Errorf("rate %v, ramp %s, %d shards: %v", rate, ramp, n, err)
				}
			}
		}
	}
	t.Logf("%d (rate, ramp, N) combinations", pairs)
}

// unionIsWhole checks N shards against the whole schedule: disjoint,
// together equal to it, and each a fair share of starts and long ones.
func unionIsWhole(sh shape.Shape, ramp, duration time.Duration, n int, whole []Start) error {
	seen := make([]int, len(whole)) // how many shards sent start i
	var counts, longs []int
	for k := range n {
		c, l := 0, 0
		for st := range Schedule(sh, ramp, duration, Shard{Index: k, Of: n}) {
			if st.I >= len(whole) {
				return fmt.Errorf("shard %d sends start %d, past the whole schedule's %d", k, st.I, len(whole))
			}
			if st != whole[st.I] {
				return fmt.Errorf("shard %d sends %+v; the whole schedule has %+v", k, st, whole[st.I])
			}
			seen[st.I]++
			c++
			if st.Long {
				l++
			}
		}
		counts, longs = append(counts, c), append(longs, l)
	}
	for i, s := range seen {
		if s != 1 {
			return fmt.Errorf("start %d sent by %d shards", i, s)
		}
	}
	// Long generations: one in every LongEvery of the union (it is the
	// whole schedule), and handed out in turn, so no shard has more than
	// one more than another.
	total := 0
	for _, l := range longs {
		total += l
	}
	if total != len(whole)/sh.LongEvery {
		return fmt.Errorf("%d long generations in %d starts", total, len(whole))
	}
	if spread := slices.Max(longs) - slices.Min(longs); spread > 1 {
		return fmt.Errorf("long generations per shard %v", longs)
	}
	// Starts: each block of LongEvery gives every shard ⌊L/N⌋ or ⌈L/N⌉, the
	// extra ones rotating, so shares differ by at most L mod N + ⌈L/N⌉.
	l := sh.LongEvery
	if bound := l%n + (l+n-1)/n; slices.Max(counts)-slices.Min(counts) > bound {
		return fmt.Errorf("starts per shard %v differ by more than %d", counts, bound)
	}
	return nil
}

// Without long generations the shards take turns.
func TestShardsWithoutLongGenerationsTakeTurns(t *testing.T) {
	sh := shape.Shape{Rate: 10, ShortMin: 1, ShortMax: 9, Seed: 3}
	whole := slices.Collect(Schedule(sh, 0, 10*time.Second, Shard{}))
	for _, n := range []int{1, 3, 8} {
		if err := unionIsWholeNoLong(sh, n, whole); err != nil {
			t.Errorf("%d shards: %v", n, err)
		}
	}
}

func unionIsWholeNoLong(sh shape.Shape, n int, whole []Start) error {
	var got []Start
	for k := range n {
		for st := range Schedule(sh, 0, 10*time.Second, Shard{Index: k, Of: n}) {
			if st.I%n != k {
				return fmt.Errorf("shard %d sends start %d", k, st.I)
			}
			got = append(got, st)
		}
	}
	slices.SortFunc(got, func(a, b Start) int { return a.I - b.I })
	if !slices.Equal(got, whole) {
		return fmt.Errorf("union of %d starts differs from the %d of the whole", len(got), len(whole))
	}
	return nil
}

func TestParseShard(t *testing.T) {
	for _, c := range []struct {
		in, job string
		want    Shard
		err     string
	}{
		{"", "", Shard{}, ""},
		{"0/1", "", Shard{0, 1}, ""},
		{"3/4", "", Shard{3, 4}, ""},
		{"/4", "2", Shard{2, 4}, ""},
		{"2/4", "2", Shard{2, 4}, ""},
		{"/4", "", Shard{}, "JOB_COMPLETION_INDEX is not set"},
		{"1/4", "2", Shard{}, "JOB_COMPLETION_INDEX is 2"},
		{"4/4", "", Shard{}, "not in 0…3"},
		{"/4", "4", Shard{}, "not in 0…3"},
		{"-1/4", "", Shard{}, "not in 0…3"},
		{"1/0", "", Shard{}, "want i/N"},
		{"4", "", Shard{}, "want i/N"},
		{"a/b", "", Shard{}, "want i/N"},
	} {
		got, err := ParseShard(c.in, c.job)
		if c.err == "" && (err != nil || got != c.want) {
			t.Errorf("ParseShard(%q, %q) = %v, %v; want %v", c.in, c.job, got, err, c.want)
		}
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("ParseShard(%q, %q) = %v, %v; want an error saying %q", c.in, c.job, got, err, c.err)
		}
	}
}
