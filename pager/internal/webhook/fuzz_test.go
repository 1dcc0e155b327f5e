package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"strings"
	"testing"

	"burnlab/pager/internal/webhook"
	"burnlab/shared/amwebhook"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"burnlab/pager/internal/lifecycle"
	"burnlab/pager/internal/store"
	"burnlab/shared/pproftop"
)

// cannedGateway answers every request with one heap profile, so a fuzzed
// page's capture runs the whole way, file included, without a network.
type cannedGateway []byte

func (g cannedGateway) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Status: "200 OK", Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(g)), Request: r}, nil
}

var profileFile = regexp.MustCompile(`^[0-9a-f]{16}--?[0-9]+\.pb\.gz$`)

// fuzzDir is a temporary directory on tmpfs where there is one: the
// store's fsyncs are most of an exec's time on a disk and free there, and
// none of the properties depends on the disk.
func fuzzDir(t *testing.T) string {
	if fi, err := os.Stat("/dev/shm"); err != nil || !fi.IsDir() {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp("/dev/shm", "pager-fuzz-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// FuzzWebhookPayload feeds the webhook arbitrary bodies. It must never
// panic nor answer 5xx (bad input is the client's: a 4xx with a reason); a
// 2xx means every alert of the body is stored and still there after a
// restart; a fingerprint that is not Alertmanager's is a 400; and no file
// appears outside the data directory, nor in it but the journal and
// profiles named by fingerprint and start.
func FuzzWebhookPayload(f *testing.F) {
	valid := `{"version":"4","groupKey":"{}:{}","status":"firing","receiver":"pager-page","alerts":[{"status":"firing",` +
		`"labels":{"alertname":"LLMGatewayStreamLatencyBudgetBurn","severity":"page","sloth_slo":"stream-latency"},` +
		`"annotations":{"burn_rate":"14.4x"},"startsAt":"2026-12-01T03:12:00.25Z","endsAt":"0001-01-01T00:00:00Z","fingerprint":"0123456789abcdef"}]}`
	var huge strings.Builder
	huge.WriteString(`{"version":"4","alerts":[{"status":"firing","startsAt":"2026-12-01T03:12:00Z","fingerprint":"00000000000000ff","labels":{"alertname":"A","severity":"page"`)
	for i := range 300 {
		fmt.Fprintf(&huge, `,"l%d":"v"`, i)
	}
	huge.WriteString(`}}]}`)
	for _, seed := range []string{
		valid,
		strings.Replace(strings.Replace(valid, `"status":"firing"`, `"status":"resolved"`, 2), `"endsAt":"0001-01-01T00:00:00Z"`, `"endsAt":"2026-12-01T03:20:00Z"`, 1),
		strings.Replace(valid, `"severity":"page"`, `"severity":"ticket"`, 1),
		strings.Replace(valid, `"severity":"page"`, `"severity":"crítico 🚨"`, 1),
		strings.Replace(valid, `[{`, `[{"status":"firing","labels":{"alertname":"B","severity":"page"},"startsAt":"2026-12-01T03:12:00Z","fingerprint":"fedcba9876543210"},{`, 1),
		strings.Replace(valid, `}]}`, `},{"status":"firing","labels":{"alertname":"LLMGatewayStreamLatencyBudgetBurn","severity":"page"},"startsAt":"2026-12-01T03:12:00.25Z","fingerprint":"0123456789abcdef"}]}`, 1),
		valid[:len(valid)/2],
		huge.String(),
		strings.Replace(valid, `0123456789abcdef`, `../../../escaped`, 1),
		strings.Replace(valid, `0123456789abcdef`, `/etc/passwd`, 1),
		strings.Replace(valid, `0123456789abcdef`, `0123456789ABCDEF`, 1),
		strings.Replace(valid, `0123456789abcdef`, `０１２３４５６７８９ａｂｃｄｅｆ`, 1),
		strings.Replace(valid, `0123456789abcdef`, `0123456789abcde\u0000`, 1),
		strings.Replace(valid, `2026-12-01T03:12:00.25Z`, `9999-12-31T23:59:59-23:59`, 1),
		strings.Replace(valid, `2026-12-01T03:12:00.25Z`, `0001-01-01T00:00:00+23:59`, 1),
		strings.Replace(valid, `2026-12-01T03:12:00.25Z`, `1000-01-01T00:00:00Z`, 1),
		strings.Replace(valid, `"version":"4"`, `"version":"3"`, 1),
		strings.Replace(valid, `"alertname":"LLMGatewayStreamLatencyBudgetBurn",`, ``, 1),
		strings.Replace(valid, `"labels":{`, `"labels":{"alertname":"\ud800\udfff\xff",`, 1),
		`{"version":"4","alerts":null}`,
		`{"version":"4","alerts":[null]}`,
		`{"version":"4","alerts":[{"labels":null}]}`,
		`{"version":4,"alerts":{}}`,
		`null`,
		``,
		`[]`,
		`{"version":"4","alerts":[{"status":"firing","fingerprint":"0123456789abcdef","startsAt":"2026-12-01T03:12:00Z","labels":{"alertname":"A"},"annotations":{"burn_rate":"` + strings.Repeat("9", 1000) + `"}}]}`,
	} {
		f.Add([]byte(seed))
	}

	// A real heap profile cut to a few samples: parsing the whole of this
	// process's would be most of an exec.
	var raw, prof bytes.Buffer
	if err := pprof.Lookup("allocs").WriteTo(&raw, 0); err != nil {
		f.Fatal(err)
	}
	_, p, err := pproftop.Read(&raw, pproftop.MaxBytes)
	if err != nil {
		f.Fatal(err)
	}
	p.Sample = p.Sample[:min(len(p.Sample), 5)]
	if err := p.Compact().Write(&prof); err != nil {
		f.Fatal(err)
	}
	gateway := &http.Client{Transport: cannedGateway(prof.Bytes())}

	f.Fuzz(func(t *testing.T, body []byte) {
		base := fuzzDir(t)
		data := filepath.Join(base, "a", "b", "data")
		st, err := store.Open(data, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		l := lifecycle.New(lifecycle.Config{Store: st, Log: zerolog.Nop(), ProfileURL: "http://gateway.invalid/debug/pprof/allocs", Client: gateway}, reg)
		h := webhook.New(webhook.Config{Sink: l, Log: zerolog.Nop()}, reg)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/webhook/page", bytes.NewReader(body)))
		l.Close(context.Background())
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}

		status := rec.Code
		var answer struct {
			Error struct{ Message string }
		}
		json.Unmarshal(rec.Body.Bytes(), &answer)
		switch {
		case status/100 == 5:
			t.Fatalf("%d for a client's body: %s", status, rec.Body)
		case status/100 == 4 && answer.Error.Message == "":
			t.Fatalf("%d without a reason: %s", status, rec.Body)
		}

		var p amwebhook.Message
		decoded := json.Unmarshal(body, &p) == nil
		if decoded && p.Version == "4" {
			for _, a := range p.Alerts {
				if a.Fingerprint != "" && !store.ValidFingerprint(a.Fingerprint) && status != 400 {
					t.Fatalf("fingerprint %q: %d, want 400", a.Fingerprint, status)
				}
			}
		}

		if status/100 == 2 {
			if !decoded || len(p.Alerts) == 0 {
				t.Fatalf("%d for a body that is not a payload with alerts", status)
			}
			re, err := store.Open(data, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer re.Close()
			if re.Skipped() != 0 || re.Cut() != 0 {
				t.Fatalf("journal written by this pager: %d lines unreadable, %d bytes torn", re.Skipped(), re.Cut())
			}
			for i, a := range p.Alerts {
				if _, ok := re.Incident(store.IncidentID(&a)); !ok {
					t.Fatalf("alert %d acknowledged and not there after a restart", i)
				}
			}
			if again, err := re.AddNotification("pager-page", "page", p.Alerts, p.Alerts[0].StartsAt); err != nil || len(again) != 0 {
				t.Fatalf("after a restart the acknowledged alerts are news again: %d, %v", len(again), err)
			}
		}

		filepath.WalkDir(base, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(data, path)
			switch {
			case d.IsDir():
			case rel == "notifications.jsonl":
			case filepath.Dir(rel) == store.ProfilesDir && profileFile.MatchString(filepath.Base(rel)):
			default:
				t.Fatalf("file %s created (data dir %s)", path, data)
			}
			return nil
		})
	})
}
