package tenant

import (
	"errors"
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
		"k=a:5:2:9":                           "fields",
		"/no/such/file":                       "tenants file",
		"k=" + strings.Repeat("x", 40) + ":5": "tenant name",
	} {
		_, err := Parse(spec)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error about %q", spec, err, want)
		}
	}
}

func TestQuotaAdmitsChargesAndRefills(t *testing.T) {
	r, _ := Parse("k=acme:60") // one token a second
	now := time.Unix(1000, 0)
	r.now = func() time.Time { return now }
	a, _ := r.Authenticate("k")
	release, _, err := r.Admit(a)
	if err != nil {
		t.Fatal("a fresh tenant is admitted")
	}
	release()
	// An admitted stream is never cut: it may overdraw.
	r.Charge(a, 70)
	_, wait, err := r.Admit(a)
	if !errors.Is(err, ErrQuotaSpent) || wait != 11*time.Second {
		t.Fatalf("after overdrawing by 10: %v, retry after %s, want 11s", err, wait)
	}
	now = now.Add(11 * time.Second)
	if _, _, err := r.Admit(a); err != nil {
		t.Fatal("the debt is repaid after 11 s")
	}
	now = now.Add(time.Hour)
	r.Admit(a)
	if a.balance != 60 {
		t.Fatalf("balance banked %v, want at most one minute (60)", a.balance)
	}
}

// A positive balance alone admitted any number of simultaneous streams:
// tokens are only charged as they stream.
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
	var releases []func()
	for range 3 {
		release, _, err := r.Admit(acme)
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, release)
	}
	_, wait, err := r.Admit(acme)
	if !errors.Is(err, ErrTooManyStreams) || wait <= 0 {
		t.Fatalf("a fourth stream: %v, retry after %s; want ErrTooManyStreams and a wait", err, wait)
	}
	if _, _, err := r.Admit(globex); err != nil {
		t.Fatalf("one tenant's limit must not hold another: %v", err)
	}
	releases[0]()
	releases[0]() // a second release of the same stream frees nothing more
	if _, _, err := r.Admit(acme); err != nil {
		t.Fatalf("a released slot is free again: %v", err)
	}
	if _, _, err := r.Admit(acme); !errors.Is(err, ErrTooManyStreams) {
		t.Fatalf("a double release freed two slots: %v", err)
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
