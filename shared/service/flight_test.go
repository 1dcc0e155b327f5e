package service

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// The snapshot is served to GET only, refused with a reason once the
// recorder stops, and a recorder without a window or a size is refused.
func TestFlightRecorderServesSnapshots(t *testing.T) {
	for _, bad := range []struct {
		age   time.Duration
		bytes uint64
	}{{0, 1 << 20}, {time.Second, 0}, {-time.Second, 1 << 20}} {
		if _, err := StartFlightRecorder(bad.age, bad.bytes); err == nil {
			t.Errorf("%s, %d bytes: accepted", bad.age, bad.bytes)
		}
	}
	fr, err := StartFlightRecorder(time.Second, 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(fr)
	defer srv.Close()
	get := func(method string) (int, int) {
		req, _ := http.NewRequest(method, srv.URL+FlightRecorderPath, nil)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, len(b)
	}
	if status, n := get(http.MethodGet); status != 200 || n < 16 {
		t.Errorf("GET: %d, %d bytes", status, n)
	}
	if status, _ := get(http.MethodPost); status != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", status)
	}
	fr.Stop()
	if status, _ := get(http.MethodGet); status != http.StatusServiceUnavailable {
		t.Errorf("GET after Stop: %d", status)
	}
}
