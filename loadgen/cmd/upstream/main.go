// Command upstream is burnlab's synthetic model provider: an
// OpenAI-compatible POST /v1/chat/completions that streams seeded token
// streams, as long as each request's max_tokens asks, with the lab's
// scenario control beside it: GET /scenario, PUT /scenario/{name} (make
// scenario S=…). Its /metrics, /healthz, /readyz and /debug/pprof/ are on
// an admin listener of their own, as the gateway's are: a provider's
// clients reach its API, and only Prometheus and the pager its heap.
package main

import (
	"context"
	"flag"
	"io"
	"net/http"
	"os"
	"time"

	"burnlab/loadgen/internal/provider"
	"burnlab/shared/service"
)

var envs = map[string]string{
	"listen":                "UPSTREAM_LISTEN",
	"admin":                 "UPSTREAM_ADMIN",
	"log-level":             "LOG_LEVEL",
	"seed":                  "UPSTREAM_SEED",
	"first-token-delay":     "UPSTREAM_FIRST_TOKEN_DELAY",
	"inter-event":           "UPSTREAM_INTER_EVENT",
	"pii-every":             "UPSTREAM_PII_EVERY",
	"fault-reset":           "UPSTREAM_FAULT_RESET",
	"fault-malformed":       "UPSTREAM_FAULT_MALFORMED",
	"fault-5xx":             "UPSTREAM_FAULT_5XX",
	"fault-slow-first-byte": "UPSTREAM_FAULT_SLOW_FIRST_BYTE",
}

func main() {
	service.Main("upstream", func(ctx context.Context, args []string) error { return run(ctx, args, os.Stderr) })
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	cfg := provider.DefaultConfig()
	fs := flag.NewFlagSet("upstream", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8081", "address of the API and the scenario control")
	admin := fs.String("admin", "127.0.0.1:6062", "address of /metrics, /healthz, /readyz and /debug/pprof/ (loopback by default: pprof reads the heap)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the token streams")
	fs.IntVar(&cfg.ShortMin, "short-min", cfg.ShortMin, "fewest events of an ordinary stream (when the request gives no max_tokens)")
	fs.IntVar(&cfg.ShortMax, "short-max", cfg.ShortMax, "most events of an ordinary stream")
	fs.IntVar(&cfg.LongMin, "long-min", cfg.LongMin, "fewest events of a long generation")
	fs.IntVar(&cfg.LongMax, "long-max", cfg.LongMax, "most events of a long generation")
	fs.Float64Var(&cfg.LongShare, "long-share", cfg.LongShare, "probability that a stream without max_tokens is a long generation")
	fs.IntVar(&cfg.MaxTokens, "max-tokens", cfg.MaxTokens, "largest max_tokens accepted")
	fs.DurationVar(&cfg.FirstTokenDelay, "first-token-delay", 0, "wait before the first event (0: none)")
	fs.DurationVar(&cfg.InterEvent, "inter-event", 0, "wait between events (0: as fast as the connection takes)")
	fs.IntVar(&cfg.PIIEvery, "pii-every", cfg.PIIEvery, "about one PII item (e-mail, phone, card, sk- key) per this many tokens; 0: none")
	fs.Float64Var(&cfg.Faults.Reset, "fault-reset", 0, "share of streams reset mid-stream")
	fs.Float64Var(&cfg.Faults.Malformed, "fault-malformed", 0, "share of streams with one malformed line")
	fs.Float64Var(&cfg.Faults.Status5xx, "fault-5xx", 0, "share of requests answered 503")
	fs.Float64Var(&cfg.Faults.SlowFirstByte, "fault-slow-first-byte", 0, "share of requests answered only after -slow-first-byte-delay")
	fs.DurationVar(&cfg.Faults.SlowDelay, "slow-first-byte-delay", 2*time.Second, "delay of a slow first byte")
	service.Usage(fs, envs, "upstream: a synthetic OpenAI-compatible model provider\n\nFlags:\n")
	if err := service.Parse(fs, args, envs); err != nil {
		return err
	}
	log, err := service.NewLogger(stderr, *logLevel, "upstream")
	if err != nil {
		return err
	}
	reg := service.NewRegistry()
	p, err := provider.New(cfg, reg, log)
	if err != nil {
		return err
	}
	var ready service.Readiness
	api := http.NewServeMux()
	api.Handle("/v1/", p)
	p.Scenarios.Register(api)
	return service.Serve(ctx, log, service.Drain{Ready: &ready, Timeout: 30 * time.Second},
		service.Server{Name: "api", Addr: *listen, Handler: api, Streaming: true},
		service.Server{Name: "admin", Addr: *admin, Handler: service.AdminMux(reg, &ready)})
}
