package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Bad input is a clear error before anything runs.
func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-root", "../../../..", "-spec", "nope.yml"}, "spec:"},
		{[]string{"-root", "../../../..", "-windows", "nowhere"}, "want one AlertWindows file"},
		{[]string{"-root", "../../../..", "-rate", "0"}, "must be positive"},
		{[]string{"-root", "../../../..", "-windows", "prometheus/slo/windows/lab", "-scrape", "1m"}, "fewer than two samples"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-root", "../../../..", "-sloth", "bin/sloth", "-windows", "prometheus/slo/windows/lab", "-incidents", "nosuch"}, `no incident "nosuch"`},
	} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), tc.args, &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
}
