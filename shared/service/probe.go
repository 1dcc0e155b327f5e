package service

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// Probe asks url once and succeeds only on 200 OK. Container images built
// on distroless have no shell, curl or wget, so compose's healthchecks run
// this (cmd/healthcheck) instead.
func Probe(ctx context.Context, rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("probe: %q is not an http(s) URL", rawURL)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("probe: %s answered %s: %q", rawURL, resp.Status, body)
	}
	return nil
}
