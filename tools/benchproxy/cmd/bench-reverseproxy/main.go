// Command bench-reverseproxy is bench-proxy's yardstick: a bare
// httputil.ReverseProxy in front of -upstream, streaming and full duplex,
// in a process of its own so its CPU is measured as the gateway's is. With
// -scan it is the floor instead: a proxy that reads each event and does
// nothing else (benchproxy.NewScanner).
package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"

	"burnlab/shared/service"
	"burnlab/tools/benchproxy"
)

func main() {
	service.Main("bench-reverseproxy", func(ctx context.Context, args []string) error {
		fs := flag.NewFlagSet("bench-reverseproxy", flag.ContinueOnError)
		fs.SetOutput(os.Stderr)
		listen := fs.String("listen", "127.0.0.1:8090", "proxy address (loopback)")
		admin := fs.String("admin", "127.0.0.1:6063", "admin address: /metrics, /readyz, /debug/pprof/ (loopback)")
		upstream := fs.String("upstream", "http://127.0.0.1:8081", "base URL proxied to")
		scan := fs.Bool("scan", false, "read the stream event by event and do nothing else (the scanner target), instead of httputil's copy")
		if err := service.Parse(fs, args, nil); err != nil {
			return err
		}
		u, err := url.Parse(*upstream)
		if err != nil || u.Host == "" {
			return fmt.Errorf("-upstream %q: want a base URL such as http://127.0.0.1:8081", *upstream)
		}
		h := benchproxy.NewReverseProxy(u)
		if *scan {
			h = benchproxy.NewScanner(u)
		}
		return benchproxy.Serve(ctx, *listen, *admin, h)
	})
}
