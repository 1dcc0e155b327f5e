// Package load is burnlab's open-model load generator: streams start on a
// schedule, whatever the server's state, and each is timed from the moment
// it was scheduled to start, so a stalled server shows in the percentiles
// instead of quietly slowing the load (no coordinated omission).
package load

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// Outcomes of one stream, the values of the `outcome` label.
const (
	OutcomeOK           = "ok"
	OutcomeStreamError  = "stream_error"  // the stream ended with an error event
	OutcomeTruncated    = "truncated"     // it ended without [DONE]
	OutcomeHTTP5xx      = "http_5xx"      // the gateway answered 5xx
	OutcomeRejected     = "rejected"      // 401, 429 or another 4xx: excluded from the SLO
	OutcomeConnectError = "connect_error" // no connection to the gateway
	OutcomeTimeout      = "timeout"       // the stream outlived the per-stream timeout
	OutcomeCanceled     = "canceled"      // the load generator stopped it: excluded
)

// Outcomes lists every outcome, for pre-created metric series.
var Outcomes = []string{OutcomeOK, OutcomeStreamError, OutcomeTruncated, OutcomeHTTP5xx,
	OutcomeRejected, OutcomeConnectError, OutcomeTimeout, OutcomeCanceled}

// Counts reports whether an outcome counts toward the SLO: the server's
// refusals and our own cancellations say nothing about its latency.
func Counts(outcome string) bool { return outcome != OutcomeRejected && outcome != OutcomeCanceled }

// Result is what one stream measured; durations are from its scheduled start.
type Result struct {
	Long     bool
	Outcome  string
	Status   int
	Duration time.Duration
	TTFT     time.Duration // 0 when no token arrived
	Events   int
	Bytes    int64
	Err      string
}

var (
	doneLine   = []byte("data: [DONE]")
	errorLine  = []byte(`data: {"error"`)
	dataPrefix = []byte("data: ")
	emptyToken = []byte(`"content":""`)
	token      = []byte(`"content":"`)
)

// streamOnce sends one chat request and reads its stream to the end.
func streamOnce(ctx context.Context, client *http.Client, url, key string, events int, scheduled time.Time, long bool) Result {
	r := Result{Long: long}
	body := fmt.Sprintf(`{"model":"burnlab","stream":true,"max_tokens":%d,"messages":[{"role":"user","content":"write it all"}]}`, events)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		r.Outcome, r.Err = OutcomeConnectError, err.Error()
		return r
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := client.Do(req)
	if err != nil {
		r.Duration = time.Since(scheduled)
		r.Outcome, r.Err = classify(ctx, err), err.Error()
		return r
	}
	defer resp.Body.Close()
	r.Status = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		r.Duration = time.Since(scheduled)
		r.Err = strings.TrimSpace(string(msg))
		r.Outcome = OutcomeRejected
		if resp.StatusCode >= 500 {
			r.Outcome = OutcomeHTTP5xx
		}
		return r
	}
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		r.Bytes += int64(len(line))
		if errors.Is(err, bufio.ErrBufferFull) {
			continue // a long line: its rest follows; counted, not parsed
		}
		if len(line) > 0 && bytes.HasPrefix(line, dataPrefix) {
			switch {
			case bytes.HasPrefix(line, doneLine):
				r.Duration = time.Since(scheduled)
				r.Outcome = OutcomeOK
				return r
			case bytes.HasPrefix(line, errorLine):
				r.Duration = time.Since(scheduled)
				r.Outcome, r.Err = OutcomeStreamError, strings.TrimSpace(string(line[len(dataPrefix):]))
				return r
			}
			r.Events++
			if r.TTFT == 0 && bytes.Contains(line, token) && !bytes.Contains(line, emptyToken) {
				r.TTFT = time.Since(scheduled)
			}
		}
		if err != nil {
			r.Duration = time.Since(scheduled)
			r.Outcome, r.Err = classify(ctx, err), err.Error()
			if errors.Is(err, io.EOF) {
				r.Outcome = OutcomeTruncated
			}
			return r
		}
	}
}

func classify(ctx context.Context, err error) string {
	var ne net.Error
	switch {
	case errors.Is(context.Cause(ctx), errStreamTimeout):
		return OutcomeTimeout
	case ctx.Err() != nil:
		return OutcomeCanceled
	case errors.As(err, &ne) && ne.Timeout():
		return OutcomeTimeout
	case isDialError(err):
		return OutcomeConnectError
	}
	return OutcomeTruncated
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

var errStreamTimeout = errors.New("stream outlived the per-stream timeout")

// Once sends one stream now and waits for it: calibration's probe.
func Once(ctx context.Context, client *http.Client, target, key string, events int) Result {
	return streamOnce(ctx, client, target, key, events, time.Now(), false)
}
