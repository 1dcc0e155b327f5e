package store

import (
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"

	"burnlab/shared/incident"
)

// PageSize is how many incidents one page of the list holds, in the web
// UI and the API alike: 50,000 incidents were 22.9 MB of HTML and 70 MB of
// JSON in one answer.
const PageSize = 50

// Filter picks incidents; an empty field takes any.
type Filter struct {
	Status   string // "firing" or "resolved"
	Severity string
	SLO      string
}

func (f Filter) match(inc *incident.Incident) bool {
	return (f.Status == "" || inc.Status == f.Status) && (f.Severity == "" || inc.Severity == f.Severity) && (f.SLO == "" || inc.SLO == f.SLO)
}

// Values is the filter as query parameters, page among them unless it is
// the first.
func (f Filter) Values(page int) url.Values {
	v := url.Values{}
	for k, x := range map[string]string{"status": f.Status, "severity": f.Severity, "slo": f.SLO} {
		if x != "" {
			v.Set(k, x)
		}
	}
	if page > 1 {
		v.Set("page", strconv.Itoa(page))
	}
	return v
}

// maxParam bounds a filter's value: no label the pager stores is longer
// than what fits in a URL anyway, and the error can quote it.
const maxParam = 256

// ParseQuery reads a list's query: `page` (from 1, the default), and the
// filters `status` (firing or resolved), `severity` and `slo` (a label's
// value). Anything else in the query is left alone. A bad value is an
// error that says what is wanted; a page past the last is the caller's to
// refuse, once it knows the last (Page.Pages).
func ParseQuery(q url.Values) (Filter, int, error) {
	one := func(k string) (string, error) {
		switch vs := q[k]; {
		case len(vs) > 1:
			return "", fmt.Errorf("%s is given %d times, want it once", k, len(vs))
		case len(vs) == 1 && len(vs[0]) > maxParam:
			return "", fmt.Errorf("%s is %d bytes long, want at most %d", k, len(vs[0]), maxParam)
		case len(vs) == 1:
			return vs[0], nil
		}
		return "", nil
	}
	var f Filter
	var err error
	if f.Status, err = one("status"); err != nil {
		return Filter{}, 0, err
	}
	if f.Status != "" && f.Status != "firing" && f.Status != "resolved" {
		return Filter{}, 0, fmt.Errorf("status %q: want firing or resolved", f.Status)
	}
	if f.Severity, err = one("severity"); err != nil {
		return Filter{}, 0, err
	}
	if f.SLO, err = one("slo"); err != nil {
		return Filter{}, 0, err
	}
	p, err := one("page")
	if err != nil || p == "" {
		return f, 1, err
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 {
		return Filter{}, 0, fmt.Errorf("page %.40q: want a whole number from 1", p)
	}
	return f, n, nil
}

// Page is one page of a list of incidents, newest first (by start).
type Page struct {
	Incidents []incident.Incident
	Number    int // from 1; past Pages, Incidents is empty
	Pages     int // of the incidents the filter takes; at least 1
	Total     int // incidents the filter takes
	Firing    int // incidents firing, whatever the filter
}

// List returns page number (from 1) of size incidents that f takes,
// newest first.
func (s *Store) List(f Filter, number, size int) Page {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := Page{Number: number}
	from := math.MaxInt
	if number-1 < math.MaxInt/size {
		from = (number - 1) * size
	}
	for _, e := range slices.Backward(s.order) {
		if e.inc.Status == "firing" {
			p.Firing++
		}
		if !f.match(&e.inc) {
			continue
		}
		if p.Total >= from && len(p.Incidents) < size {
			p.Incidents = append(p.Incidents, e.copy())
		}
		p.Total++
	}
	p.Pages = 1
	if p.Total > 0 {
		p.Pages = (p.Total-1)/size + 1
	}
	return p
}

// Len is how many incidents the store holds.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.order)
}
