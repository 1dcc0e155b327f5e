package openaitest

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReadAssemblesWhatAClientSees(t *testing.T) {
	body := ": keep-alive\n\nevent: x\nid: 1\ndata: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n" +
		"data: {\"choices\":[{\"delta\":{}}]}\n\n" +
		"data: not json\n\n" +
		"data: {\"choices\":[{\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\n" +
		"data: {\"error\":{\"message\":\"boom\"}}\n\n" +
		"data: [DONE]\n\n"
	s, err := Read(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if s.Text != "Hello" || !s.Done || len(s.Chunks) != 4 || len(s.Payloads) != 4 ||
		!slices.Equal(s.Malformed, []string{"not json"}) || !slices.Equal(s.Errors, []string{"boom"}) {
		t.Fatalf("read %+v", s)
	}
	if s.Chunks[0].Object != "chat.completion.chunk" || *s.Chunks[2].Choices[0].FinishReason != "stop" {
		t.Fatalf("chunks %+v", s.Chunks)
	}
}

func TestACutStreamHasNoDoneAndAReadErrorIsReturned(t *testing.T) {
	s, err := Read(strings.NewReader("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"))
	if err != nil || s.Done || s.Text != "a" {
		t.Fatalf("%+v %v", s, err)
	}
	boom := errors.New("reset")
	if _, err := Read(iotest.ErrReader(boom)); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the reader's", err)
	}
}
