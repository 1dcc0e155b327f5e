package pager

import (
	"context"
	"fmt"
	"time"

	"burnlab/shared/incident"

	"github.com/grafana/grafana-plugin-sdk-go/data"
)

// The frames of a `facts` query, by name. Each is answered even when
// empty, so a panel that picks one by name keeps its columns.
const (
	BurnFrame    = "burn"
	BudgetFrame  = "budget"
	SlowestFrame = "slowest"
	HeapFrame    = "heap"
)

// facts are the facts the pager read when incident id fired or, with none
// chosen, those of the newest page that has them (pick), as four frames:
// the burn of each window pair, the budget, the slowest requests and the
// heap's verdict. What the pager could not read (Facts.Errors) is a warning
// on every frame; an incident without facts, or no page with any, is four
// empty frames with a notice saying so, not an error.
func (d *Datasource) facts(ctx context.Context, id string) (data.Frames, error) {
	pick, err := d.pick(ctx, id, func(inc *incident.Incident) bool { return inc.Facts != nil })
	if err != nil {
		return nil, err
	}
	var f *incident.Facts
	if pick != nil {
		f = pick.Facts
	}
	frames := data.Frames{burnFrame(f), budgetFrame(f), slowestFrame(f), heapFrame(f)}
	var notices []data.Notice
	switch {
	case pick == nil:
		notices = append(notices, info("no facts yet: none of the pager's newest pages has its facts read"))
	case f == nil && pick.Severity != "page" && pick.Severity != "ticket":
		notices = append(notices, info(fmt.Sprintf("incident %s has no facts: only pages and tickets get their facts read, and this is a %s", pick.ID, pick.Severity)))
	case f == nil:
		notices = append(notices, info(fmt.Sprintf("incident %s has no facts yet: the pager reads them when the %s fires", pick.ID, pick.Severity)))
	default:
		for _, e := range f.Errors {
			notices = append(notices, data.Notice{Severity: data.NoticeSeverityWarning, Text: "not read: " + e})
		}
	}
	for _, fr := range frames {
		fr.AppendNotices(notices...)
	}
	if f != nil {
		// Empty for want of what to read, not for a failure: said on the
		// frame alone, as the pager's page says it.
		switch {
		case f.ExemplarQuery == "":
			frames[2].AppendNotices(info("the alert names no exemplar series (no exemplars annotation): no slowest requests"))
		case len(f.Slowest) == 0:
			frames[2].AppendNotices(info("no exemplars of " + f.ExemplarQuery + " in the burn window"))
		}
		if f.Heap == nil {
			frames[3].AppendNotices(info("the heap was not compared (yet): the pager compares its delta heap profiles when a page fires, unless it runs without -profile-url"))
		}
	}
	return frames, nil
}

func info(text string) data.Notice { return data.Notice{Severity: data.NoticeSeverityInfo, Text: text} }

// unit sets the display unit of a field; "suffix:x" shows a burn as 8.1x.
func unit(f *data.Field, u string) *data.Field { return f.SetConfig(&data.FieldConfig{Unit: u}) }

// burnFrame is one row per window pair, in the alert's order: its windows
// ("2m/4m"), the burn over each (null when Prometheus had no figure), the
// factor both must pass and whether they did.
func burnFrame(f *incident.Facts) *data.Frame {
	fr := data.NewFrame(BurnFrame,
		data.NewField("windows", nil, []string{}),
		unit(data.NewField("short burn", nil, []*float64{}), "suffix:x"),
		unit(data.NewField("long burn", nil, []*float64{}), "suffix:x"),
		unit(data.NewField("factor", nil, []float64{}), "suffix:x"),
		data.NewField("fired", nil, []bool{}),
	)
	if f == nil {
		return fr
	}
	for _, p := range f.Pairs {
		fr.AppendRow(p.Short+"/"+p.Long, p.ShortBurn, p.LongBurn, p.Factor, p.Fired)
	}
	return fr
}

// budgetFrame is one row, the budget when the alert fired; none when it
// could not be read. History is how much of the period the figures rest
// on ("4m" of a "10h" period).
func budgetFrame(f *incident.Facts) *data.Frame {
	fr := data.NewFrame(BudgetFrame,
		unit(data.NewField("spent %", nil, []float64{}), "percent"),
		unit(data.NewField("left %", nil, []float64{}), "percent"),
		data.NewField("period", nil, []string{}),
		data.NewField("history", nil, []string{}),
		data.NewField("burn window", nil, []string{}),
		unit(data.NewField("burn", nil, []*float64{}), "suffix:x"),
		data.NewField("runs out", nil, []string{}),
		unit(data.NewField("runs out seconds", nil, []*float64{}), "s"),
	)
	if f == nil || f.Budget == nil {
		return fr
	}
	b := f.Budget
	fr.AppendRow(b.SpentPct, b.LeftPct, b.Period, b.History, b.BurnWindow, b.Burn, b.RunsOut, b.RunsOutSeconds)
	return fr
}

// slowestFrame is one row per exemplar of the burn window, slowest first.
func slowestFrame(f *incident.Facts) *data.Frame {
	fr := data.NewFrame(SlowestFrame,
		data.NewField("request ID", nil, []string{}),
		data.NewField("tenant", nil, []string{}),
		unit(data.NewField("seconds", nil, []float64{}), "s"),
		data.NewField("time", nil, []time.Time{}),
	)
	if f == nil {
		return fr
	}
	for _, e := range f.Slowest {
		fr.AppendRow(e.RequestID, e.Tenant, e.Seconds, e.At)
	}
	return fr
}

// heapFrame is one row, the verdict of the heap's delta profiles: whether a
// function's allocation rate grew past the threshold, which, in words, and
// its rate before and during the burn. When the pager could not compare,
// the words say why and the rates are null; not compared yet, no row.
func heapFrame(f *incident.Facts) *data.Frame {
	fr := data.NewFrame(HeapFrame,
		data.NewField("changed", nil, []bool{}),
		data.NewField("function", nil, []string{}),
		data.NewField("words", nil, []string{}),
		unit(data.NewField("before", nil, []*float64{}), "Bps"),
		unit(data.NewField("during", nil, []*float64{}), "Bps"),
	)
	if f == nil || f.Heap == nil {
		return fr
	}
	h := f.Heap
	if h.Error != "" {
		fr.AppendRow(false, "", "not compared: "+h.Error, (*float64)(nil), (*float64)(nil))
		return fr
	}
	before, during := h.Before, h.During
	fr.AppendRow(h.Changed, h.Function, h.Words, &before, &during)
	return fr
}
