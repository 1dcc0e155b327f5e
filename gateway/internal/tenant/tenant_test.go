package tenant

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseInlineAndFile(t *testing.T) {
	inline, err := Parse("k1=acme:600, k2=globex:60,k3=acme:600")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tenants")
	os.WriteFile(path, []byte("# key tenant tpm\nk1 acme 600 # main key\n\nk2 globex 60\n"), 0o600)
	file, err := Parse(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*Registry{inline, file} {
		a, err := r.Authenticate("k1")
		if err != nil || a.Name != "acme" || a.TokensPerMinute != 600 {
			t.Fatalf("k1 -> %+v, %v", a, err)
		}
		if _, err := r.Authenticate("nope"); !errors.Is(err, ErrUnknownKey) {
			t.Fatalf("unknown key: %v", err)
		}
		if _, err := r.Authenticate(""); !errors.Is(err, ErrUnknownKey) {
			t.Fatalf("empty key: %v", err)
		}
	}
	if got := len(inline.Names()); got != 2 {
		t.Fatalf("names = %v", inline.Names())
	}
}

func TestParseRejectsBadConfig(t *testing.T) {
	for spec, want := range map[string]string{
		"":                                    "no tenants configured",
		"k=acme":                              "tokens-per-minute",
		"k=acme:-5":                           "tokens-per-minute",
		"k=Acme Corp:5":                       "fields",
		"k=ACME:5":                            "tenant name",
		"k=a:5,k=b:5":                         "listed twice",
		"k=a:5,j=a:6":                         "two quotas",
		"k=a:5:0":                             "max-concurrent-streams",
		"k=a:5:many":                          "max-concurrent-streams",
		"k=a:5:2,j=a:5:3":                     "two quotas",
		"k=a:5:2:9":                           "only be the word probe",
		"k=a:5:2:probe:x":                     "fields",
		"k=a:5:2:probe,j=a:5:2":               "marked probe on one of its keys only",
		"/no/such/file":                       "tenants file",
		"k=" + strings.Repeat("x", 40) + ":5": "tenant name",
	} {
		_, err := Parse(spec)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error about %q", spec, err, want)
		}
	}
}

// A probe tenant is marked so on its Tenant; one without the word is a
// customer. Both spellings of the list say it.
func TestAProbeTenantIsMarked(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tenants")
	if err := os.WriteFile(path, []byte("k acme 5\np calibration 5 8 probe # the loadgen's calibration\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, spec := range []string{"k=acme:5,p=calibration:5:8:probe", path} {
		r, err := Parse(spec)
		if err != nil {
			t.Fatalf("Parse(%q): %v", spec, err)
		}
		acme, _ := r.Authenticate("k")
		probe, _ := r.Authenticate("p")
		if acme == nil || probe == nil || acme.Probe || !probe.Probe || probe.MaxStreams != 8 {
			t.Errorf("Parse(%q): acme %+v, calibration %+v; want only calibration marked probe", spec, acme, probe)
		}
	}
}

func TestReservationsAreTakenGivenBackAndRefilled(t *testing.T) {
	r, _ := Parse("k=acme:60") // one token a second
	now := time.Unix(1000, 0)
	r.now = func() time.Time { return now }
	a, _ := r.Authenticate("k")
	if _, _, err := r.Reserve(a, 61); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a reservation above the whole quota: %v, want ErrTooLarge", err)
	}
	rv, _, err := r.Reserve(a, 50)
	if err != nil {
		t.Fatal("a fresh tenant is admitted")
	}
	// 10 left: a reservation of 20 waits 10 s for the refill.
	if _, wait, err := r.Reserve(a, 20); !errors.Is(err, ErrQuotaSpent) || wait != 10*time.Second {
		t.Fatalf("reserving 20 of 10 left: %v, retry after %s; want ErrQuotaSpent after 10s", err, wait)
	}
	// The stream used 5 of its 50: 45 go back.
	rv.End(5)
	rv.End(0) // a second End gives nothing more back
	if a.balance != 55 || a.streams != 0 {
		t.Fatalf("after a stream of 5 of 50 reserved: balance %v, streams %d; want 55 and 0", a.balance, a.streams)
	}
	now = now.Add(time.Hour)
	rv, _, _ = r.Reserve(a, 1)
	rv.End(0)
	if a.balance != 60 {
		t.Fatalf("balance banked %v, want at most one minute (60)", a.balance)
	}
}

// An upstream that streams past max_tokens (or a request without one,
// past the default) draws on the balance; when that is spent the stream
// must stop. Its overrun never becomes a debt: the old charge-as-you-go
// quota let one such stream lock a tenant out for 46 hours.
func TestStreamsPastTheirReservationDrawOnTheBalanceNeverBelowZero(t *testing.T) {
	r, _ := Parse("k=acme:60")
	now := time.Unix(1000, 0)
	r.now = func() time.Time { return now }
	a, _ := r.Authenticate("k")
	rv, _, _ := r.Reserve(a, 20)
	if !rv.Cover(20) || a.balance != 40 {
		t.Fatalf("within the reservation: balance %v, want 40 untouched", a.balance)
	}
	if !rv.Cover(50) || a.balance != 10 {
		t.Fatalf("30 past the reservation: balance %v, want 10", a.balance)
	}
	if rv.Cover(70) || a.balance != 0 {
		t.Fatalf("20 more with 10 left: covered, or balance %v; want refused at 0", a.balance)
	}
	now = now.Add(5 * time.Second)
	if rv.Cover(70) || a.balance != 0 || rv.held != 65 {
		t.Fatalf("5 s later: the refill is taken (held %d, want 65), the stream still short", rv.held)
	}
	// It stopped at 10,000 (an upstream that never stops, a loop that
	// checks late): what it had not covered is charged as far as the
	// balance goes, and no further.
	rv.End(10000)
	if a.balance != 0 || a.streams != 0 {
		t.Fatalf("balance %v, streams %d; want 0 and 0", a.balance, a.streams)
	}
	_, wait, err := r.Reserve(a, 60)
	if !errors.Is(err, ErrQuotaSpent) || wait != time.Minute {
		t.Fatalf("a full reservation after the overrun: %v, retry after %s; want a minute at most", err, wait)
	}
}

// Many streams of one tenant overlapping, each reserving, streaming until
// it is done or the quota refuses it, and ending, on a fake clock: what
// they streamed in all never exceeds one minute's quota plus the refill of
// the time they took, and no refusal asks to wait more than a minute.
func TestWhatATenantStreamsStaysWithinItsQuota(t *testing.T) {
	const tpm = 600
	r, _ := Parse("k=acme:600:1000")
	now := time.Unix(1000, 0)
	begin := now
	r.now = func() time.Time { return now }
	a, _ := r.Authenticate("k")
	rng := rand.New(rand.NewPCG(1, 2))
	type live struct {
		rv         *Reservation
		used, want int
	}
	var streams []*live
	streamed := 0
	for step := range 20000 {
		now = now.Add(time.Duration(rng.IntN(50)) * time.Millisecond)
		if rng.IntN(4) == 0 {
			// A request for up to 200 tokens that streams between none
			// and three times that: an upstream that ignores max_tokens.
			reserve := 1 + rng.IntN(200)
			rv, wait, err := r.Reserve(a, reserve)
			if err != nil {
				if wait > time.Minute {
					t.Fatalf("step %d: retry after %s", step, wait)
				}
				continue
			}
			streams = append(streams, &live{rv: rv, want: rng.IntN(3 * reserve)})
		}
		for i := 0; i < len(streams); i++ {
			s := streams[i]
			stop := s.used == s.want
			if !stop {
				s.used++
				if stop = !s.rv.Cover(s.used); stop {
					s.used-- // the loop stops before forwarding it
				} else {
					streamed++
				}
			}
			if stop {
				s.rv.End(s.used)
				streams = append(streams[:i], streams[i+1:]...)
				i--
			}
		}
		if limit := tpm + tpm*now.Sub(begin).Minutes(); float64(streamed) > limit+1e-6 {
			t.Fatalf("step %d: %d tokens streamed in %s, over the quota's %.0f", step, streamed, now.Sub(begin), limit)
		}
		if a.balance < 0 || a.balance > tpm {
			t.Fatalf("step %d: balance %v", step, a.balance)
		}
	}
	t.Logf("%d tokens streamed in %s, %.0f allowed", streamed, now.Sub(begin).Round(time.Second), tpm+tpm*now.Sub(begin).Minutes())
}

// A positive balance alone admitted any number of simultaneous streams;
// the stream limit still bounds them when each reserves little.
func TestConcurrentStreamsAreBoundedPerTenant(t *testing.T) {
	r, err := Parse("k=acme:1000000:3,j=globex:1000000")
	if err != nil {
		t.Fatal(err)
	}
	acme, _ := r.Authenticate("k")
	globex, _ := r.Authenticate("j")
	if acme.MaxStreams != 3 || globex.MaxStreams != DefaultMaxStreams {
		t.Fatalf("limits %d and %d, want 3 and the default %d", acme.MaxStreams, globex.MaxStreams, DefaultMaxStreams)
	}
	var held []*Reservation
	for range 3 {
		rv, _, err := r.Reserve(acme, 1)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, rv)
	}
	_, wait, err := r.Reserve(acme, 1)
	if !errors.Is(err, ErrTooManyStreams) || wait <= 0 {
		t.Fatalf("a fourth stream: %v, retry after %s; want ErrTooManyStreams and a wait", err, wait)
	}
	if _, _, err := r.Reserve(globex, 1); err != nil {
		t.Fatalf("one tenant's limit must not hold another: %v", err)
	}
	held[0].End(1)
	held[0].End(1) // a second End of the same stream frees nothing more
	if _, _, err := r.Reserve(acme, 1); err != nil {
		t.Fatalf("an ended stream's slot is free again: %v", err)
	}
	if _, _, err := r.Reserve(acme, 1); !errors.Is(err, ErrTooManyStreams) {
		t.Fatalf("a double End freed two slots: %v", err)
	}
	path := filepath.Join(t.TempDir(), "tenants")
	os.WriteFile(path, []byte("k1 acme 600 8\nk2 acme 600 8\n"), 0o600)
	file, err := Parse(path)
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := file.Authenticate("k2"); a.MaxStreams != 8 {
		t.Fatalf("file limit %d, want 8", a.MaxStreams)
	}
}
