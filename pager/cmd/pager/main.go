// Command pager is burnlab's on-call: an Alertmanager webhook receiver that
// logs PAGE / TICKET / RESOLVED, keeps every notification durably, serves
// the incidents with their timelines, captures the gateway's heap profile
// when a page fires and again once it resolves, reads a new page's facts
// (its burn, budget and slowest requests from Prometheus, and what changed
// in the heap, from delta profiles it samples all along), and shows it all
// as web pages with pprof's own UI.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"sync"
	"time"

	"burnlab/pager/internal/heapdelta"
	"burnlab/pager/internal/promfacts"
	"burnlab/pager/internal/store"
	"burnlab/pager/internal/web"
	"burnlab/pager/internal/webhook"
	"burnlab/shared/service"
)

var envs = map[string]string{
	"listen":              "PAGER_LISTEN",
	"data":                "PAGER_DATA",
	"profile-url":         "PAGER_PROFILE_URL",
	"trace-url":           "PAGER_TRACE_URL",
	"profile-window":      "PAGER_PROFILE_WINDOW",
	"profile-concurrency": "PAGER_PROFILE_CONCURRENCY",
	"retention":           "PAGER_RETENTION",
	"max-resolved":        "PAGER_MAX_RESOLVED",
	"token":               "PAGER_TOKEN",
	"external-url":        "PAGER_EXTERNAL_URL",
	"prometheus-url":      "PAGER_PROMETHEUS_URL",
	"gc-job":              "PAGER_GC_JOB",
	"alertmanager-urls":   "PAGER_ALERTMANAGER_URLS",
	"delta-seconds":       "PAGER_DELTA_SECONDS",
	"delta-every":         "PAGER_DELTA_EVERY",
	"delta-keep":          "PAGER_DELTA_KEEP",
	"log-level":           "LOG_LEVEL",
}

func main() {
	service.Main("pager", func(ctx context.Context, args []string) error { return run(ctx, args, os.Stderr) })
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("pager", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:5001", "address of the web UI, the webhooks, /api/incidents, /metrics and /debug/pprof: loopback by default, "+
		"because whoever reaches it can post pages (unless -token is set) and read incidents and profiles (:5001 in a container)")
	data := fs.String("data", "pager-data", "directory of the notification journal and captured profiles")
	profileURL := fs.String("profile-url", "http://gateway:6060/debug/pprof/allocs", "heap profile to capture when a page fires ('' to disable)")
	traceURL := fs.String("trace-url", "http://gateway:6060"+service.FlightRecorderPath, "flight-recorder snapshot to take with each profile: the gateway's last seconds of execution trace, "+
		"split into where its slowest requests' time went ('' to disable)")
	profileWindow := fs.Duration("profile-window", webhook.DefaultProfileWindow, "one profile fetch serves every page within this window, and no second fetch starts in it, "+
		"so an alert storm does not load the gateway it diagnoses (0: a fetch for each page)")
	profileConcurrency := fs.Int("profile-concurrency", webhook.DefaultMaxFetches, "profile fetches in flight at once, at most")
	retention := fs.Duration("retention", store.DefaultRetention, "how long a resolved incident and its profiles are kept after its last event, and a firing one after Alertmanager last sent it")
	maxResolved := fs.Int("max-resolved", store.DefaultMaxResolved, "how many resolved incidents are kept at most, the newest: what a restart reads stays bounded")
	token := fs.String("token", "", "bearer token Alertmanager must send (empty: none)")
	externalURL := fs.String("external-url", "http://127.0.0.1:5001", "the pager's base URL as a browser reaches it: the incidents' links in the API and the log lines")
	prometheusURL := fs.String("prometheus-url", "http://prometheus:9090", "Prometheus to read a new page's burn, budget and slowest requests from, and its burn chart ('' to disable)")
	gcJob := fs.String("gc-job", "gateway", "Prometheus job of the process -profile-url profiles: a page's facts read its garbage collector's share of CPU before and during the burn ('' to disable)")
	alertmanagerURLs := fs.String("alertmanager-urls", "http://alertmanager:9093", "comma-separated Alertmanagers, every one of an HA set, that a page's heap verdict is posted to, "+
		"so that the page's receivers get it in a message of their own ('' to disable)")
	deltaSeconds := fs.Int("delta-seconds", heapdelta.DefaultSeconds, "length of each delta heap profile taken from -profile-url (?seconds=), "+
		"so a page can compare the gateway's allocation before and during its burn")
	deltaEvery := fs.Duration("delta-every", heapdelta.DefaultEvery, "time between the starts of two delta heap profiles: longer than -delta-seconds")
	deltaKeep := fs.Int("delta-keep", heapdelta.DefaultKeep, "delta heap profiles kept, the newest: with -delta-every, how far back before a burn the pager can look")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	service.Usage(fs, envs, "pager: an Alertmanager webhook receiver for burnlab's on-call\n\nFlags:\n")
	if err := service.Parse(fs, args, envs); err != nil {
		return err
	}
	log, err := service.NewLogger(stderr, *logLevel, "pager")
	if err != nil {
		return err
	}
	if *profileWindow < 0 || *profileConcurrency < 1 {
		return fmt.Errorf("-profile-window %s and -profile-concurrency %d: want a window of 0 or more and at least one fetch", *profileWindow, *profileConcurrency)
	}
	if *retention <= 0 || *maxResolved < 1 {
		return fmt.Errorf("-retention %s and -max-resolved %d: want a time and a number above 0", *retention, *maxResolved)
	}
	// The delta settings are checked even without -profile-url, so a bad
	// one is found before it is turned on. heapdelta takes 0 for its
	// default; a flag of 0 is a mistake, not a wish for the default.
	deltas := heapdelta.Config{URL: cmp.Or(*profileURL, "http://gateway:6060/debug/pprof/allocs"), Seconds: *deltaSeconds, Every: *deltaEvery, Keep: *deltaKeep, Log: log}
	err = deltas.Validate()
	if *deltaSeconds < 1 || *deltaEvery <= 0 || *deltaKeep < 1 {
		err = errors.New("want -delta-seconds and -delta-keep of 1 or more, and a -delta-every above 0")
	}
	if err != nil {
		return fmt.Errorf("-profile-url %q, -delta-seconds %d, -delta-every %s, -delta-keep %d: %w", *profileURL, *deltaSeconds, *deltaEvery, *deltaKeep, err)
	}
	if *traceURL != "" {
		if u, err := url.Parse(*traceURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("-trace-url %q: want an http:// or https:// URL", *traceURL)
		}
	}
	var prom *promfacts.Client
	if *prometheusURL != "" {
		if prom, err = promfacts.New(*prometheusURL, nil); err != nil {
			return fmt.Errorf("-prometheus-url: %w", err)
		}
	}
	alertmanagers, err := webhook.ParseAlertmanagers(*alertmanagerURLs)
	if err != nil {
		return fmt.Errorf("-alertmanager-urls: %w", err)
	}
	compacted := func(c store.Compaction) {
		ev := log.Info()
		if c.Err != nil {
			ev = log.Error().Err(c.Err)
		}
		ev.Int("dropped", c.Dropped).Int("kept", c.Kept).Int("profile_files_removed", c.Files).
			Int64("bytes_before", c.Before).Int64("bytes_after", c.After).Dur("took", c.Took).
			Msg("journal compacted: resolved incidents past -retention or -max-resolved dropped")
	}
	st, err := store.Open(*data, store.Options{Retention: *retention, MaxResolved: *maxResolved, OnCompact: compacted})
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
	log.Info().Str("data", *data).Int("incidents", st.Len()).Str("profile_url", *profileURL).Str("trace_url", *traceURL).
		Dur("profile_window", *profileWindow).Int("profile_concurrency", *profileConcurrency).
		Str("prometheus_url", *prometheusURL).Strs("alertmanagers", alertmanagers).Int("delta_seconds", *deltaSeconds).Dur("delta_every", *deltaEvery).Msg("starting")
	reg := service.NewRegistry()
	cfg := webhook.Config{Store: st, Log: log, Token: *token, ProfileURL: *profileURL, TraceURL: *traceURL, ExternalURL: *externalURL,
		ProfileWindow: *profileWindow, MaxFetches: *profileConcurrency, Prometheus: prom, GCJob: *gcJob, Alertmanagers: alertmanagers}
	// The sampler runs while the server does, and is stopped and waited
	// for before run returns: a delta open on the gateway is cut short.
	samplerCtx, stopSampler := context.WithCancel(ctx)
	var sampling sync.WaitGroup
	defer func() { stopSampler(); sampling.Wait() }()
	if *profileURL != "" {
		sampler := heapdelta.New(deltas, reg)
		cfg.Deltas = sampler
		sampling.Go(func() { sampler.Run(samplerCtx) })
	}
	h := webhook.New(cfg, reg)
	ui, err := web.New(web.Config{Store: st, Log: log, Prometheus: prom})
	if err != nil {
		return err
	}
	var ready service.Readiness
	mux := service.AdminMux(reg, &ready)
	mux.Handle("/webhook/", h)
	mux.Handle("/api/", h)
	// The snapshot is served as the API's files are; the web UI's page
	// links to it beside the incident.
	mux.Handle("GET /incidents/{id}/trace", h)
	mux.Handle("/", ui)
	err = service.Serve(ctx, log, service.Drain{Ready: &ready, Timeout: 10 * time.Second}, service.Server{Name: "pager", Addr: *listen, Handler: mux})
	closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h.Close(closeCtx)
	return err
}
