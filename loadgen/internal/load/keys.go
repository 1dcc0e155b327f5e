package load

import (
	"fmt"
	"strings"
)

// ParseKeys reads API keys from a comma-separated list. The gateway's own
// tenant list (key=tenant:tokens-per-minute,…) is accepted too, so one
// setting can serve both.
func ParseKeys(s string) ([]string, error) {
	var keys []string
	for _, item := range strings.Split(s, ",") {
		key, _, _ := strings.Cut(strings.TrimSpace(item), "=")
		if key == "" {
			continue
		}
		if strings.ContainsAny(key, " \t") {
			return nil, fmt.Errorf("API key %q contains a space", key)
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("no API keys in %q", s)
	}
	return keys, nil
}
