package lifecycle_test

import (
	"bytes"
	"context"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/trace"
	"strings"
	"testing"
	"time"

	"burnlab/pager/internal/lifecycle"

	"burnlab/pager/internal/flight"
	"burnlab/shared/service"
)

// A page takes the gateway's flight-recorder snapshot with its profile: a
// real recorder of the test process, which served a request the snapshot
// holds. The incident keeps the file, its size and the request's split,
// serves the trace at /incidents/<id>/trace and in the API, and counts
// the fetch. A target that fails leaves the profile whole and says why.
func TestAPageTakesTheFlightRecordersSnapshot(t *testing.T) {
	fr, err := service.StartFlightRecorder(5*time.Second, 16<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Stop()
	ctx, task := trace.NewTask(context.Background(), service.TraceTask)
	trace.Log(ctx, service.TraceRequestID, "req-in-trace")
	time.Sleep(20 * time.Millisecond)
	trace.Log(ctx, service.TraceRequestID, "req-in-trace")
	task.End()
	gw := httptest.NewServer(fr)
	defer gw.Close()

	p := newPagerIn(t, t.TempDir(), gatewayPprof(t), func(c *lifecycle.Config) { c.TraceURL = gw.URL + service.FlightRecorderPath })
	start := time.Now().UTC().Truncate(time.Second)
	if status, _ := p.post(t, "/webhook/page", notification(alert("firing", "page", start))); status != 200 {
		t.Fatal(status)
	}
	p.l.Close(context.Background())
	inc := all(p.st)[0]
	if inc.Profile == nil || inc.Profile.Error != "" || inc.Profile.Trace == nil {
		t.Fatalf("profile %+v", inc.Profile)
	}
	tr := inc.Profile.Trace
	if tr.Error != "" || tr.Bytes == 0 || !tr.From.Before(tr.To) || tr.FetchSeconds <= 0 {
		t.Fatalf("trace %+v", tr)
	}
	if r, ok := tr.Find("req-in-trace"); !ok || !r.Began || !r.Ended || r.Seconds < 0.015 {
		t.Errorf("the request in the snapshot: %+v (found %v)", r, ok)
	}
	if fi, err := os.Stat(filepath.Join(p.Dir, tr.File)); err != nil || fi.Size() != tr.Bytes {
		t.Fatalf("trace file %s: %v", tr.File, err)
	}
	if n := p.st.Shares(tr.File); n != 1 {
		t.Errorf("the trace file has %d incidents, want 1: retention removes it with its incident", n)
	}
	for _, path := range []string{"/incidents/" + inc.ID + "/trace", "/api/incidents/" + inc.ID + "/trace"} {
		resp, err := p.Srv.Client().Get(p.Srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || int64(len(raw)) != tr.Bytes {
			t.Fatalf("%s: %d, %d bytes", path, resp.StatusCode, len(raw))
		}
		if _, _, _, err := flight.Split(bytes.NewReader(raw)); err != nil {
			t.Errorf("%s is not a trace: %v", path, err)
		}
	}
	if resp, err := p.Srv.Client().Get(p.Srv.URL + "/incidents/nope/trace"); err != nil || resp.StatusCode != 404 {
		t.Errorf("an unknown incident's trace: %v", err)
	} else {
		resp.Body.Close()
	}
	if got := p.counter(t, "pager_trace_fetches_total", map[string]string{"result": "ok"}); got != 1 {
		t.Errorf("ok fetches %v, want 1", got)
	}
	if !strings.Contains(p.Logs.String(), `"slowest_in_trace":"`) {
		t.Error("the page-time log line does not name the snapshot's slowest request")
	}

	// The flight recorder off: the profile is kept, the trace says why not.
	fr.Stop()
	p = newPagerIn(t, t.TempDir(), gatewayPprof(t), func(c *lifecycle.Config) { c.TraceURL = gw.URL + service.FlightRecorderPath })
	if status, _ := p.post(t, "/webhook/page", notification(alert("firing", "page", start))); status != 200 {
		t.Fatal(status)
	}
	p.l.Close(context.Background())
	inc = all(p.st)[0]
	if inc.Profile == nil || inc.Profile.Error != "" || len(inc.Profile.Top) == 0 || inc.Profile.Trace == nil ||
		!strings.Contains(inc.Profile.Trace.Error, "503") || inc.Profile.Trace.File != "" {
		t.Fatalf("profile %+v, trace %+v", inc.Profile, inc.Profile.Trace)
	}
	if got := p.counter(t, "pager_trace_fetches_total", map[string]string{"result": "error"}); got != 1 {
		t.Errorf("error fetches %v, want 1", got)
	}
}
