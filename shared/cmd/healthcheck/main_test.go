package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealthcheckExitsByStatus(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) }))
	defer srv.Close()
	ctx := context.Background()
	if err := run(ctx, []string{srv.URL + "/readyz"}, io.Discard); err != nil {
		t.Fatalf("200: %v", err)
	}
	status = http.StatusServiceUnavailable
	if err := run(ctx, []string{"-timeout", "1s", srv.URL + "/readyz"}, io.Discard); err == nil {
		t.Fatal("503 passed")
	}
}

func TestHealthcheckWantsOneURL(t *testing.T) {
	var out strings.Builder
	for _, args := range [][]string{nil, {"http://a", "http://b"}} {
		out.Reset()
		if err := run(context.Background(), args, &out); err == nil || !strings.Contains(out.String(), "usage: healthcheck") {
			t.Errorf("args %q: err %v, output %q", args, err, out.String())
		}
	}
}
