package strategies

import (
	"context"
	"fmt"
	"slices"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
)

// An Agreement compares when one severity of an SLO's shipped alerts first
// fired in a live Prometheus with when it first fires as the same rules
// are replayed here over that Prometheus's own samples of the gateway.
type Agreement struct {
	SLO      string     `json:"slo"`
	Severity string     `json:"severity"`
	Live     *time.Time `json:"live"`     // nil: it never fired there
	Replayed *time.Time `json:"replayed"` // nil: it never fired here
	Agree    bool       `json:"agree"`
}

// gatewayNames are the series the rules read; the replay takes them all.
const gatewayNames = `gateway_stream_duration_seconds_bucket|gateway_stream_duration_seconds_count|gateway_stream_ttft_seconds_bucket|gateway_stream_ttft_seconds_count|gateway_upstream_errors_total`

// A ReplayQuery is what Replay reads: the SLO, its window table, and the
// time Over before At.
type ReplayQuery struct {
	Windows Windows
	SLO     SLO
	At      time.Time
	Over    time.Duration
}

// Replay reads the raw samples of the gateway's series that a live
// Prometheus scraped over the query's time, evaluates the shipped
// strategy over them at the table's evaluation interval, and compares each
// severity's first firing with the live ALERTS series. They agree when
// both fired within one scrape plus one evaluation of each other (the
// live rule group and scrapes run at phases of their own), or neither
// fired. shipped must hold its own recordings: the replay evaluates its
// groups alone.
func Replay(ctx context.Context, api promv1.API, shipped Strategy, q ReplayQuery) ([]Agreement, error) {
	w, o, at, over := q.Windows, q.SLO, q.At, q.Over
	rng := model.Duration(over).String()
	raw, err := matrix(ctx, api, fmt.Sprintf(`{__name__=~"%s"}[%s]`, gatewayNames, rng), at)
	if err != nil {
		return nil, err
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("replay: no gateway series in the last %s", rng)
	}
	live, err := matrix(ctx, api, fmt.Sprintf(`ALERTS{alertstate="firing",sloth_slo=%q}[%s]`, o.Name, rng), at)
	if err != nil {
		return nil, err
	}
	ev, err := newEvaluator(ctx, w, []Strategy{shipped})
	if err != nil {
		return nil, err
	}
	defer ev.close()

	first := model.Latest
	for _, s := range raw {
		if len(s.Values) > 0 {
			first = min(first, s.Values[0].Timestamp)
		}
	}
	ls := make([]labels.Labels, len(raw))
	for i, s := range raw {
		m := map[string]string{}
		for k, v := range s.Metric {
			m[string(k)] = string(v)
		}
		ls[i] = labels.FromMap(m)
	}
	next := make([]int, len(raw))
	replayed := map[string]time.Time{}
	epoch := time.Unix(0, 0)
	for t := first.Time().Truncate(w.Eval).Add(w.Eval); !t.After(at); t = t.Add(w.Eval) {
		app := ev.st.Appender(ctx)
		for i, s := range raw {
			for ; next[i] < len(s.Values) && !s.Values[next[i]].Timestamp.Time().After(t); next[i]++ {
				v := s.Values[next[i]]
				if _, err := app.Append(0, ls[i], int64(v.Timestamp), float64(v.Value)); err != nil {
					return nil, fmt.Errorf("replay: appending %s: %w", ls[i], err)
				}
			}
		}
		if err := app.Commit(); err != nil {
			return nil, err
		}
		firing, err := ev.eval(ctx, t.Sub(epoch))
		if err != nil {
			return nil, err
		}
		for k := range firing {
			if _, ok := replayed[k[1]]; !ok {
				replayed[k[1]] = t
			}
		}
	}
	liveAt := map[string]time.Time{}
	for _, s := range live {
		sev := string(s.Metric["severity"])
		if len(s.Values) > 0 {
			if t, ok := liveAt[sev]; !ok || s.Values[0].Timestamp.Time().Before(t) {
				liveAt[sev] = s.Values[0].Timestamp.Time()
			}
		}
	}
	var out []Agreement
	for _, sev := range []string{"page", "ticket"} {
		a := Agreement{SLO: o.Name, Severity: sev}
		if t, ok := liveAt[sev]; ok {
			a.Live = &t
		}
		if t, ok := replayed[sev]; ok {
			a.Replayed = &t
		}
		a.Agree = (a.Live == nil) == (a.Replayed == nil)
		if a.Live != nil && a.Replayed != nil {
			a.Agree = absDur(a.Live.Sub(*a.Replayed)) <= w.Scrape+w.Eval
		}
		out = append(out, a)
	}
	return out, nil
}

func absDur(d time.Duration) time.Duration { return max(d, -d) }

// matrix runs an instant query for a range vector: its raw samples.
func matrix(ctx context.Context, api promv1.API, q string, at time.Time) (model.Matrix, error) {
	v, warnings, _, err := api.Query(ctx, q, at)
	if err != nil {
		return nil, fmt.Errorf("replay: %s: %w", q, err)
	}
	if len(warnings) > 0 {
		return nil, fmt.Errorf("replay: %s: %v", q, warnings)
	}
	m, ok := v.(model.Matrix)
	if !ok {
		return nil, fmt.Errorf("replay: %s: a %s, not a range vector", q, v.Type())
	}
	for _, s := range m {
		slices.SortFunc(s.Values, func(a, b model.SamplePair) int { return int(a.Timestamp - b.Timestamp) })
	}
	return m, nil
}
