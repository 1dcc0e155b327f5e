// Package flight reads a flight-recorder snapshot, an execution trace of a
// process's last seconds, and splits the wall time of each request in it by
// what the request's goroutine was doing: running, in the garbage
// collector's mark assist, waiting for a CPU, blocked on the network, or
// other. That is the half of the write-up's claim a heap profile cannot
// show: that slow streams were slow because the collector took their time.
//
// A request is a trace task of type service.TraceTask that logs its ID
// under service.TraceRequestID when it begins and when it ends; its time is
// its goroutine's from the task's start to its end, clipped to the
// snapshot.
package flight

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"golang.org/x/exp/trace"

	"burnlab/shared/incident"
	"burnlab/shared/service"
)

// MaxRequests is how many of the slowest requests Split keeps.
const MaxRequests = 10

// assistRange is the runtime's name for the mark-assist range of a goroutine.
const assistRange = "GC mark assist"

// The parts a goroutine's time falls in, as incident.RequestTime names them.
const (
	running = iota
	assist
	runnable
	network
	other
	parts
)

// goroutine is what Split knows of one goroutine: its state since when,
// whether it is in mark assist, and the time it has spent in each part.
type goroutine struct {
	state  trace.GoState
	reason string
	since  trace.Time
	known  bool
	assist bool
	spent  [parts]trace.Time
}

// account adds the time from g.since to t to the part g was in.
func (g *goroutine) account(t trace.Time) {
	if g.known && t > g.since {
		g.spent[g.part()] += t - g.since
	}
	g.since = t
}

func (g *goroutine) part() int {
	switch {
	case g.state == trace.GoRunnable:
		return runnable
	case g.assist && (g.state == trace.GoRunning || g.state == trace.GoWaiting):
		return assist
	case g.state == trace.GoRunning:
		return running
	case g.state == trace.GoWaiting && g.reason == "network":
		return network
	}
	return other
}

// request is a task Split follows.
type request struct {
	id         string
	g          trace.GoID
	start, end trace.Time
	began      bool
	ended      bool
	base       [parts]trace.Time // its goroutine's spent when it began
	spent      [parts]trace.Time
}

// Split reads a snapshot and returns the wall-clock window it covers and
// its MaxRequests slowest requests, slowest first.
func Split(r io.Reader) (from, to time.Time, out []incident.RequestTime, err error) {
	// The snapshot comes over the network from whatever -trace-url names,
	// and the reader is an experimental package: a snapshot it cannot make
	// sense of is the incident's error, never the pager's crash.
	defer func() {
		if p := recover(); p != nil {
			from, to, out, err = time.Time{}, time.Time{}, nil, fmt.Errorf("reading the trace: the reader failed: %v", p)
		}
	}()
	rd, err := trace.NewReader(r)
	if err != nil {
		return from, to, nil, fmt.Errorf("reading the trace: %w", err)
	}
	gs := map[trace.GoID]*goroutine{}
	g := func(id trace.GoID) *goroutine {
		if gs[id] == nil {
			gs[id] = &goroutine{}
		}
		return gs[id]
	}
	tasks := map[trace.TaskID]*request{}
	var done []*request
	var first, last trace.Time
	var clock *trace.ClockSnapshot
	for {
		e, err := rd.ReadEvent()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return from, to, nil, fmt.Errorf("reading the trace: %w", err)
		}
		t := e.Time()
		if first == 0 {
			first = t
		}
		last = t
		switch e.Kind() {
		case trace.EventSync:
			if c := e.Sync().ClockSnapshot; c != nil && clock == nil {
				clock = c
			}
		case trace.EventStateTransition:
			st := e.StateTransition()
			if st.Resource.Kind != trace.ResourceGoroutine {
				continue
			}
			gr := g(st.Resource.Goroutine())
			gr.account(t)
			_, gr.state = st.Goroutine()
			gr.reason, gr.known = st.Reason, true
		case trace.EventRangeBegin, trace.EventRangeActive, trace.EventRangeEnd:
			rg := e.Range()
			if rg.Name != assistRange || rg.Scope.Kind != trace.ResourceGoroutine {
				continue
			}
			gr := g(rg.Scope.Goroutine())
			gr.account(t)
			gr.assist = e.Kind() != trace.EventRangeEnd
		case trace.EventTaskBegin:
			if task := e.Task(); task.Type == service.TraceTask {
				gr := g(e.Goroutine())
				gr.account(t)
				tasks[task.ID] = &request{g: e.Goroutine(), start: t, began: true, base: gr.spent}
			}
		case trace.EventLog:
			l := e.Log()
			if l.Category != service.TraceRequestID {
				continue
			}
			rq := tasks[l.Task]
			if rq == nil {
				// Begun before the snapshot: its goroutine has served it
				// since the snapshot's start, so all its time counts.
				rq = &request{g: e.Goroutine(), start: first}
				tasks[l.Task] = rq
			}
			rq.id = l.Message
		case trace.EventTaskEnd:
			rq := tasks[e.Task().ID]
			if rq == nil {
				continue
			}
			delete(tasks, e.Task().ID)
			gr := g(rq.g)
			gr.account(t)
			rq.end, rq.ended, rq.spent = t, true, minus(gr.spent, rq.base)
			done = append(done, rq)
		}
	}
	if clock == nil {
		return from, to, nil, errors.New("the trace has no clock snapshot to place it in time (a trace from before Go 1.25?)")
	}
	for _, rq := range tasks {
		gr := g(rq.g)
		gr.account(last)
		rq.end, rq.spent = last, minus(gr.spent, rq.base)
		done = append(done, rq)
	}
	wall := func(t trace.Time) time.Time { return clock.Wall.Add(time.Duration(t - clock.Trace)) }
	for _, rq := range done {
		if rq.id == "" {
			continue
		}
		out = append(out, rq.time())
	}
	slices.SortFunc(out, func(a, b incident.RequestTime) int {
		return cmp.Or(cmp.Compare(b.Seconds, a.Seconds), cmp.Compare(a.RequestID, b.RequestID))
	})
	return wall(first), wall(last), out[:min(len(out), MaxRequests)], nil
}

func minus(a, b [parts]trace.Time) (d [parts]trace.Time) {
	for i := range a {
		d[i] = a[i] - b[i]
	}
	return d
}

// time is the request's split. Time its goroutine spent before the
// snapshot first placed it in a state is not seen, and goes to Other, so
// the parts add up to the wall time.
func (rq *request) time() incident.RequestTime {
	s := func(t trace.Time) float64 { return time.Duration(t).Seconds() }
	out := incident.RequestTime{RequestID: rq.id, Seconds: s(rq.end - rq.start), Began: rq.began, Ended: rq.ended,
		Running: s(rq.spent[running]), Assist: s(rq.spent[assist]), Runnable: s(rq.spent[runnable]), Network: s(rq.spent[network])}
	out.Other = max(0, out.Seconds-out.Running-out.Assist-out.Runnable-out.Network)
	return out
}
