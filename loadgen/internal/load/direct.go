package load

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"burnlab/shared/scenario"
)

// Direct plays the provider's direct clients: non-streaming completions
// sent straight to the provider, which the gateway never carries. They are
// the traffic of the provider's own SLO (scenario.CompletionLatency); the
// provider times each answer itself, so this side only sends them and
// counts how each ended.
type Direct struct {
	// URL is the provider's completions endpoint, e.g.
	// http://upstream:8081/v1/chat/completions.
	URL string
	// Rate is completions a second (default scenario.DirectRate, shared
	// evenly by Shard's shards).
	Rate float64
	// Timeout bounds one answer (default 30 s).
	Timeout time.Duration
	Shard   Shard
}

// directInFlight bounds the answers awaited at once: at 25 a second, 64
// is over two seconds of a provider that stopped answering.
const directInFlight = 64

// Validate rejects a URL that cannot be posted to.
func (d Direct) Validate() error {
	if u, err := url.Parse(d.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("direct %q: want the provider's URL, such as http://127.0.0.1:8081/v1/chat/completions", d.URL)
	}
	if d.Rate < 0 || d.Timeout < 0 {
		return fmt.Errorf("direct: rate %v and timeout %v must not be negative", d.Rate, d.Timeout)
	}
	return nil
}

// directResults counts the direct completions by how they ended.
func directResults(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "loadgen_direct_completions_total",
		Help: "Non-streaming completions sent straight to the provider, by result (ok, error, dropped: the in-flight bound was reached).",
	}, []string{"result"})
	reg.MustRegister(c)
	for _, r := range []string{"ok", "error", "dropped"} {
		c.WithLabelValues(r)
	}
	return c
}

// RunDirect sends the direct completions until ctx ends: every
// scenario.DirectLongEvery-th asks scenario.DirectLongTokens words, the
// rest scenario.DirectTokens. It waits for the answers in flight, which
// ctx's end cancels.
func RunDirect(ctx context.Context, d Direct, reg prometheus.Registerer) error {
	if err := d.Validate(); err != nil {
		return err
	}
	if d.Rate == 0 {
		d.Rate = scenario.DirectRate
	}
	if d.Timeout == 0 {
		d.Timeout = 30 * time.Second
	}
	if d.Shard.Of > 1 {
		d.Rate /= float64(d.Shard.Of)
	}
	results := directResults(reg)
	client := &http.Client{Timeout: d.Timeout}
	defer client.CloseIdleConnections()
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, directInFlight)
	tick := time.NewTicker(time.Duration(float64(time.Second) / d.Rate))
	defer tick.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		words := scenario.DirectTokens
		if n%scenario.DirectLongEvery == 0 {
			words = scenario.DirectLongTokens
		}
		select {
		case sem <- struct{}{}:
		default:
			results.WithLabelValues("dropped").Inc()
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			result := "ok"
			if err := complete(ctx, client, d.URL, words); err != nil {
				result = "error"
			}
			results.WithLabelValues(result).Inc()
		})
	}
}

// complete asks for one answer of words words and reads it whole.
func complete(ctx context.Context, client *http.Client, u string, words int) error {
	body := `{"model":"burnlab-synthetic","max_tokens":` + strconv.Itoa(words) + `,"messages":[{"role":"user","content":"summarise the incident"}]}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s", resp.Status)
	}
	return nil
}
