package lab

import (
	"context"
	"fmt"
	"strings"
	"time"

	"burnlab/shared/scenario"
)

// ProviderCulprit is the provider's regressed function, which the
// provider-regression scenario switches on.
const ProviderCulprit = "provider.concatText"

// CheckProviderPage waits, up to within, for the provider's own page
// (completion-latency) that began at or after since to be profiled and its
// facts read, and holds it to
// the pager's config (pager/pager.yml): its rule is the provider's, the top
// of its alloc_space is the provider's regressed function, not the
// gateway's (only the provider's binary has it), and its heap verdict,
// from the provider's own delta sampler, names that function as the one
// that changed. It returns what it found, in words. A page that began
// before since (the regression's injection) is another burn's, whose
// facts were read before the regressed code ran.
func (l Probe) CheckProviderPage(ctx context.Context, since time.Time, within time.Duration) ([]string, error) {
	for deadline := time.Now().Add(within); ; {
		incs, err := l.Incidents()
		if err != nil {
			return nil, err
		}
		for _, listed := range incs {
			if listed.SLO != scenario.CompletionLatency || listed.Severity != scenario.Page || listed.Status != "firing" ||
				listed.StartsAt.Before(since) {
				continue
			}
			inc, err := l.Incident(listed.ID)
			if err != nil {
				return nil, err
			}
			if inc.Profile == nil || inc.Profile.TakenAt.IsZero() || inc.Facts == nil {
				continue // not yet
			}
			p, h := inc.Profile, inc.Facts.Heap
			switch {
			case p.Error != "":
				return nil, fmt.Errorf("the provider's page has no profile: %s", p.Error)
			case p.Rule != ProviderRule:
				return nil, fmt.Errorf("the provider's page was profiled by rule %q, want %s", p.Rule, ProviderRule)
			case len(p.Top) == 0 || !strings.HasSuffix(p.Top[0].Function, ProviderCulprit):
				return nil, fmt.Errorf("the provider's page's alloc_space top is %+v, want %s first", p.Top, ProviderCulprit)
			case h == nil || !h.Changed || !strings.HasSuffix(h.Function, ProviderCulprit):
				return nil, fmt.Errorf("the provider's page's heap verdict: %+v (not read: %q), want %s changed", h, inc.Facts.Errors, ProviderCulprit)
			}
			return []string{
				fmt.Sprintf("%s (%s) profiled by rule %s: %s tops alloc_space at %.0f %%", inc.AlertName, inc.ID, p.Rule, p.Top[0].Function, p.Top[0].FlatPct),
				"verdict: " + h.Words,
			}, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no profiled %s page with its facts in the pager within %s", scenario.CompletionLatency, within)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}
