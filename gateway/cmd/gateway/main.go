// Command gateway is burnlab's LLM gateway: it proxies OpenAI-style SSE
// token streams from an upstream model provider, counting tokens, enforcing
// tenant quotas, redacting PII and keeping an audit transcript per stream.
// Which transcript parser it runs is fixed when it is built (-tags fixed).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"time"

	"burnlab/gateway/internal/proxy"
	"burnlab/gateway/internal/tenant"
	"burnlab/gateway/internal/transcript"
	"burnlab/shared/service"
	"burnlab/shared/variant"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

var envs = map[string]string{
	"listen":          "GATEWAY_LISTEN",
	"admin":           "GATEWAY_ADMIN",
	"upstream":        "UPSTREAM_URL",
	"tenants":         "GATEWAY_TENANTS",
	"log-level":       "LOG_LEVEL",
	"drain-grace":     "GATEWAY_DRAIN_GRACE",
	"flight-recorder": "GATEWAY_FLIGHT_RECORDER",
}

// A build is what the build tag chose (variant_baseline.go or
// variant_fixed.go): the variant's name and the transcript it keeps.
type build struct {
	variant       variant.Variant
	newTranscript func() transcript.Transcript // one per stream
}

func main() {
	service.Main("gateway", func(ctx context.Context, args []string) error { return run(ctx, args, os.Stderr) })
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", ":8080", "public API address (POST /v1/chat/stream, /v1/chat/completions)")
	// pprof hands out heap contents and the command line: reachable from
	// this host only unless a deployment says otherwise.
	admin := fs.String("admin", "127.0.0.1:6060", "admin address: /metrics, /healthz, /readyz, /debug/pprof/, "+service.FlightRecorderPath)
	upstream := fs.String("upstream", "http://127.0.0.1:8081", "OpenAI-compatible base URL of the model provider, http://host:port or http://host:port/v1 (requests go to …/v1/chat/completions)")
	tenants := fs.String("tenants", "", "API keys: `key=tenant:tokens-per-minute,…` or a file of `key tenant tokens-per-minute` lines")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	upTimeout := fs.Duration("upstream-timeout", 10*time.Second, "wait this long for the upstream's answer from the request on (its headers, and an error body it quotes), then answer 504")
	idle := fs.Duration("upstream-idle-timeout", 30*time.Second, "end a stream when a read of its upstream waits this long (time spent writing to a slow client is not counted)")
	readTimeout := fs.Duration("read-timeout", service.DefaultReadTimeout, "a request's headers and body must arrive within this long (then 408)")
	clientWrite := fs.Duration("client-write-timeout", 30*time.Second, "give up a stream whose client does not take a flush (up to 64 KiB) within this long")
	sendBuffer := fs.Int("client-send-buffer", 128<<10, "kernel send buffer per client connection in bytes, so a slow reader meets the write timeout instead of a 4 MiB buffer (0: kernel autotuning)")
	grace := fs.Duration("drain-grace", 5*time.Second, "on SIGTERM, answer /readyz 503 but keep accepting for this long, so load balancers stop sending first")
	drain := fs.Duration("drain-timeout", 60*time.Second, "then close the listeners and let in-flight streams finish for this long")
	maxEvents := fs.Int("max-stream-events", 200_000, "end a stream after this many upstream events, with an error event (stream_limit)")
	maxBytes := fs.Int64("max-stream-bytes", 64<<20, "end a stream after this many upstream bytes, with an error event (stream_limit)")
	maxDuration := fs.Duration("max-stream-duration", 10*time.Minute, "end a stream this long after the upstream answered, with an error event (stream_limit)")
	maxTranscript := fs.Int("max-transcript-bytes", 1<<20, "keep at most this much of a stream's audit transcript; the stream goes on")
	flightAge := fs.Duration("flight-recorder", 10*time.Second, "keep at least this much of the execution trace in memory, served on the admin listener at "+service.FlightRecorderPath+" (0: off)")
	// The recorder's window lives in the Go heap, where it raises the
	// collector's heap goal: a small live heap (the baseline's is a few
	// MiB) collects less often with it, so the bound is kept small.
	flightBytes := fs.Uint64("flight-recorder-bytes", 4<<20, "but at most this many bytes of it (they are Go heap: see docs/performance.md)")
	b := thisBuild()
	service.Usage(fs, envs, fmt.Sprintf("gateway (%s build, version %s)\n\nFlags:\n", b.variant, version))
	if err := service.Parse(fs, args, envs); err != nil {
		return err
	}
	log, err := service.NewLogger(stderr, *logLevel, "gateway")
	if err != nil {
		return err
	}
	up, err := url.Parse(*upstream)
	if err == nil {
		_, err = proxy.Endpoint(up)
	}
	if err != nil {
		return fmt.Errorf("-upstream / UPSTREAM_URL: %w", err)
	}
	reg, err := tenant.Parse(*tenants)
	if err != nil {
		return err
	}
	metricsReg := service.NewRegistry()
	h, err := proxy.New(proxy.Config{
		Upstream:           up,
		Tenants:            reg,
		Metrics:            proxy.NewMetrics(metricsReg, string(b.variant), version, reg.Names()),
		Log:                log,
		Variant:            string(b.variant),
		NewTranscript:      b.newTranscript,
		UpstreamTimeout:    *upTimeout,
		IdleTimeout:        *idle,
		ClientWriteTimeout: *clientWrite,
		Limits:             proxy.Limits{Events: *maxEvents, Bytes: *maxBytes, Duration: *maxDuration, Transcript: *maxTranscript},
	})
	if err != nil {
		return err
	}
	var ready service.Readiness
	adminMux := service.AdminMux(metricsReg, &ready)
	if *flightAge > 0 {
		fr, err := service.StartFlightRecorder(*flightAge, *flightBytes)
		if err != nil {
			return err
		}
		defer fr.Stop()
		adminMux.Handle(service.FlightRecorderPath, fr)
	}
	log.Info().Str("variant", string(b.variant)).Str("version", version).Str("upstream", up.String()).Int("tenants", len(reg.Names())).Msg("starting")
	return service.Serve(ctx, log, service.Drain{Ready: &ready, Grace: *grace, Timeout: *drain},
		service.Server{Name: "public", Addr: *listen, Handler: h, Streaming: true, ReadTimeout: *readTimeout, SendBuffer: *sendBuffer},
		service.Server{Name: "admin", Addr: *admin, Handler: adminMux},
	)
}
