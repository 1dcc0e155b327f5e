package proxy

import (
	"net/http"

	"burnlab/shared/openai"
)

// Reasons for gateway_upstream_errors_total. Most end a stream; malformed
// lines, invalid JSON and invalid UTF-8 are repaired in place and the
// stream goes on.
const (
	reasonConnect      = "connect"
	reasonTimeout      = "timeout"
	reason4xx          = "status_4xx"
	reason5xx          = "status_5xx"
	reasonContentType  = "content_type"
	reasonReset        = "reset"
	reasonIdle         = "idle_timeout"
	reasonNoDone       = "eof_without_done"
	reasonLineTooLong  = "line_too_long"
	reasonMalformed    = "malformed_line"
	reasonInvalidJSON  = "invalid_json"
	reasonInvalidUTF8  = "invalid_utf8"
	reasonTooManyTexts = "too_many_texts"
	reasonUnredactable = "unredactable_chunk"
	reasonStreamLimit  = "stream_limit"
	// reasonRedirect is an upstream that answered a redirect: the gateway
	// never follows one (New).
	reasonRedirect = "redirect"
)

var allReasons = []string{reasonConnect, reasonTimeout, reason4xx, reason5xx, reasonContentType, reasonReset,
	reasonIdle, reasonNoDone, reasonLineTooLong, reasonMalformed, reasonInvalidJSON, reasonInvalidUTF8, reasonTooManyTexts, reasonUnredactable, reasonStreamLimit, reasonRedirect}

// result is how a stream ended, decided once: the outcome label its
// duration is recorded under, the status the client got (0: none, the
// client was gone), the upstream failure reason counted for it, and why, for
// the log line.
type result struct {
	outcome string
	status  int
	reason  string
	err     string
}

// refuse answers an error before any stream started, in OpenAI's shape.
func refuse(w http.ResponseWriter, status int, outcome, reason, kind, msg string) result {
	openai.WriteError(w, status, kind, msg)
	return result{outcome: outcome, status: status, reason: reason, err: msg}
}

// reject refuses a request for the client's own mistake.
func reject(w http.ResponseWriter, status int, kind, msg string) result {
	return refuse(w, status, OutcomeRejected, "", kind, msg)
}

// gone is the result of a client that left before it could be answered.
func gone(why string) result { return result{outcome: OutcomeClientCanceled, err: why} }

// errorEvent is an error as an SSE event, for a stream whose 200 is sent.
func errorEvent(kind, msg string) []byte {
	return append(append([]byte(nil), dataPrefix...), openai.ErrorBody(kind, msg)...)
}
