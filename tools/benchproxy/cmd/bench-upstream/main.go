// Command bench-upstream is bench-proxy's model provider: it answers
// POST /v1/chat/completions with a precomputed stream of -events OpenAI
// chunks and data: [DONE], so its cost per stream is one write. bench-proxy
// starts it; it is no service of the lab.
package main

import (
	"context"
	"flag"
	"os"

	"burnlab/shared/service"
	"burnlab/tools/benchproxy"
)

func main() {
	service.Main("bench-upstream", func(ctx context.Context, args []string) error {
		fs := flag.NewFlagSet("bench-upstream", flag.ContinueOnError)
		fs.SetOutput(os.Stderr)
		listen := fs.String("listen", "127.0.0.1:8081", "API address (loopback)")
		admin := fs.String("admin", "127.0.0.1:6062", "admin address: /metrics, /readyz, /debug/pprof/ (loopback)")
		events := fs.Int("events", 10000, "content events per stream (a request's smaller max_tokens gives fewer)")
		seed := fs.Uint64("seed", 1, "seed of the stream's tokens")
		if err := service.Parse(fs, args, nil); err != nil {
			return err
		}
		return benchproxy.Serve(ctx, *listen, *admin, benchproxy.NewUpstream(*events, *seed))
	})
}
