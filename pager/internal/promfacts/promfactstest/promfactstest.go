// Package promfactstest is a fake Prometheus for the pager's tests. It
// stands in for Prometheus: it answers the three endpoints of Prometheus's
// HTTP API that package promfacts reads (/api/v1/query,
// /api/v1/query_range and /api/v1/query_exemplars) in Prometheus's JSON
// shape, from values a test sets, and records what it was asked, so a test
// can check which queries were sent and for which times.
package promfactstest

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Exemplar is one exemplar the fake serves for every exemplar query.
type Exemplar struct {
	RequestID, Tenant string
	Seconds           float64
	At                time.Time
}

// Asked is one request the fake answered.
type Asked struct {
	Path, Query string
	// Time is an instant query's time; Start and End a range's or an
	// exemplar query's.
	Time, Start, End time.Time
}

// Server is the fake Prometheus.
type Server struct {
	URL string
	srv *httptest.Server
	mu  sync.Mutex
	// values: see Set.
	values    [][2]string
	earlier   []earlier
	exemplars [][]Exemplar
	asked     []Asked
}

// New starts a fake Prometheus, closed when the test ends.
func New(t testing.TB) *Server {
	s := &Server{}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

// Set makes every query containing part answer value ("NaN" for no
// traffic, "" for no series); the first part set that a query contains
// wins.
func (s *Server) Set(part, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.values = append(s.values, [2]string{part, value})
}

// earlier is what a query containing part answers before a time.
type earlier struct {
	part   string
	before time.Time
	value  string
}

// SetBefore makes a query containing part answer value before t (an
// instant query's time, a range query's steps), and what Set says from t
// on: a burn that began at t. Called again for the same part it adds a
// step: at each time the earliest t still ahead says the value (of two
// with the same t, the first set), so a series can rise in stages.
func (s *Server) SetBefore(part string, t time.Time, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.earlier = append(s.earlier, earlier{part, t, value})
}

// at is what query q answers at time t, given v from Set; the caller holds
// s.mu.
func (s *Server) at(q string, t time.Time, v string) string {
	var next time.Time
	for _, e := range s.earlier {
		if strings.Contains(q, e.part) && t.Before(e.before) && (next.IsZero() || e.before.Before(next)) {
			next, v = e.before, e.value
		}
	}
	return v
}

// Exemplars sets what an exemplar query answers: one series per slice.
func (s *Server) Exemplars(series ...[]Exemplar) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.exemplars = series
}

// Asked returns the requests answered so far.
func (s *Server) Asked() []Asked {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Asked(nil), s.asked...)
}

// Close stops the fake: Prometheus down.
func (s *Server) Close() { s.srv.Close() }

func (s *Server) value(query string) (string, bool) {
	for _, v := range s.values {
		if strings.Contains(query, v[0]) {
			return v[1], v[1] != ""
		}
	}
	return "", false
}

func parseTime(v string) time.Time {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return time.Time{}
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(math.Round(frac*1e3))*1e6).UTC()
}

// serve answers as Prometheus does: client_golang POSTs a form first (and
// GETs on a 405), so both are read.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	q := r.Form.Get("query")
	a := Asked{Path: r.URL.Path, Query: q, Time: parseTime(r.Form.Get("time")), Start: parseTime(r.Form.Get("start")), End: parseTime(r.Form.Get("end"))}
	s.mu.Lock()
	s.asked = append(s.asked, a)
	v, ok := s.value(q)
	exemplars := s.exemplars
	s.mu.Unlock()
	metric := map[string]string{"sloth_id": "llm-gateway-stream-latency"}
	var data any
	switch r.URL.Path {
	case "/api/v1/query":
		s.mu.Lock()
		if then := s.at(q, a.Time, v); then != v {
			v, ok = then, then != ""
		}
		s.mu.Unlock()
		result := []any{}
		if ok {
			result = append(result, map[string]any{"metric": metric, "value": []any{float64(a.Time.UnixMilli()) / 1e3, v}})
		}
		data = map[string]any{"resultType": "vector", "result": result}
	case "/api/v1/query_range":
		step, _ := strconv.ParseFloat(r.Form.Get("step"), 64)
		result := []any{}
		if ok && step > 0 {
			var values []any
			for t := a.Start; !t.After(a.End); t = t.Add(time.Duration(step * float64(time.Second))) {
				s.mu.Lock()
				at := s.at(q, t, v)
				s.mu.Unlock()
				values = append(values, []any{float64(t.UnixMilli()) / 1e3, at})
			}
			result = append(result, map[string]any{"metric": metric, "values": values})
		}
		data = map[string]any{"resultType": "matrix", "result": result}
	case "/api/v1/query_exemplars":
		result := []any{}
		for i, series := range exemplars {
			var es []any
			for _, e := range series {
				es = append(es, map[string]any{"labels": map[string]string{"request_id": e.RequestID, "tenant": e.Tenant},
					"value": strconv.FormatFloat(e.Seconds, 'f', -1, 64), "timestamp": float64(e.At.UnixMilli()) / 1e3})
			}
			result = append(result, map[string]any{"seriesLabels": map[string]string{"__name__": "gateway_stream_duration_seconds_bucket", "le": fmt.Sprint(i)}, "exemplars": es})
		}
		data = result
	default:
		w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(w).Encode(map[string]any{"status": "error", "errorType": "not_found", "error": "no " + r.URL.Path})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": data})
}
