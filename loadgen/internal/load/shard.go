package load

import (
	"fmt"
	"iter"
	"strconv"
	"strings"
	"time"

	"burnlab/loadgen/internal/shape"
)

// Shard is this loadgen's part of a schedule shared by Of loadgens (the pods
// of a Kubernetes Indexed Job): the starts it owns, at the times and with the
// lengths the whole schedule gives them, so that the shards together send
// exactly what one loadgen would. The zero Shard is the whole schedule.
type Shard struct{ Index, Of int }

// JobIndexEnv is where a Kubernetes Indexed Job tells each pod its index.
const JobIndexEnv = "JOB_COMPLETION_INDEX"

// ParseShard reads "i/N" (shard i of N, 0 ≤ i < N). "/N" takes i from the
// Job's completion index, jobIndex (the value of JOB_COMPLETION_INDEX, ""
// when unset), so one pod template serves every shard; an explicit i that
// disagrees with a set completion index is refused, as two pods would then
// send the same share and none the other.
func ParseShard(s, jobIndex string) (Shard, error) {
	if s == "" {
		return Shard{}, nil
	}
	is, ns, ok := strings.Cut(s, "/")
	n, err := strconv.Atoi(ns)
	if !ok || err != nil || n < 1 {
		return Shard{}, fmt.Errorf("shard %q: want i/N with N ≥ 1, or /N to take i from %s", s, JobIndexEnv)
	}
	if is == "" {
		if jobIndex == "" {
			return Shard{}, fmt.Errorf("shard %q: no index given and %s is not set", s, JobIndexEnv)
		}
		is = jobIndex
	} else if jobIndex != "" && jobIndex != is {
		return Shard{}, fmt.Errorf("shard %q: %s is %s; give /%d to take the Job's index", s, JobIndexEnv, jobIndex, n)
	}
	i, err := strconv.Atoi(is)
	if err != nil || i < 0 || i >= n {
		return Shard{}, fmt.Errorf("shard %q: index %q is not in 0…%d", s, is, n-1)
	}
	return Shard{Index: i, Of: n}, nil
}

func (s Shard) String() string {
	if s.Of <= 1 {
		return "0/1"
	}
	return strconv.Itoa(s.Index) + "/" + strconv.Itoa(s.Of)
}

func (s Shard) validate() error {
	if s.Of < 0 || s.Index < 0 || (s.Of > 0 && s.Index >= s.Of) || (s.Of == 0 && s.Index != 0) {
		return fmt.Errorf("shard %d/%d: want 0 ≤ i < N", s.Index, s.Of)
	}
	return nil
}

// owner is the shard that sends start i. Plain round robin (i mod N) would
// hand every long generation to the same shard whenever N shares a factor
// with longEvery (N = 2, 4, 5, 10, …: the long one sits at the same place in
// every block), leaving one pod with the whole 10x burn and the heaviest
// streams. Rotating each block of longEvery starts by one more shard gives
// the long generations out in turn, and ordinary starts still evenly.
func owner(i, of, longEvery int) int {
	if longEvery <= 0 {
		return i % of
	}
	return (i%longEvery + i/longEvery) % of
}

// A Start is one stream of the schedule: the i-th of the whole schedule,
// due at Due from the schedule's start, Events long.
type Start struct {
	I      int
	Due    time.Duration
	Events int
	Long   bool
}

// Schedule is the sequence of starts shard s sends: those of the unsharded
// schedule (sh.Rate, ramped over ramp, for duration; 0: without end) that
// it owns, unchanged. Every shard walks the same global sequence, so the
// starts of all shards are those of one loadgen, each sent once.
func Schedule(sh shape.Shape, ramp, duration time.Duration, s Shard) iter.Seq[Start] {
	of := max(s.Of, 1)
	return func(yield func(Start) bool) {
		for i := 0; ; i++ {
			due := offset(i, sh.Rate, ramp)
			if duration > 0 && due >= duration {
				return
			}
			if owner(i, of, sh.LongEvery) != s.Index {
				continue
			}
			events, long := sh.EventsAt(i, due)
			if !yield(Start{I: i, Due: due, Events: events, Long: long}) {
				return
			}
		}
	}
}
