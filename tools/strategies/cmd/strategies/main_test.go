package main

import (
	"bytes"
	"context"
	"io"
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
		{[]string{"-root", "../../../..", "-replay", "http://127.0.0.1:1"}, "-replay needs exactly one -windows table and -slo"},
		{[]string{"-root", "../../../..", "-sloth", "bin/sloth", "-windows", "prometheus/slo/windows/lab", "-incidents", "nosuch"}, `no incident "nosuch"`},
	} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), tc.args, &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
}

// Validate says every flag that is wrong, not only the first.
func TestValidateNamesEveryBadFlag(t *testing.T) {
	err := run(context.Background(), []string{"-root", "../../../..", "-rate", "0", "-windows", "nowhere", "-low-rates", "x", "-replay", "http://127.0.0.1:1"}, io.Discard, io.Discard)
	for _, want := range []string{"-rate", "AlertWindows", "-low-rates", "-replay"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want it to name %s", err, want)
		}
	}
}
