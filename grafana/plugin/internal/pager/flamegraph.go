package pager

import (
	"fmt"
	"slices"

	"github.com/google/pprof/profile"
	"github.com/grafana/grafana-plugin-sdk-go/data"
)

// node is one function in a call tree of allocation.
type node struct {
	name     string
	value    int64 // this node and everything it calls
	children map[string]*node
}

// FlameGraph turns a profile's sampleType samples into the nested-set frame
// Grafana's flame graph panel reads: one row per node, depth-first
// pre-order from a single root, with its level, total value, self value and
// label. Children are ordered by name, so the frame is deterministic.
func FlameGraph(p *profile.Profile, sampleType string) (*data.Frame, error) {
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == sampleType {
			idx = i
		}
	}
	if idx < 0 {
		return nil, fmt.Errorf("profile has no %q samples", sampleType)
	}
	root := &node{name: "total", children: map[string]*node{}}
	for _, s := range p.Sample {
		v := s.Value[idx]
		root.value += v
		n := root
		// Locations run leaf first and, within one, inlined frames come
		// before their caller: walk both backwards to go root first.
		for i := len(s.Location) - 1; i >= 0; i-- {
			lines := s.Location[i].Line
			for j := len(lines) - 1; j >= 0; j-- {
				name := "?"
				if lines[j].Function != nil {
					name = lines[j].Function.Name
				}
				c := n.children[name]
				if c == nil {
					c = &node{name: name, children: map[string]*node{}}
					n.children[name] = c
				}
				c.value += v
				n = c
			}
		}
	}
	var levels, values, selves []int64
	var labels []string
	var walk func(n *node, level int64)
	walk = func(n *node, level int64) {
		self := n.value
		names := make([]string, 0, len(n.children))
		for name, c := range n.children {
			names = append(names, name)
			self -= c.value
		}
		slices.Sort(names)
		levels, values, selves, labels = append(levels, level), append(values, n.value), append(selves, self), append(labels, n.name)
		for _, name := range names {
			walk(n.children[name], level+1)
		}
	}
	walk(root, 0)
	unit := &data.FieldConfig{Unit: "bytes"}
	frame := data.NewFrame("flamegraph",
		data.NewField("level", nil, levels),
		data.NewField("value", nil, values).SetConfig(unit),
		data.NewField("self", nil, selves).SetConfig(unit),
		data.NewField("label", nil, labels),
	)
	frame.Meta = &data.FrameMeta{PreferredVisualization: data.VisTypeFlameGraph}
	return frame, nil
}
