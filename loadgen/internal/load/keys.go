package load

import (
	"fmt"
	"strings"
)

// Keys are the API keys of a -tenants list: Load's send the traffic, in
// turn; Probe, when the list has one, times the calibration.
type Keys struct {
	Load []string
	// Probe is the key of the list's probe tenant, "" without one. The
	// gateway labels a probe tenant's streams traffic="probe" and the SLIs
	// leave them out; the calibration's streams breach the SLO on purpose,
	// and counted they would fire the first page (docs/loadgen.md).
	Probe string
}

// ParseKeys reads API keys from a comma-separated list. The gateway's own
// tenant list (key=tenant:tokens-per-minute[:streams[:probe]],…) is
// accepted too, so one setting can serve both; a key whose entry ends in
// `:probe` is the probe key, never sent load.
func ParseKeys(s string) (Keys, error) {
	var keys Keys
	for _, item := range strings.Split(s, ",") {
		key, rest, _ := strings.Cut(strings.TrimSpace(item), "=")
		if key == "" {
			continue
		}
		if strings.ContainsAny(key, " \t") {
			return Keys{}, fmt.Errorf("API key %q contains a space", key)
		}
		switch {
		case !strings.HasSuffix(rest, ":probe"):
			keys.Load = append(keys.Load, key)
		case keys.Probe == "":
			keys.Probe = key
		}
	}
	if len(keys.Load) == 0 && keys.Probe == "" {
		return Keys{}, fmt.Errorf("no API keys in %q", s)
	}
	return keys, nil
}
