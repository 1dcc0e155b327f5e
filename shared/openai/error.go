// Package openai is the part of OpenAI's HTTP API that burnlab's processes
// share: the error body every refusal uses, and the JSON string codec the
// gateway and the synthetic provider use on chat-completion chunks.
package openai

import (
	"encoding/json"
	"net/http"
)

// Error is OpenAI's error body.
type Error struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	} `json:"error"`
}

// ErrorBody is the JSON of an error of kind (OpenAI's "type":
// invalid_request_error, authentication_error, rate_limit_error, …).
func ErrorBody(kind, msg string) []byte {
	var e Error
	e.Error.Message, e.Error.Type = msg, kind
	b, _ := json.Marshal(e) // a struct of two strings always marshals
	return b
}

// WriteError answers status with an error body.
func WriteError(w http.ResponseWriter, status int, kind, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(ErrorBody(kind, msg), '\n'))
}
