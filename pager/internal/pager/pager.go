// Package pager runs burnlab's on-call: the journal (store), the webhook
// receiver (webhook), the incidents' lifecycle (lifecycle), the rolling
// delta heap sampler (heapdelta) and the web UI with the API (web), on one
// server that drains on shutdown. The command fills its Config from flags; Run does the work.
package pager

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"burnlab/pager/internal/heapdelta"
	"burnlab/pager/internal/lifecycle"
	"burnlab/pager/internal/store"
	"burnlab/pager/internal/targets"
	"burnlab/pager/internal/web"
	"burnlab/pager/internal/webhook"
	"burnlab/shared/service"
)

// Config is a checked configuration: the command's Validate made it.
type Config struct {
	Listen string // the one listener: web UI, webhooks, API, metrics, pprof
	Data   string // the journal's and the profiles' directory
	// PrometheusURL is where Webhook.Prometheus reads, for the log; "" for
	// none.
	PrometheusURL string
	Log           zerolog.Logger
	Store         store.Options // Run sets OnCompact
	// Webhook is the receiver's; Run sets its Sink and Log.
	Webhook webhook.Config
	// Lifecycle is what acts on each accepted alert; Run sets its Store,
	// Log, Discovery and Deltas.
	Lifecycle lifecycle.Config
	// Deltas is the delta heap sampler's, which runs only when
	// Lifecycle.ProfileURL is set and, with a pager config, a rule is
	// sampled; Run sets its Log.
	Deltas heapdelta.Config
}

// Run opens the journal and serves until ctx ends, then drains, stops the
// sampler and waits for the lifecycle's work in flight (10 s at most).
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Log
	compacted := func(c store.Compaction) {
		ev := log.Info()
		if c.Err != nil {
			ev = log.Error().Err(c.Err)
		}
		ev.Int("dropped", c.Dropped).Int("kept", c.Kept).Int("profile_files_removed", c.Files).
			Int64("bytes_before", c.Before).Int64("bytes_after", c.After).Dur("took", c.Took).
			Msg("journal compacted: resolved incidents past -retention or -max-resolved dropped")
	}
	opts := cfg.Store
	opts.OnCompact = compacted
	st, err := store.Open(cfg.Data, opts)
	if err != nil {
		return err
	}
	defer st.Close()
	if n := st.Skipped(); n > 0 || st.Cut() > 0 {
		log.Warn().Int("lines", n).Int64("torn_bytes_cut", st.Cut()).
			Msg("journal lines unreadable: a torn last line is a write cut short by a crash, never acknowledged, and was cut off")
	}
	if c := st.Opened(); c.Ran {
		compacted(c)
	}
	lc := cfg.Lifecycle
	ev := log.Info()
	if lc.Targets != nil {
		ev = ev.Str("targets", lc.Targets.File()).Int("rules", len(lc.Targets.Rules))
	} else {
		// The flags' URLs are the processes only without a config: with
		// one, its rules name them, and the flags' defaults would mislead.
		ev = ev.Str("profile_url", lc.ProfileURL).Str("trace_url", lc.TraceURL)
	}
	ev.Str("data", cfg.Data).Int("incidents", st.Len()).
		Dur("profile_window", lc.ProfileWindow).Int("profile_concurrency", lc.MaxFetches).
		Str("prometheus_url", cfg.PrometheusURL).Strs("alertmanagers", lc.Alertmanagers).
		Int("delta_seconds", cfg.Deltas.Seconds).Dur("delta_every", cfg.Deltas.Every).Msg("starting")
	reg := service.NewRegistry()
	lc.Store, lc.Log = st, log
	if lc.Prometheus != nil {
		lc.Discovery = lc.Prometheus
	}
	// The sampler runs while the server does, and is stopped and waited
	// for before Run returns: a delta open on the gateway is cut short.
	samplerCtx, stopSampler := context.WithCancel(ctx)
	var sampling sync.WaitGroup
	defer func() { stopSampler(); sampling.Wait() }()
	// One sampler per sampled rule, its metrics labelled with the rule's
	// name (a config's, never a request's): the flags' one rule samples
	// -profile-url, and a config's rule its processes, found as a page's
	// are, every one at each delta.
	sample := func(rule string, deltas heapdelta.Config) *heapdelta.Sampler {
		deltas.Log = log.With().Str("rule", rule).Logger()
		s := heapdelta.New(deltas, prometheus.WrapRegistererWith(prometheus.Labels{"rule": rule}, reg))
		sampling.Go(func() { s.Run(samplerCtx) })
		return s
	}
	if lc.Targets == nil && lc.ProfileURL != "" {
		lc.Deltas = sample(targets.DefaultRule, cfg.Deltas)
	}
	if lc.Targets != nil {
		for i := range lc.Targets.Rules {
			r := &lc.Targets.Rules[i]
			if !r.Sampled {
				continue
			}
			deltas := cfg.Deltas
			deltas.URL, deltas.CountsURL, deltas.Concurrency = "", "", r.Concurrency
			deltas.Processes = func(ctx context.Context) ([]string, error) {
				ts, err := targets.Resolve(ctx, lc.Discovery, r)
				urls := make([]string, len(ts))
				for i, t := range ts {
					urls[i] = t.URL
				}
				return urls, err
			}
			if lc.RuleDeltas == nil {
				lc.RuleDeltas = map[string]lifecycle.Deltas{}
			}
			lc.RuleDeltas[r.Name] = sample(r.Name, deltas)
		}
	}
	life := lifecycle.New(lc, reg)
	wh := cfg.Webhook
	wh.Sink, wh.Log = life, log
	h := webhook.New(wh, reg)
	ui, err := web.New(web.Config{Store: st, Log: log, Prometheus: lc.Prometheus, ExternalURL: wh.ExternalURL})
	if err != nil {
		return err
	}
	var ready service.Readiness
	mux := service.AdminMux(reg, &ready)
	mux.Handle("/webhook/", h)
	mux.Handle("/", ui)
	err = service.Serve(ctx, log, service.Drain{Ready: &ready, Timeout: 10 * time.Second}, service.Server{Name: "pager", Addr: cfg.Listen, Handler: mux})
	closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	life.Close(closeCtx)
	return err
}
