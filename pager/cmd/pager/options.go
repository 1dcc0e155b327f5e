package main

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"time"

	"burnlab/pager/internal/heapdelta"
	"burnlab/pager/internal/lifecycle"
	"burnlab/pager/internal/pager"
	"burnlab/pager/internal/promfacts"
	"burnlab/pager/internal/store"
	"burnlab/pager/internal/targets"
	"burnlab/pager/internal/webhook"
	"burnlab/shared/service"
)

// envs are the flags' environment variables, as compose and Kubernetes
// set them.
var envs = map[string]string{
	"listen":              "PAGER_LISTEN",
	"data":                "PAGER_DATA",
	"profile-url":         "PAGER_PROFILE_URL",
	"targets":             "PAGER_TARGETS",
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

// options are the command's flags, filled by register and checked by
// Validate, which turns them into the pager's Config.
type options struct {
	listen, data, logLevel  string
	profileURL, traceURL    string
	targets                 string
	check                   bool
	profileWindow           time.Duration
	profileConcurrency      int
	retention               time.Duration
	maxResolved             int
	token, externalURL      string
	prometheusURL, gcJob    string
	alertmanagerURLs        string
	deltaSeconds, deltaKeep int
	deltaEvery              time.Duration
}

func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.listen, "listen", "127.0.0.1:5001", "address of the web UI, the webhooks, /api/incidents, /metrics and /debug/pprof: loopback by default, "+
		"because whoever reaches it can post pages (unless -token is set) and read incidents and profiles (:5001 in a container)")
	fs.StringVar(&o.data, "data", "pager-data", "directory of the notification journal and captured profiles")
	fs.StringVar(&o.profileURL, "profile-url", "http://gateway:6060/debug/pprof/allocs", "heap profile to capture when a page fires ('' to disable)")
	fs.StringVar(&o.targets, "targets", "", "pager config (YAML) mapping alerts to the processes to profile, found through Prometheus's scrape targets (docs/pager.md); "+
		"without it every alert profiles -profile-url, and with it -profile-url is not used: each rule names its processes")
	fs.BoolVar(&o.check, "check", false, "check the flags and the -targets file, say what is wrong, and exit (0: all good): for a config's CI")
	fs.StringVar(&o.traceURL, "trace-url", "http://gateway:6060"+service.FlightRecorderPath, "flight-recorder snapshot to take with each profile: the gateway's last seconds of execution trace, "+
		"split into where its slowest requests' time went ('' to disable)")
	fs.DurationVar(&o.profileWindow, "profile-window", lifecycle.DefaultProfileWindow, "one profile fetch serves every page within this window, and no second fetch starts in it, "+
		"so an alert storm does not load the gateway it diagnoses (0: a fetch for each page)")
	fs.IntVar(&o.profileConcurrency, "profile-concurrency", lifecycle.DefaultMaxFetches, "profile fetches in flight at once, at most")
	fs.DurationVar(&o.retention, "retention", store.DefaultRetention, "how long a resolved incident and its profiles are kept after its last event, and a firing one after Alertmanager last sent it")
	fs.IntVar(&o.maxResolved, "max-resolved", store.DefaultMaxResolved, "how many resolved incidents are kept at most, the newest: what a restart reads stays bounded")
	fs.StringVar(&o.token, "token", "", "bearer token Alertmanager must send (empty: none)")
	fs.StringVar(&o.externalURL, "external-url", "http://127.0.0.1:5001", "the pager's base URL as a browser reaches it: the incidents' links in the API and the log lines")
	fs.StringVar(&o.prometheusURL, "prometheus-url", "http://prometheus:9090", "Prometheus to read a new page's burn, budget and slowest requests from, and its burn chart ('' to disable)")
	fs.StringVar(&o.gcJob, "gc-job", "gateway", "Prometheus job of the process -profile-url profiles: a page's facts read its garbage collector's share of CPU before and during the burn ('' to disable)")
	fs.StringVar(&o.alertmanagerURLs, "alertmanager-urls", "http://alertmanager:9093", "comma-separated Alertmanagers, every one of an HA set, that a page's heap verdict is posted to, "+
		"so that the page's receivers get it in a message of their own ('' to disable)")
	fs.IntVar(&o.deltaSeconds, "delta-seconds", heapdelta.DefaultSeconds, "length of each delta heap profile taken from -profile-url (?seconds=), "+
		"so a page can compare the gateway's allocation before and during its burn")
	fs.DurationVar(&o.deltaEvery, "delta-every", heapdelta.DefaultEvery, "time between the starts of two delta heap profiles: longer than -delta-seconds")
	fs.IntVar(&o.deltaKeep, "delta-keep", heapdelta.DefaultKeep, "delta heap profiles kept, the newest: with -delta-every, how far back before a burn the pager can look")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
}

// Validate checks every flag and says each that is wrong, not only the
// first; it returns the pager's Config.
func (o *options) Validate() (pager.Config, error) {
	var errs []error
	if o.profileWindow < 0 || o.profileConcurrency < 1 {
		errs = append(errs, fmt.Errorf("-profile-window %s and -profile-concurrency %d: want a window of 0 or more and at least one fetch", o.profileWindow, o.profileConcurrency))
	}
	if o.retention <= 0 || o.maxResolved < 1 {
		errs = append(errs, fmt.Errorf("-retention %s and -max-resolved %d: want a time and a number above 0", o.retention, o.maxResolved))
	}
	// The delta settings are checked even without -profile-url, so a bad
	// one is found before it is turned on. heapdelta takes 0 for its
	// default; a flag of 0 is a mistake, not a wish for the default.
	deltas := heapdelta.Config{URL: o.profileURL, Seconds: o.deltaSeconds, Every: o.deltaEvery, Keep: o.deltaKeep, CountsURL: heapdelta.CountsURL(o.profileURL)}
	if deltas.URL == "" {
		deltas.URL = "http://gateway:6060/debug/pprof/allocs"
	}
	if err := deltas.Validate(); err != nil || o.deltaSeconds < 1 || o.deltaEvery <= 0 || o.deltaKeep < 1 {
		if err == nil {
			err = errors.New("want -delta-seconds and -delta-keep of 1 or more, and a -delta-every above 0")
		}
		errs = append(errs, fmt.Errorf("-profile-url %q, -delta-seconds %d, -delta-every %s, -delta-keep %d: %w", o.profileURL, o.deltaSeconds, o.deltaEvery, o.deltaKeep, err))
	}
	if o.traceURL != "" {
		if u, err := url.Parse(o.traceURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("-trace-url %q: want an http:// or https:// URL", o.traceURL))
		}
	}
	var prom *promfacts.Client
	if o.prometheusURL != "" {
		var err error
		if prom, err = promfacts.New(o.prometheusURL, nil); err != nil {
			errs = append(errs, fmt.Errorf("-prometheus-url: %w", err))
		}
	}
	var rules *targets.Config
	if o.targets != "" {
		c, err := targets.Load(o.targets)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("-targets: %w", err))
		case c.NeedsPrometheus() && prom == nil:
			errs = append(errs, fmt.Errorf("-targets %s: its rules with jobs find their processes through Prometheus, and -prometheus-url is empty", o.targets))
		}
		rules = &c
	}
	alertmanagers, err := lifecycle.ParseAlertmanagers(o.alertmanagerURLs)
	if err != nil {
		errs = append(errs, fmt.Errorf("-alertmanager-urls: %w", err))
	}
	cfg := pager.Config{
		Listen: o.listen, Data: o.data, PrometheusURL: o.prometheusURL,
		Store:   store.Options{Retention: o.retention, MaxResolved: o.maxResolved},
		Webhook: webhook.Config{Token: o.token, ExternalURL: o.externalURL},
		Lifecycle: lifecycle.Config{ProfileURL: o.profileURL, TraceURL: o.traceURL, ExternalURL: o.externalURL,
			ProfileWindow: o.profileWindow, MaxFetches: o.profileConcurrency, Prometheus: prom, GCJob: o.gcJob, Alertmanagers: alertmanagers,
			Targets: rules},
		Deltas: deltas,
	}
	return cfg, errors.Join(errs...)
}
