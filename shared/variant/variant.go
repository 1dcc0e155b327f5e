// Package variant names the gateway's two builds: the write-up's baseline
// transcript parser (a regexp per event and out +=) and the fixed one. The
// name is everywhere the build is chosen or shown — compose's image tag
// (GATEWAY_TAG), the Dockerfile's VARIANT, gateway_build_info{variant},
// the lab's -variant and the scenario table's builds — and Parse is the one
// place a name from outside is checked.
package variant

import "fmt"

// Variant is a gateway build.
type Variant string

// The builds.
const (
	Baseline Variant = "baseline"
	Fixed    Variant = "fixed"
)

// All are the builds, the baseline first.
func All() []Variant { return []Variant{Baseline, Fixed} }

// Parse reads a build's name.
func Parse(s string) (Variant, error) {
	switch v := Variant(s); v {
	case Baseline, Fixed:
		return v, nil
	}
	return "", fmt.Errorf("gateway variant %q: want baseline or fixed", s)
}

// Tags are the go build tags that make the build, as the Dockerfile's
// VARIANT does: the fixed parser is behind -tags fixed.
func (v Variant) Tags() string {
	if v == Fixed {
		return "fixed"
	}
	return ""
}
