package targets

import (
	"net/url"
	"path"
	"slices"
	"strconv"
)

// A Kind is a pprof profile a page can take of every process of a rule:
// its name in the config, its last path element beside the heap's
// (/debug/pprof/<elem>), and the sample type its top ranks by.
type Kind struct {
	Name, Elem, SampleType string
}

// Heap is the write-up's profile, always taken first: allocations since
// the process started, ranked by alloc_space.
var Heap = Kind{"heap", "allocs", "alloc_space"}

// Kinds are the profiles a rule can take: the heap, and those its
// Profiles add. A mutex or block profile is empty unless the process sets
// runtime.SetMutexProfileFraction or SetBlockProfileRate.
var Kinds = map[string]Kind{
	Heap.Name:   Heap,
	"cpu":       {"cpu", "profile", "cpu"},
	"goroutine": {"goroutine", "goroutine", "goroutine"},
	"mutex":     {"mutex", "mutex", "delay"},
	"block":     {"block", "block", "delay"},
}

// ExtraKinds are the names of the kinds a rule's Profiles may list: all
// but the heap, which is always taken.
func ExtraKinds() []string {
	var out []string
	for k := range Kinds {
		if k != Heap.Name {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// URLFor is where the target serves kind k: its heap profile's URL with
// the last path element k's. A cpu profile samples for seconds.
func (t Target) URLFor(k Kind, seconds int) string {
	if k == Heap {
		return t.URL
	}
	u, err := url.Parse(t.URL)
	if err != nil { // checked when the config was
		return t.URL
	}
	u.Path, u.RawQuery = path.Join(path.Dir(u.Path), k.Elem), ""
	if k.Name == "cpu" {
		u.RawQuery = "seconds=" + strconv.Itoa(seconds)
	}
	return u.String()
}
