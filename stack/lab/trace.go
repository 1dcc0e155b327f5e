package lab

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"golang.org/x/exp/trace"

	"burnlab/shared/incident"
	"burnlab/shared/service"
)

// CheckTrace holds a baseline page to the second half of the write-up's
// mechanism (issue 35): the pager took the gateway's flight-recorder
// snapshot with the page-time profile and serves it at
// /incidents/<id>/trace, a whole trace that golang.org/x/exp/trace reads
// to its end, as `go tool trace` does, holding the gateway's stream tasks;
// and it split the snapshot's slowest stream's time, of which mark assist
// took a part: the collector's work, charged to the stream itself.
func (l Probe) CheckTrace(inc incident.Incident) (string, error) {
	if inc.Profile == nil || inc.Profile.Trace == nil {
		return "", errors.New("no flight-recorder snapshot with the page-time profile")
	}
	tr := inc.Profile.Trace
	if tr.File == "" || tr.Error != "" {
		return "", fmt.Errorf("the flight-recorder snapshot: %s", tr.Error)
	}
	u := "http://" + l.Addrs.Pager + "/incidents/" + url.PathEscape(inc.ID) + "/trace"
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || int64(len(raw)) != tr.Bytes {
		return "", fmt.Errorf("GET %s: %s, %d bytes of %d (%v)", u, resp.Status, len(raw), tr.Bytes, err)
	}
	events, tasks, err := readTrace(raw)
	if err != nil {
		return "", fmt.Errorf("%s: %w", u, err)
	}
	if tasks == 0 || len(tr.Requests) == 0 {
		return "", fmt.Errorf("the snapshot (%d events) holds %d stream tasks and %d split requests: the gateway marks none", events, tasks, len(tr.Requests))
	}
	slow := tr.Requests[0]
	if !(slow.Assist > 0) {
		return "", fmt.Errorf("the snapshot's slowest stream spent no time in mark assist: %s", slow.Words())
	}
	return fmt.Sprintf("flight recorder: %d bytes over %.1f s, %d events, %d streams begun; slowest %s: %s",
		tr.Bytes, tr.Seconds(), events, tasks, slow.RequestID, slow.Words()), nil
}

// readTrace reads a trace to its end and counts its events and the stream
// tasks begun in it.
func readTrace(raw []byte) (events, tasks int, err error) {
	r, err := trace.NewReader(bytes.NewReader(raw))
	if err != nil {
		return 0, 0, err
	}
	for {
		e, err := r.ReadEvent()
		if errors.Is(err, io.EOF) {
			return events, tasks, nil
		}
		if err != nil {
			return events, tasks, err
		}
		events++
		if e.Kind() == trace.EventTaskBegin && e.Task().Type == service.TraceTask {
			tasks++
		}
	}
}
