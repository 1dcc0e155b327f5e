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
	if ok, _ := r.Admit(a); !ok {
		t.Fatal("a fresh tenant is admitted")
	}
	// An admitted stream is never cut: it may overdraw.
	r.Charge(a, 70)
	ok, wait := r.Admit(a)
	if ok || wait != 11*time.Second {
		t.Fatalf("after overdrawing by 10: ok=%v retry after %s, want 11s", ok, wait)
	}
	now = now.Add(11 * time.Second)
	if ok, _ := r.Admit(a); !ok {
		t.Fatal("the debt is repaid after 11 s")
	}
	now = now.Add(time.Hour)
	r.Admit(a)
	if a.balance != 60 {
		t.Fatalf("balance banked %v, want at most one minute (60)", a.balance)
	}
}
