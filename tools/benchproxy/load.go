package benchproxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// apiKey is the tenant key the gateways are started with; the other
// targets ignore the header.
const apiKey = "bench"

func newClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DisableCompression:  true,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
	}}
}

func requestBody(maxTokens, paceMS int) []byte {
	b := `{"model":"bench","stream":true,"max_tokens":` + strconv.Itoa(maxTokens)
	if paceMS > 0 {
		b += `,"pace_ms":` + strconv.Itoa(paceMS)
	}
	return []byte(b + `,"messages":[{"role":"user","content":"write ten thousand tokens"}]}`)
}

// errStream is a stream that did not arrive whole: a cut stream is a
// failure, never a fast one.
var errStream = errors.New("stream not whole")

// readStream reads an answer to its end and checks it is a whole stream:
// status 200, at least want events, the last one data: [DONE]. At least:
// the gateway may send one more, the text it held back in case it grew into
// PII, released after the finish chunk. onEvent, if set, is told each event
// count as it grows.
func readStream(resp *http.Response, want int, onEvent func(int)) error {
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%w: status %d: %s", errStream, resp.StatusCode, bytes.TrimSpace(b))
	}
	buf := make([]byte, 32<<10)
	var events int
	var last byte   // the byte before buf, to find "\n\n" across reads
	var tail []byte // the stream's last bytes
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			b := buf[:n]
			end := b[len(b)-1]
			if last == '\n' && b[0] == '\n' {
				events++
				b = b[1:]
			}
			events += bytes.Count(b, []byte("\n\n"))
			last = end
			tail = append(tail, buf[:n]...)
			if len(tail) > 32 {
				tail = append(tail[:0], tail[len(tail)-32:]...)
			}
			if onEvent != nil {
				onEvent(events)
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: after %d of %d events: %w", errStream, events, want, err)
		}
	}
	if !bytes.HasSuffix(tail, []byte(done)) {
		return fmt.Errorf("%w: %d of %d events, and it does not end with data: [DONE] (ends %q)", errStream, events, want, tail)
	}
	if events < want {
		return fmt.Errorf("%w: %d events, want %d", errStream, events, want)
	}
	return nil
}

func post(ctx context.Context, client *http.Client, url string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	return client.Do(req)
}

// loadResult is one row's run from the client's side.
type loadResult struct {
	durations []time.Duration // of the whole streams
	failures  int
	firstErr  error
	wall      time.Duration
}

// runLoad sends streams POSTs with conc workers, each reading its answer
// to the end, and times every stream from request to last byte.
func runLoad(ctx context.Context, client *http.Client, url string, body []byte, streams, conc, wantEvents int) loadResult {
	var (
		next atomic.Int64
		mu   sync.Mutex
		res  loadResult
		wg   sync.WaitGroup
	)
	start := time.Now()
	for range min(conc, streams) {
		wg.Go(func() {
			for next.Add(1) <= int64(streams) {
				t0 := time.Now()
				resp, err := post(ctx, client, url, body)
				if err == nil {
					err = readStream(resp, wantEvents, nil)
				}
				d := time.Since(t0)
				mu.Lock()
				if err != nil {
					res.failures++
					if res.firstErr == nil {
						res.firstErr = err
					}
				} else {
					res.durations = append(res.durations, d)
				}
				mu.Unlock()
				if ctx.Err() != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	res.wall = time.Since(start)
	slices.Sort(res.durations)
	return res
}

// quantile is the nearest-rank q-quantile of sorted durations.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// holdStreams opens n streams of events tokens paced by the upstream, waits
// until each has received eventsEach events, calls measure while all n are
// in flight, and then cancels them.
func holdStreams(ctx context.Context, url string, n, events, eventsEach, paceMS int, measure func() error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client := newClient()
	defer client.CloseIdleConnections()
	body := requestBody(events, paceMS)
	var (
		reached sync.WaitGroup
		wg      sync.WaitGroup
		errc    = make(chan error, n)
	)
	reached.Add(n)
	for range n {
		wg.Go(func() {
			var once sync.Once
			resp, err := post(ctx, client, url, body)
			if err == nil {
				err = readStream(resp, -1, func(events int) {
					if events >= eventsEach {
						once.Do(reached.Done)
					}
				})
			}
			if ctx.Err() == nil {
				errc <- fmt.Errorf("a held stream ended before the measurement: %w", err)
			}
		})
	}
	all := make(chan struct{})
	go func() { reached.Wait(); close(all) }()
	var err error
	select {
	case <-all:
		err = measure()
	case err = <-errc:
	case <-time.After(2 * time.Minute):
		err = fmt.Errorf("%d streams did not each reach %d events within 2 minutes", n, eventsEach)
	case <-ctx.Done():
		err = ctx.Err()
	}
	cancel()
	wg.Wait()
	return err
}

// heapInuse forces a garbage collection in a Go server and reads its
// go_memstats_heap_inuse_bytes, so the figure is live memory, not garbage
// waiting for the next cycle.
func heapInuse(ctx context.Context, admin string) (uint64, error) {
	v, err := afterGC(ctx, admin, "go_memstats_heap_inuse_bytes")
	return uint64(v), err
}

// afterGC forces a garbage collection in a Go server (pprof's heap profile
// with gc=1) and then reads one unlabelled metric from its /metrics. The
// collection also settles the runtime's allocation counter: a P adds what
// it allocated from a cached span when it gives the span back, which every
// P does at a collection. What the profile and /metrics allocate after it
// waits for the next reading, about the same each time, which is what
// ScalingReport's ProbeBytes measures and takes off.
func afterGC(ctx context.Context, admin, metric string) (float64, error) {
	client := &http.Client{Timeout: 30 * time.Second}
	for _, path := range []string{"/debug/pprof/heap?gc=1", "/metrics"} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+path, nil)
		if err != nil {
			return 0, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, fmt.Errorf("%s of %s: %w", metric, admin, err)
		}
		if path != "/metrics" {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil {
				return 0, fmt.Errorf("%s of %s: %w", metric, admin, err)
			}
			continue
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), metric+" "); ok {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil {
					return 0, fmt.Errorf("%s of %s: %w", metric, admin, err)
				}
				return f, nil
			}
		}
		if err := sc.Err(); err != nil {
			return 0, fmt.Errorf("%s of %s: %w", metric, admin, err)
		}
	}
	return 0, fmt.Errorf("%s of %s: not in /metrics", metric, admin)
}
