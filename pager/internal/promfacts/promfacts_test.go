package promfacts

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"burnlab/pager/internal/promfacts/promfactstest"
	"burnlab/shared/incident"
)

var start = time.Date(2026, 12, 1, 3, 12, 0, 0, time.UTC)

func alert() Alert {
	return Alert{SlothID: "llm-gateway-stream-latency", Windows: "30s/1m over 14.4x; 2m/4m over 6x", StartsAt: start}
}

// A window without traffic (NaN: 0/0) or without a series has no burn:
// null in the JSON, never 0, and no pair fires through it. With no pair
// over its factor the slowest pair is the one read over.
func TestNoDataIsNullAndTheSlowestPairIsChosen(t *testing.T) {
	prom := promfactstest.New(t)
	prom.Set("sum_over_time(", "0.25")   // the budget spent: before the burns, which its query holds
	prom.Set("(count_over_time(", "240") // its history: 4 minutes of the 10 h
	prom.Set("ratio_rate30s{", "NaN")
	prom.Set("ratio_rate1m{", "30")
	prom.Set("ratio_rate2m{", "") // no series
	prom.Set("ratio_rate4m{", "2")
	prom.Set("time_period", "0.4166666666666667")
	c, err := New(prom.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := c.Facts(context.Background(), alert())
	b, _ := json.Marshal(f.Pairs)
	if want := `[{"short":"30s","long":"1m","short_burn":null,"long_burn":30,"factor":14.4,"fired":false},` +
		`{"short":"2m","long":"4m","short_burn":null,"long_burn":2,"factor":6,"fired":false}]`; string(b) != want {
		t.Errorf("pairs\n got %s\nwant %s", b, want)
	}
	if f.Pair != 1 || !f.BurnFrom.Equal(start.Add(-4*time.Minute)) {
		t.Errorf("chosen pair %d from %s, want the slowest (1), 4m before the start", f.Pair, f.BurnFrom)
	}
	// 75 % of 10 h left, at the 4m burn of 2x: 0.75 × 36,000 s ÷ 2.
	if bu := f.Budget; bu == nil || bu.BurnWindow != "4m" || bu.RunsOutSeconds == nil || math.Abs(*bu.RunsOutSeconds-13500) > 1e-6 || bu.RunsOut != "3h45m0s" {
		t.Errorf("budget %+v, want it to run out in 3h45m0s at the 4m burn", f.Budget)
	}
	if w := f.Budget.Words(); w != "25.0% of the 10h budget spent over the last 4m, 75.0% left" {
		t.Errorf("the budget in words: %q", w)
	}
	if len(f.Errors) != 0 {
		t.Errorf("errors %q", f.Errors)
	}
}

// A slow stream is counted when it ends: the burn began no later than the
// earliest start of the slow streams counted in it, though the burn's
// windows first show it then, so the heap's "before" profile is taken
// before those streams ran.
func TestTheBurnBeganWhenItsSlowStreamsDid(t *testing.T) {
	prom := promfactstest.New(t)
	prom.Set("ratio_rate2m{", "") // no short window: the long window's reach, 4m, is the guess
	prom.Set("ratio_rate4m{", "2")
	prom.Exemplars([]promfactstest.Exemplar{
		{RequestID: "long", Tenant: "acme", Seconds: 11, At: start.Add(-4*time.Minute + 5*time.Second)},
		{RequestID: "short", Tenant: "acme", Seconds: 1, At: start.Add(-time.Minute)},
	})
	c, err := New(prom.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := alert()
	a.Exemplars = `gateway_stream_duration_seconds_bucket{route="stream"}`
	f := c.Facts(context.Background(), a)
	if want := start.Add(-4*time.Minute - 6*time.Second); !f.BurnFrom.Equal(want) || len(f.Slowest) != 2 {
		t.Errorf("the burn began at %s (%d slowest), want %s: when the 11 s stream that ended 5 s into the long window began", f.BurnFrom, len(f.Slowest), want)
	}
}

// The short window is over 1 some steps after its burn began: it counted
// the burn's first errors below 1. The burn began where that rise did:
// at the last step that counted no error (0, or no traffic), or no more
// than the step before it (a steady rate of errors), and no further back
// than one short window (2m) before the last step at most 1, over which
// every error counted there came. Steps fall every 5 s from 8m before the
// start; the burn is 7 from 40 s before it.
func TestTheBurnBeganWhereItsRiseDid(t *testing.T) {
	type step struct {
		before time.Duration // the value holds until this long before the start
		value  string
	}
	rise := func(first string, from time.Duration, values ...string) []step {
		steps := []step{{from, first}}
		for k, v := range values {
			steps = append(steps, step{from - time.Duration(k+1)*5*time.Second, v})
		}
		return steps
	}
	var long []step // rising by 0.01 a step from 200 s before the start to 40 s
	for k := range 32 {
		long = append(long, step{195*time.Second - time.Duration(k)*5*time.Second, fmt.Sprint(0.01 * float64(k+1))})
	}
	for _, c := range []struct {
		name  string
		steps []step
		want  time.Duration // BurnFrom, before the start
	}{
		{"rose from 0", rise("0", 60*time.Second, "0.1", "0.2", "0.3", "0.4"), 70 * time.Second},
		{"rose from no traffic", rise("NaN", 60*time.Second, "0.1", "0.2", "0.3", "0.4"), 70 * time.Second},
		{"rose from a steady rate of errors", rise("0.3", 50*time.Second, "0.4", "0.5"), 60 * time.Second},
		{"rose for longer than the short window", long, 170 * time.Second},
		{"from 0 straight over 1", []step{{40 * time.Second, "0"}}, 50 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			prom := promfactstest.New(t)
			prom.Set("ratio_rate2m{", "7")
			prom.Set("ratio_rate4m{", "7")
			for _, s := range c.steps {
				prom.SetBefore("ratio_rate2m{", start.Add(-s.before), s.value)
			}
			cl, err := New(prom.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			f := cl.Facts(context.Background(), alert())
			if want := start.Add(-c.want); f.Pair != 1 || !f.BurnFrom.Equal(want) {
				t.Errorf("pair %d, the burn began %s before the start, want pair 1 and %s", f.Pair, start.Sub(f.BurnFrom), c.want)
			}
		})
	}
}

// The budget's edge cases, in words: nothing left, a burn of 0, and no
// figure at all.
func TestTheBudgetSaysWhenItDoesNotRunOut(t *testing.T) {
	for _, c := range []struct{ spent, burn, runsOut string }{
		{"1.2", "2", "none left"},
		{"1", "2", "none left"},
		{"0.5", "0", "not at this burn"},
		{"0.5", "", "unknown: no burn over the 4m window"},
	} {
		prom := promfactstest.New(t)
		prom.Set("sum_over_time(", c.spent)
		prom.Set("ratio_rate", c.burn)
		prom.Set("time_period", "30")
		client, _ := New(prom.URL, nil)
		f := client.Facts(context.Background(), alert())
		if f.Budget == nil || f.Budget.RunsOut != c.runsOut || f.Budget.RunsOutSeconds != nil || f.Budget.Period != "30d" {
			t.Errorf("spent %s at a burn of %q: %+v, want %q over 30d", c.spent, c.burn, f.Budget, c.runsOut)
		}
	}
	prom := promfactstest.New(t)
	client, _ := New(prom.URL, nil)
	if f := client.Facts(context.Background(), alert()); f.Budget != nil || !strings.Contains(strings.Join(f.Errors, ";"), "the budget: no SLO period") {
		t.Errorf("no budget figures: %+v, %q", f.Budget, f.Errors)
	}
}

// The slowest first, one per request ID (its slowest), at most n; those
// without an ID are each kept.
func TestSlowest(t *testing.T) {
	at := func(s int) time.Time { return start.Add(time.Duration(s) * time.Second) }
	got := Slowest([]incident.Exemplar{
		{RequestID: "a", Seconds: 1, At: at(1)}, {RequestID: "b", Seconds: 3, At: at(2)}, {RequestID: "a", Seconds: 2, At: at(3)},
		{Seconds: 0.5, At: at(4)}, {Seconds: 0.5, At: at(5)}, {RequestID: "c", Seconds: 0.1, At: at(6)},
	}, 4)
	var ids []string
	for _, e := range got {
		ids = append(ids, e.RequestID+"@"+e.At.Format("05"))
	}
	if s := strings.Join(ids, " "); s != "b@02 a@03 @04 @05" {
		t.Errorf("slowest %s, want b@02 a@03 @04 @05", s)
	}
	if got := Slowest(nil, 10); got == nil || len(got) != 0 {
		t.Errorf("none: %#v, want an empty list", got)
	}
}

// The chart's series: one point a step from from to to, NaN where
// Prometheus has none, named by window.
func TestBurnIsOnAGridWithGaps(t *testing.T) {
	prom := promfactstest.New(t)
	prom.Set("ratio_rate2m{", "7.5")
	c, _ := New(prom.URL, nil)
	p, _ := alert().Pairs()
	short, long, err := c.Burn(context.Background(), "llm-gateway-stream-latency", p[1], start.Add(-6*time.Minute), start.Add(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if short.Name != "2m (short)" || long.Name != "4m (long)" || len(short.Points) != ChartSteps+1 || len(long.Points) != ChartSteps+1 {
		t.Fatalf("%s: %d points, %s: %d, want %d", short.Name, len(short.Points), long.Name, len(long.Points), ChartSteps+1)
	}
	for i := range short.Points {
		if short.Points[i].V != 7.5 || !math.IsNaN(long.Points[i].V) {
			t.Fatalf("point %d: %v and %v, want 7.5 and a gap", i, short.Points[i], long.Points[i])
		}
	}
	if q := prom.Asked()[0]; q.Path != "/api/v1/query_range" || !q.Start.Equal(start.Add(-6*time.Minute)) || !q.End.Equal(start.Add(2*time.Minute)) {
		t.Errorf("asked %+v", q)
	}
	if _, _, err := c.Burn(context.Background(), `a"}`, p[1], start, start.Add(time.Minute)); err == nil {
		t.Error("a hostile SLO ID was queried")
	}
}
