package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"burnlab/tools/strategies"
)

// replayLive prints one JSON agreement per severity and fails when any
// disagrees.
func replayLive(ctx context.Context, opts options, cfg strategies.Config, stdout io.Writer) error {
	o, err := cfg.Spec.SLO(opts.slo)
	if err != nil {
		return err
	}
	ss, err := strategies.All(ctx, cfg.Sloth, cfg.Spec, o, cfg.Windows[0])
	if err != nil {
		return err
	}
	client, err := api.NewClient(api.Config{Address: opts.replay})
	if err != nil {
		return fmt.Errorf("-replay: %w", err)
	}
	shipped, err := strategies.ByKey(ss, strategies.Shipped)
	if err != nil {
		return err
	}
	as, err := strategies.Replay(ctx, promv1.NewAPI(client), shipped, strategies.ReplayQuery{Windows: cfg.Windows[0], SLO: o, At: time.Now(), Over: opts.since})
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	var bad []string
	for _, a := range as {
		if err := enc.Encode(a); err != nil {
			return err
		}
		if !a.Agree {
			bad = append(bad, a.Severity)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("the replay disagrees with the live run on %s %s", opts.slo, strings.Join(bad, ", "))
	}
	return nil
}
