// Package openaitest reads an OpenAI chat-completion stream the way a
// client does, for the tests of the gateway and of the synthetic provider,
// which must agree on what a client sees: the text of the deltas, in-stream
// errors, and whether [DONE] came.
package openaitest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// A Chunk is one chat.completion.chunk, or an in-stream error.
type Chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Choices []struct {
		Delta struct {
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// A Stream is what a client read.
type Stream struct {
	Text      string   // every delta's content, in order
	Chunks    []Chunk  // each data line that is JSON, [DONE] aside
	Payloads  []string // those lines as they came
	Malformed []string // data lines that are not JSON, as they came
	Errors    []string // in-stream errors' messages
	Done      bool     // [DONE] came
}

// Read reads data lines until r ends. Lines of other fields (event:, id:,
// comments) are skipped, as a client that wants only data skips them.
func Read(r io.Reader) (Stream, error) {
	var s Stream
	var text strings.Builder
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		payload, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if payload == "[DONE]" {
			s.Done = true
			continue
		}
		var c Chunk
		if err := json.Unmarshal([]byte(payload), &c); err != nil {
			s.Malformed = append(s.Malformed, payload)
			continue
		}
		s.Chunks, s.Payloads = append(s.Chunks, c), append(s.Payloads, payload)
		if c.Error != nil {
			s.Errors = append(s.Errors, c.Error.Message)
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil {
				text.WriteString(*ch.Delta.Content)
			}
		}
	}
	s.Text = text.String()
	if err := sc.Err(); err != nil {
		return s, fmt.Errorf("reading the stream: %w", err)
	}
	return s, nil
}
