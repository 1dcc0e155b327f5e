package lab

import (
	"fmt"
	"html"
	"io"
	"net/http"
	"strings"

	"burnlab/shared/incident"
)

// The e2e's checks. Each returns the error of reading the pager or
// Prometheus: a check that cannot read must fail, never pass as "silent".

func find(l *Lab, id string) (incident.Incident, error) {
	incs, err := l.Incidents()
	if err != nil {
		return incident.Incident{}, err
	}
	for _, inc := range incs {
		if inc.ID == id {
			return inc, nil
		}
	}
	return incident.Incident{}, nil
}

// newPage names a firing page other than old, or "".
func newPage(l *Lab, old string) (string, error) {
	incs, err := l.Incidents()
	if err != nil {
		return "", err
	}
	for _, inc := range incs {
		if inc.Severity == "page" && inc.ID != old && inc.Status == "firing" {
			return inc.ID + " " + inc.SLO, nil
		}
	}
	return "", nil
}

func firing(l *Lab, slo, severity string) (bool, error) {
	alerts, err := l.Alerts()
	if err != nil {
		return false, err
	}
	return hasAlert(alerts, slo, severity, "firing"), nil
}

func hasAlert(alerts []Alert, slo, severity, state string) bool {
	for _, a := range alerts {
		if a.Labels["sloth_slo"] == slo && a.Labels["severity"] == severity && a.State == state {
			return true
		}
	}
	return false
}

// pagerShows reads a page of the pager's web UI and says what of want it
// lacks (each as the page's HTML escapes it).
func pagerShows(l *Lab, path string, want ...string) error {
	resp, err := http.Get("http://" + l.cfg.Addrs.Pager + path)
	if err != nil {
		return fmt.Errorf("pager web UI: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("pager web UI %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("pager web UI %s: %s", path, resp.Status)
	}
	for _, w := range want {
		if !strings.Contains(string(b), html.EscapeString(w)) {
			return fmt.Errorf("pager web UI %s does not show %q", path, w)
		}
	}
	return nil
}
