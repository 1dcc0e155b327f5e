package proxy

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"burnlab/gateway/internal/sse"
)

// seenEvent is one event as a client's EventSource dispatches it.
type seenEvent struct{ typ, data, lastID string }

// clientView decodes what the gateway sent as a client does. The client is
// sse.Decoder, which FuzzDecoder holds to the standard's own algorithm; the
// text is every choice's content in the events that are JSON chunks.
func clientView(t *testing.T, body string) (events []seenEvent, text string) {
	t.Helper()
	d := sse.NewDecoder(sse.NewReader(strings.NewReader(body), 4096, 1<<20), 1<<20, nil)
	lastID := ""
	for {
		ev, err := d.Next()
		if errors.Is(err, io.EOF) {
			return events, text
		}
		if err != nil {
			t.Fatalf("client: %v", err)
		}
		if ev.HasID {
			lastID = string(ev.ID)
		}
		if !ev.HasData {
			continue
		}
		events = append(events, seenEvent{string(ev.Type), string(ev.Data), lastID})
		var c struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal(ev.Data, &c) == nil {
			for _, ch := range c.Choices {
				text += ch.Delta.Content
			}
		}
	}
}

// rawUpstream answers with body exactly as given.
func rawUpstream(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, body)
	}
}

// rawChunk is a chunk whose content is given as JSON string content,
// escapes and all.
func rawChunk(content string) string {
	return `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"` + content + `"}}]}`
}

// The upstream's framing is parsed as the client parses it, so the gateway
// redacts and counts the events the client decodes, whatever line ends,
// BOM or data lines the upstream uses.
func TestEventsAreRedactedAsTheClientDecodesThem(t *testing.T) {
	for _, c := range []struct {
		name, body string
		text       string // the client's decoded text
		tokens     float64
	}{
		{
			name:   "lone CRs",
			body:   "data: " + rawChunk(`mail olga\u0040example.com`) + "\r\rdata: " + rawChunk(" now") + "\r\rdata: [DONE]\r\r",
			text:   "mail [REDACTED:EMAIL] now",
			tokens: 2,
		},
		{
			name: "one chunk over two data lines",
			body: "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":\n" +
				`data: {"content":"heidi\u0040example.com 4111\u00201111\u00201111\u00201111"}}]}` + "\n\ndata: [DONE]\n\n",
			text:   "[REDACTED:EMAIL] [REDACTED:CARD]",
			tokens: 1,
		},
		{
			// Joined before it is repaired, it would go out with its LF
			// inside one data line: the client would decode only the
			// first line, text the gateway counted but never sent.
			name: "one chunk over two data lines, with invalid UTF-8",
			body: "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":\n" +
				"data: {\"content\":\"caf\xe9\"}}]}\n\ndata: [DONE]\n\n",
			text:   "caf\uFFFD",
			tokens: 1,
		},
		{
			name:   "a BOM before the first event",
			body:   "\xEF\xBB\xBFdata: " + rawChunk("first") + "\n\ndata: " + rawChunk(" second") + "\n\ndata: [DONE]\n\n",
			text:   "first second",
			tokens: 2,
		},
		{
			name:   "CRLF",
			body:   "data: " + rawChunk("crlf") + "\r\n\r\ndata: [DONE]\r\n\r\n",
			text:   "crlf",
			tokens: 1,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newLab(t, rawUpstream(c.body))
			resp, body := l.stream(t)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			events, text := clientView(t, body)
			if text != c.text {
				t.Errorf("client decoded %q, want %q\n%s", text, c.text, body)
			}
			for _, leak := range []string{"olga@", "heidi@", "4111 1111"} {
				if strings.Contains(text, leak) {
					t.Errorf("%q reached the client", leak)
				}
			}
			if n := len(events); n == 0 || events[n-1].data != "[DONE]" {
				t.Errorf("the client's last event is not [DONE]: %v", events)
			}
			if n := testutil.ToFloat64(l.m.tokens.WithLabelValues("acme")); n != c.tokens {
				t.Errorf("tokens = %v, want %v", n, c.tokens)
			}
			if l.outcomes(t, OutcomeOK) != 1 || l.reason(reasonNoDone) != 0 {
				t.Errorf("outcome: ok %d, eof_without_done %v", l.outcomes(t, OutcomeOK), l.reason(reasonNoDone))
			}
		})
	}
}

// A bare "data" line is an event with empty data; the client dispatches
// it, so the gateway forwards it.
func TestABareDataLineIsAnEmptyEvent(t *testing.T) {
	l := newLab(t, rawUpstream("data\n\ndata: "+rawChunk("x")+"\n\ndata: [DONE]\n\n"))
	_, body := l.stream(t)
	events, _ := clientView(t, body)
	if len(events) < 2 || events[0].data != "" || events[len(events)-1].data != "[DONE]" {
		t.Fatalf("client events %q, want the empty one first\n%s", events, body)
	}
	if l.reason(reasonMalformed) != 0 {
		t.Error("a bare data line is not malformed")
	}
}

// Every string a client can read goes through the redactor: an error's
// message, usage notes, keys, and the event's id and type.
func TestEveryStringTheClientReadsIsRedacted(t *testing.T) {
	body := "id: judy@example.com\nevent: call 4155550123\ndata: " + rawChunk("hi") + "\n\n" +
		`data: {"id":"c","choices":[],"usage":{"prompt_tokens":1,"note":"mail judy\u0040example.com"}}` + "\n\n" +
		`data: {"judy@example.com":1,"choices":[]}` + "\n\n" +
		`data: {"error":{"message":"contact judy@example.com or 4155550123"}}` + "\n\n" +
		": comment with judy@example.com\n" +
		"data: [DONE]\n\n"
	l := newLab(t, rawUpstream(body))
	_, got := l.stream(t)
	events, _ := clientView(t, got)
	// The chunk with "hi", whose tail is held, the usage, the key, the
	// error, the release of "hi", and [DONE].
	if len(events) != 6 {
		t.Fatalf("client events %q, want 6\n%s", events, got)
	}
	for _, ev := range events {
		var v any
		decoded := ev.data
		if json.Unmarshal([]byte(ev.data), &v) == nil {
			b, _ := json.Marshal(v) // escapes decoded, as the client reads them
			decoded = string(b)
		}
		for _, leak := range []string{"judy@", "4155550123"} {
			if strings.Contains(decoded+ev.typ+ev.lastID, leak) {
				t.Errorf("%q reached the client: %+v", leak, ev)
			}
		}
	}
	if strings.Contains(got, "judy") {
		t.Errorf("PII in the raw stream:\n%s", got)
	}
	if ev := events[0]; ev.typ != "call [REDACTED:PHONE]" || ev.lastID != "[REDACTED:EMAIL]" {
		t.Errorf("type %q, id %q: want each redacted", ev.typ, ev.lastID)
	}
	if n := testutil.ToFloat64(l.m.redactions.WithLabelValues("email")); n != 4 {
		t.Errorf("email redactions = %v, want 4 (id, usage, key, error)", n)
	}
	if l.outcomes(t, OutcomeOK) != 1 {
		t.Error("the stream is ok")
	}
}

// A finishing chunk releases what its choice still holds as an event of the
// gateway's, before it: the upstream event's type and id are the chunk's,
// not the release's.
func TestReleasesDoNotTakeTheEventsTypeAndID(t *testing.T) {
	body := `data: {"choices":[{"index":1,"delta":{"content":"tail abc"}}]}` + "\n\n" +
		"event: fin\nid: 9\n" + `data: {"choices":[{"index":1,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		"data: [DONE]\n\n"
	l := newLab(t, rawUpstream(body))
	_, got := l.stream(t)
	events, _ := clientView(t, got)
	var release, fin *seenEvent
	for i, ev := range events {
		switch {
		case strings.Contains(ev.data, "abc"):
			release = &events[i]
		case strings.Contains(ev.data, "finish_reason"):
			fin = &events[i]
		}
	}
	if release == nil || fin == nil {
		t.Fatalf("want the release and the finishing chunk: %q", events)
	}
	if release.typ != "" || release.lastID != "" {
		t.Errorf("the release took the upstream event's type %q and id %q", release.typ, release.lastID)
	}
	if fin.typ != "fin" || fin.lastID != "9" {
		t.Errorf("the finishing chunk: type %q id %q, want fin and 9", fin.typ, fin.lastID)
	}
}

// Data that is not JSON to the gateway but that a lenient decoder reads
// (Python's json takes NaN, and so the OpenAI SDK) is not passed on when it
// holds escapes the redactor never decoded.
func TestLenientJSONWithEscapesIsNotForwarded(t *testing.T) {
	l := newLab(t, rawUpstream(`data: {"x":NaN,"choices":[{"index":0,"delta":{"content":"mail olga\u0040example.com"}}]}`+"\n\ndata: [DONE]\n\n"))
	_, body := l.stream(t)
	if strings.Contains(body, "olga") {
		t.Fatalf("the escaped address reached the client:\n%s", body)
	}
	if l.reason(reasonUnredactable) != 1 || l.outcomes(t, OutcomeUpstreamError) != 1 {
		t.Errorf("unredactable_chunk %v, upstream_error %d; want 1 and 1", l.reason(reasonUnredactable), l.outcomes(t, OutcomeUpstreamError))
	}
}

// An LF inside a string makes data over two lines invalid JSON for the
// client: it goes on as the text it is, not made into a valid chunk.
func TestDataLinesThatAreNoJSONStayText(t *testing.T) {
	l := newLab(t, rawUpstream("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\ndata: b\"}}]}\n\ndata: [DONE]\n\n"))
	_, body := l.stream(t)
	events, text := clientView(t, body)
	if text != "" || len(events) != 2 || events[0].data != "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\nb\"}}]}" {
		t.Fatalf("client text %q, events %q; want the data as it came, not a chunk", text, events)
	}
}

// PII a client joins across two chunks is caught by the hold-back however
// the upstream names its streams: a text key in another case is the same
// key to a Go client (encoding/json folds case, and so does clientView),
// and a choice the request did not ask for ends the stream.
func TestPIISplitUnderOtherNamesIsCaught(t *testing.T) {
	folded := `data: {"choices":[{"index":0,"delta":{"Content":"mail olga@exa"}}]}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{"CONTENT":"mple.com now"}}]}` + "\n\ndata: [DONE]\n\n"
	l := newLab(t, rawUpstream(folded))
	_, body := l.stream(t)
	if _, text := clientView(t, body); text != "mail [REDACTED:EMAIL] now" {
		t.Errorf("keys in other cases: the client decoded %q", text)
	}
	other := `data: {"choices":[{"index":0,"delta":{"content":"mail olga@exa"}}]}` + "\n\n" +
		`data: {"choices":[{"index":1,"delta":{"content":"mple.com now"}}]}` + "\n\ndata: [DONE]\n\n"
	l = newLab(t, rawUpstream(other))
	resp := l.post(t, "k-acme", `{"stream":true}`) // one choice
	b, _ := io.ReadAll(resp.Body)
	if strings.Contains(string(b), "mple.com") || l.reason(reasonUnredactable) != 1 {
		t.Errorf("a second choice of a one-choice request: unredactable %v\n%s", l.reason(reasonUnredactable), b)
	}
}
