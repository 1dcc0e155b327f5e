package main

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
)

func TestErrors(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	for args, want := range map[string]string{
		"":                                       "usage",
		"down":                                   "unknown command",
		"switch -variant fixed -control " + addr: "no running lab",
	} {
		err := run(context.Background(), strings.Fields(args), io.Discard)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("lab %s: %v, want %q", args, err, want)
		}
	}
}
