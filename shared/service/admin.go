package service

import (
	"net/http"
	"net/http/pprof"
	"regexp"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns a metric registry with the Go runtime and process
// collectors, which the dashboard's allocation and GC panels read.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsGC, collectors.MetricsMemory, collectors.MetricsScheduler,
			// The collector's CPU and the part of it charged to allocating
			// goroutines (mark assist), against the process's CPU: the
			// share of the gateway spent collecting garbage. /cpu/classes/total
			// counts idle CPU too, so it is no denominator.
			collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/cpu/classes/(gc/total|gc/mark/assist|total):cpu-seconds$`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// Readiness is flipped off when a process starts draining, so a load
// balancer stops sending it new work before its listeners close.
type Readiness struct{ draining atomic.Bool }

// Drain marks the process not ready.
func (r *Readiness) Drain() { r.draining.Store(true) }

// AdminMux serves /metrics (OpenMetrics to a scraper that asks for it,
// which carries exemplars), /healthz, /readyz and /debug/pprof/.
func AdminMux(reg *prometheus.Registry, ready *Readiness) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, EnableOpenMetrics: true}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ready != nil && ready.draining.Load() {
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
