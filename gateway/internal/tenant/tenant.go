// Package tenant maps API keys to tenants and enforces each tenant's
// tokens-per-minute quota.
//
// Configuration (GATEWAY_TENANTS / -tenants) is either an inline list,
//
//	sk-lab-acme=acme:600000,sk-lab-globex=globex:120000:16
//
// or the path of a file with one tenant per line, `# comments` allowed:
//
//	# api-key        tenant  tokens-per-minute  [max-concurrent-streams]
//	sk-lab-acme      acme    600000
//	sk-lab-globex    globex  120000             16
//
// The optional fourth field bounds the tenant's streams in flight at once
// (default DefaultMaxStreams). A fifth field, the word `probe`, marks a
// probe tenant: its streams are synthetic, sent to measure the gateway
// rather than by a customer (the loadgen's calibration times streams long
// enough to breach the SLO, to fit the baseline's cost). Their metrics say
// traffic="probe", and the SLIs leave them out (docs/loadgen.md):
//
//	sk-lab-calibration=calibration:1000000000:8:probe
//
// A value containing '=' is an inline list; anything else is a path. Tenant
// names label metrics, so they are limited to [a-z0-9_-], which keeps the
// label set small and bounded by this file.
//
// # Quota
//
// A tenant's balance is a token bucket: TokensPerMinute spread evenly over
// the minute, never more than one minute's worth banked, never below zero.
// A stream is admitted only with a reservation: the tokens it may stream
// (its request's max_tokens, or a default) are taken from the balance
// before it starts, so simultaneous requests cannot all be admitted on one
// balance that each of them would spend. A stream that goes past its
// reservation draws the extra from the balance as it streams (Cover) and is
// stopped when the balance has none left; when it ends, what it reserved
// and did not stream goes back (End). So what a tenant streams over any
// time T is at most one minute's quota plus T's refill — plus the
// tokens a stream forwards after Cover refused it, before it stops — and
// since the balance never goes below zero and no reservation exceeds one
// minute's quota, a refused request never waits more than a minute.
package tenant

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Tenant is one customer of the gateway.
type Tenant struct {
	Name string
	// TokensPerMinute is the quota, and the most one request may reserve.
	TokensPerMinute int
	// MaxStreams bounds the tenant's concurrent streams.
	MaxStreams int
	// Probe marks a tenant whose streams are synthetic probes, not a
	// customer's: their metrics carry traffic="probe", which the SLIs
	// leave out.
	Probe bool

	mu sync.Mutex
	// balance is what is left to reserve, in [0, TokensPerMinute].
	balance float64
	last    time.Time
	streams int
}

// DefaultMaxStreams is a tenant's concurrent-stream limit when its line
// sets none.
const DefaultMaxStreams = 100

// Why a stream is refused.
var (
	ErrQuotaSpent     = errors.New("tokens-per-minute quota spent")
	ErrTooManyStreams = errors.New("concurrent stream limit reached")
	// ErrTooLarge refuses a reservation above the tenant's whole quota:
	// the balance never holds that much, so no retry could succeed.
	ErrTooLarge = errors.New("reservation larger than the tokens-per-minute quota")
)

// Registry resolves API keys. It is safe for concurrent use.
type Registry struct {
	byKey map[string]*Tenant
	now   func() time.Time
}

// ErrUnknownKey is returned for a missing or unknown API key.
var ErrUnknownKey = errors.New("unknown API key")

// Parse reads a configuration value: an inline list or a file path.
func Parse(spec string) (*Registry, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, errors.New("no tenants configured: set -tenants or GATEWAY_TENANTS (key=tenant:tokens-per-minute,… or a file path)")
	}
	if strings.Contains(spec, "=") {
		var lines []string
		for i, item := range strings.Split(spec, ",") {
			item = strings.TrimSpace(item)
			if strings.ContainsAny(item, " \t") {
				return nil, fmt.Errorf("inline tenant list, entry %d: %q has spaces inside its fields", i+1, item)
			}
			k, rest, _ := strings.Cut(item, "=")
			lines = append(lines, k+" "+strings.ReplaceAll(rest, ":", " "))
		}
		return parseLines(lines, "inline tenant list", "entry")
	}
	f, err := os.Open(spec)
	if err != nil {
		return nil, fmt.Errorf("tenants file: %w", err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("tenants file %s: %w", spec, err)
	}
	return parseLines(lines, spec, "line")
}

func parseLines(lines []string, source, unit string) (*Registry, error) {
	r := &Registry{byKey: map[string]*Tenant{}, now: time.Now}
	byName := map[string]*Tenant{}
	for i, line := range lines {
		if j := strings.IndexByte(line, '#'); j >= 0 {
			line = line[:j]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 3 || len(f) > 5 {
			return nil, fmt.Errorf("%s, %s %d: want `api-key tenant tokens-per-minute [max-concurrent-streams [probe]]`, got %d fields", source, unit, i+1, len(f))
		}
		key, name := f[0], f[1]
		tpm, err := strconv.Atoi(f[2])
		if err != nil || tpm <= 0 {
			return nil, fmt.Errorf("%s, %s %d: tokens-per-minute must be a positive integer, got %q", source, unit, i+1, f[2])
		}
		streams := DefaultMaxStreams
		if len(f) >= 4 {
			if streams, err = strconv.Atoi(f[3]); err != nil || streams <= 0 {
				return nil, fmt.Errorf("%s, %s %d: max-concurrent-streams must be a positive integer, got %q", source, unit, i+1, f[3])
			}
		}
		probe := len(f) == 5
		if probe && f[4] != "probe" {
			return nil, fmt.Errorf("%s, %s %d: the field after max-concurrent-streams can only be the word probe, got %q", source, unit, i+1, f[4])
		}
		if !validName(name) {
			return nil, fmt.Errorf("%s, %s %d: tenant name %q must be 1–32 characters of [a-z0-9_-]", source, unit, i+1, name)
		}
		if _, dup := r.byKey[key]; dup {
			return nil, fmt.Errorf("%s, %s %d: API key for %s is listed twice", source, unit, i+1, name)
		}
		t := byName[name]
		if t == nil {
			t = &Tenant{Name: name, TokensPerMinute: tpm, MaxStreams: streams, Probe: probe, balance: float64(tpm)}
			byName[name] = t
		} else if t.TokensPerMinute != tpm || t.MaxStreams != streams {
			return nil, fmt.Errorf("%s, %s %d: tenant %s has two quotas (%d/%d and %d/%d tokens-per-minute/streams)", source, unit, i+1, name,
				t.TokensPerMinute, t.MaxStreams, tpm, streams)
		} else if t.Probe != probe {
			return nil, fmt.Errorf("%s, %s %d: tenant %s is marked probe on one of its keys only", source, unit, i+1, name)
		}
		r.byKey[key] = t
	}
	if len(r.byKey) == 0 {
		return nil, fmt.Errorf("%s: no tenants", source)
	}
	return r, nil
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > 32 {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Names lists the tenants, for pre-creating their metric series.
func (r *Registry) Names() []string {
	seen := map[string]bool{}
	var names []string
	for _, t := range r.byKey {
		if !seen[t.Name] {
			seen[t.Name] = true
			names = append(names, t.Name)
		}
	}
	return names
}

// Authenticate returns the tenant of a bearer API key.
func (r *Registry) Authenticate(key string) (*Tenant, error) {
	if key == "" {
		return nil, ErrUnknownKey
	}
	t, ok := r.byKey[key]
	if !ok {
		return nil, ErrUnknownKey
	}
	return t, nil
}

// Reserve admits a stream that may stream up to tokens: it takes one of
// the tenant's stream slots and tokens from its balance, and the caller
// ends the reservation with End once the stream is over. A reservation
// above TokensPerMinute is ErrTooLarge. A tenant whose balance is short
// of tokens is ErrQuotaSpent, with the wait until the refill covers them
// (at most a minute: the balance is never negative); one at its stream
// limit retries in a second, since a slot frees when any of its streams
// ends.
func (r *Registry) Reserve(t *Tenant, tokens int) (_ *Reservation, retryAfter time.Duration, _ error) {
	if tokens > t.TokensPerMinute {
		return nil, 0, ErrTooLarge
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r.refill(t)
	if short := float64(tokens) - t.balance; short > 0 {
		perSecond := float64(t.TokensPerMinute) / 60
		wait := time.Duration(math.Ceil(short/perSecond*1000)) * time.Millisecond
		return nil, max(wait, time.Second), ErrQuotaSpent
	}
	if t.streams >= t.MaxStreams {
		return nil, time.Second, ErrTooManyStreams
	}
	t.streams++
	t.balance -= float64(tokens)
	return &Reservation{r: r, t: t, held: tokens}, 0, nil
}

// Reservation is what one admitted stream holds of its tenant's balance.
// It belongs to the stream: one goroutine uses it.
type Reservation struct {
	r     *Registry
	t     *Tenant
	held  int // tokens taken from the balance for the stream
	ended bool
}

// Cover makes the reservation hold the used tokens a stream has
// forwarded, taking what it lacks from the tenant's balance, and reports
// whether the balance had it. When it did not, Cover takes what there was
// (the balance is left at zero) and the stream must stop; each later call
// takes what has refilled since. Within the reservation it is two
// comparisons, inlined: a stream may call it for every event.
func (rv *Reservation) Cover(used int) bool {
	return rv.ended || used <= rv.held || rv.draw(used)
}

// draw is Cover past the reservation.
func (rv *Reservation) draw(used int) bool {
	t := rv.t
	t.mu.Lock()
	defer t.mu.Unlock()
	rv.r.refill(t)
	take := min(used-rv.held, int(t.balance))
	t.balance -= float64(take)
	rv.held += take
	return rv.held >= used
}

// End settles a stream that streamed used tokens and frees its slot: what
// it held and did not stream goes back to the balance, and tokens past
// what Cover could take are charged as far as the balance goes. Those are
// at most the tokens a stream forwarded between its last Cover and its
// stop; a debt for them would only lock the tenant out longer than the
// minute a quota is about. Calls after the first do nothing.
func (rv *Reservation) End(used int) {
	if rv.ended {
		return
	}
	rv.ended = true
	t := rv.t
	t.mu.Lock()
	defer t.mu.Unlock()
	rv.r.refill(t)
	t.balance = min(max(t.balance+float64(rv.held-used), 0), float64(t.TokensPerMinute))
	t.streams--
}

// refill is a token bucket: TokensPerMinute spread evenly over the minute,
// never more than one minute's worth banked.
func (r *Registry) refill(t *Tenant) {
	now := r.now()
	if !t.last.IsZero() {
		t.balance += now.Sub(t.last).Seconds() * float64(t.TokensPerMinute) / 60
		t.balance = min(t.balance, float64(t.TokensPerMinute))
	}
	t.last = now
}
