package targets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/pprof/profile"

	"burnlab/shared/incident"
	"burnlab/shared/pproftop"
)

// Limits bound one Fetch.
type Limits struct {
	// Concurrency is the fetches in flight at once (at least 1).
	Concurrency int
	// Timeout bounds each process's fetch; a cpu profile's CPUSeconds
	// more.
	Timeout    time.Duration
	CPUSeconds int
	// MaxFields bounds the fields (samples, locations, functions,
	// mappings) of all the processes' parsed profiles together; default
	// pproftop.MaxFields, what one profile may hold. A parsed field costs
	// about 150 bytes (1M fields of an 11 KB gzip held 153 MiB), so this,
	// not the bytes read, is what bounds the pager's memory: a real Go
	// heap profile has some thousands.
	MaxFields int
}

// Profiles is what Fetch got: the merge of every process's profile that
// came, as pprof's bytes (gzipped proto), its top, and each process's own
// top or why it has none.
type Profiles struct {
	Raw       []byte
	Total     int64
	Top       []incident.TopEntry
	Instances []incident.InstanceProfile
}

// Fetch takes profile kind k of every target (Target.URLFor), within lim,
// and merges the profiles that came (profile.Merge). One process that fails or hangs holds none of the
// others back: it is an instance with an error. Only when none came is
// Fetch an error, naming each failure.
func Fetch(ctx context.Context, hc *http.Client, ts []Target, k Kind, lim Limits) (Profiles, error) {
	timeout := lim.Timeout
	if k.Name == "cpu" {
		timeout += time.Duration(lim.CPUSeconds) * time.Second
	}
	if lim.MaxFields <= 0 {
		lim.MaxFields = pproftop.MaxFields
	}
	if len(ts) == 0 {
		return Profiles{}, errors.New("no process to profile")
	}
	type got struct {
		raw []byte
		p   *profile.Profile
	}
	res := make([]got, len(ts))
	// A process's profile may redirect the pager anywhere its network
	// reaches (a cloud's metadata address, say): redirects are answers,
	// never followed. Every process can be any scraped target.
	c := *hc
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	var mu sync.Mutex
	fields := 0
	out := Profiles{Instances: make([]incident.InstanceProfile, len(ts))}
	sem := make(chan struct{}, max(1, lim.Concurrency))
	var wg sync.WaitGroup
	for i, t := range ts {
		out.Instances[i] = incident.InstanceProfile{Instance: t.Instance, URL: t.URLFor(k, lim.CPUSeconds)}
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				out.Instances[i].Error = "not fetched: " + ctx.Err().Error()
				return
			}
			tctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			raw, p, err := fetchOne(tctx, &c, out.Instances[i].URL)
			if err == nil {
				n := len(p.Sample) + len(p.Location) + len(p.Function) + len(p.Mapping)
				mu.Lock()
				if fields += n; fields > lim.MaxFields {
					err = fmt.Errorf("its profile's %d fields are past the %d the pager holds of one capture's processes in all", n, lim.MaxFields)
					fields -= n
				}
				mu.Unlock()
			}
			if err == nil {
				var top []pproftop.Entry
				if top, out.Instances[i].Total, err = pproftop.Top(p, k.SampleType, 10); err == nil {
					out.Instances[i].Top = entries(top)
				} else {
					err = fmt.Errorf("not a %s profile: %w", k.Name, err)
				}
			}
			if err != nil {
				out.Instances[i].Error = err.Error()
				return
			}
			if len(ts) > 1 {
				raw = nil // the merge is written instead
			}
			res[i] = got{raw, p}
		})
	}
	wg.Wait()
	var ps []*profile.Profile
	var failed []string
	for i, r := range res {
		if r.p != nil {
			ps = append(ps, r.p)
			out.Raw = r.raw
			continue
		}
		failed = append(failed, out.Instances[i].Instance+": "+out.Instances[i].Error)
	}
	if len(ps) == 0 {
		return out, fmt.Errorf("no process's profile came: %s", strings.Join(failed, "; "))
	}
	merged := ps[0]
	if len(ps) > 1 {
		var err error
		if merged, err = profile.Merge(ps); err != nil {
			return out, fmt.Errorf("the processes' profiles cannot be merged: %w", err)
		}
	}
	if len(ts) > 1 { // each one's bytes were let go: the merge's are written
		var buf bytes.Buffer
		if err := merged.Write(&buf); err != nil {
			return out, fmt.Errorf("writing the merged profile: %w", err)
		}
		out.Raw = buf.Bytes()
	}
	top, total, err := pproftop.Top(merged, k.SampleType, 10)
	if err != nil {
		return out, err
	}
	out.Top, out.Total = entries(top), total
	return out, nil
}

// fetchOne reads one process's profile. An answer that is no profile (an
// HTML page, a 404 from a wrong port or path) says what came instead.
func fetchOne(ctx context.Context, hc *http.Client, url string) ([]byte, *profile.Profile, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("fetching %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		if loc := resp.Header.Get("Location"); loc != "" {
			return nil, nil, fmt.Errorf("fetching %s: %.100q to %.100q, which the pager never follows", url, resp.Status, loc)
		}
		return nil, nil, fmt.Errorf("fetching %s: %.100q", url, resp.Status)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); strings.HasPrefix(mt, "text/html") {
		return nil, nil, fmt.Errorf("fetching %s: it answered HTML, not a pprof profile: is the port or path wrong?", url)
	}
	raw, p, err := pproftop.Read(resp.Body, pproftop.MaxBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", url, err)
	}
	return raw, p, nil
}

func entries(top []pproftop.Entry) []incident.TopEntry {
	out := make([]incident.TopEntry, 0, len(top))
	for _, e := range top {
		out = append(out, incident.TopEntry{Function: e.Function, Flat: e.Flat, FlatPct: e.FlatPct})
	}
	return out
}
