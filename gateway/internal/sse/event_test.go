package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// seen is what a client observes of a stream: each event it dispatches
// (its type, data and the lastEventId at that point) and each reconnection
// time it is told.
type seen struct {
	events  []string
	retries []string
}

// specClient interprets a stream by the standard's algorithm, step by step
// and with no buffer of its own: the reference the Decoder is held to.
func specClient(in []byte) seen {
	var s seen
	var data, typ, idBuf, lastID string
	for _, line := range specLines(in) {
		switch {
		case line == "":
			lastID = idBuf
			if data == "" {
				typ = ""
				continue
			}
			if typ == "" {
				typ = "message"
			}
			s.events = append(s.events, typ+"|"+strings.TrimSuffix(data, "\n")+"|"+lastID)
			data, typ = "", ""
		case line[0] == ':':
		default:
			name, value, found := strings.Cut(line, ":")
			if found {
				value = strings.TrimPrefix(value, " ")
			}
			switch name {
			case "event":
				typ = value
			case "data":
				data += value + "\n"
			case "id":
				if !strings.Contains(value, "\x00") {
					idBuf = value
				}
			case "retry":
				if value != "" && strings.Trim(value, "0123456789") == "" {
					s.retries = append(s.retries, value)
				}
			}
		}
	}
	return s
}

// decoded is what a client observes of the events a Decoder returns.
func decoded(t *testing.T, d *Decoder) seen {
	t.Helper()
	var s seen
	lastID := ""
	for {
		ev, err := d.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("Next: %v", err)
			}
			return s
		}
		switch {
		case ev.Comment:
		case ev.Retry != nil:
			s.retries = append(s.retries, string(ev.Retry))
		default:
			if ev.HasID {
				lastID = string(ev.ID)
			}
			if ev.HasData {
				typ := string(ev.Type)
				if typ == "" {
					typ = "message"
				}
				s.events = append(s.events, typ+"|"+string(ev.Data)+"|"+lastID)
			}
		}
	}
}

func TestDecoderAsTheStandardSays(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     []string
	}{
		{"one data line", "data: a\n\n", []string{"message|a|"}},
		{"lines joined with LF", "data: {\"a\":\ndata: 1}\n\n", []string{"message|{\"a\":\n1}|"}},
		{"lone CRs", "data: a\rdata: b\r\r", []string{"message|a\nb|"}},
		{"a BOM before the first event", "\xEF\xBB\xBFdata: a\n\n", []string{"message|a|"}},
		{"a bare data line is empty data", "data\n\n", []string{"message||"}},
		{"no space after the colon, one space dropped", "data:x\n\ndata:  y\n\n", []string{"message|x|", "message| y|"}},
		{"type and id", "event: e\nid: 7\ndata: a\n\ndata: b\n\n", []string{"e|a|7", "message|b|7"}},
		{"an id with NUL is ignored", "id: 1\n\nid: \x00\ndata: a\n\n", []string{"message|a|1"}},
		{"type alone dispatches nothing", "event: e\n\ndata: a\n\n", []string{"message|a|"}},
		{"an unfinished event is dropped", "data: a\n\ndata: b\n", []string{"message|a|"}},
		{"comments and other fields", ": hi\nfoo: bar\ndata: a\n\n", []string{"message|a|"}},
	} {
		d := NewDecoder(NewReader(iotest.OneByteReader(strings.NewReader(c.in)), 16, 64), 64, nil)
		got := decoded(t, d)
		if strings.Join(got.events, " / ") != strings.Join(c.want, " / ") {
			t.Errorf("%s: events %q, want %q", c.name, got.events, c.want)
		}
		if ref := specClient([]byte(c.in)); strings.Join(ref.events, " / ") != strings.Join(c.want, " / ") {
			t.Errorf("%s: the reference client says %q, want %q", c.name, ref.events, c.want)
		}
	}
}

func TestDecoderBoundsAnEvent(t *testing.T) {
	in := strings.Repeat("data: 0123456789\n", 100) + "\n"
	d := NewDecoder(NewReader(strings.NewReader(in), 64, 64), 500, nil)
	if _, err := d.Next(); !errors.Is(err, ErrEventTooLong) {
		t.Fatalf("1,100 bytes of data with a 500-byte limit: %v, want ErrEventTooLong", err)
	}
	if c := cap(d.data); c > 1024 {
		t.Errorf("buffered %d bytes for a 500-byte limit", c)
	}
}

// The decoder waits only where a read may block, and an error there ends
// the stream.
func TestDecoderRunsWaitBeforeABlockingRead(t *testing.T) {
	waits := 0
	stop := errors.New("stop")
	d := NewDecoder(NewReader(strings.NewReader("data: a\n\ndata: b\n\n"), 64, 64), 64, func() error {
		waits++
		if waits == 2 {
			return stop
		}
		return nil
	})
	for i, want := range []string{"a", "b"} {
		ev, err := d.Next()
		if err != nil || string(ev.Data) != want {
			t.Fatalf("event %d: %q, %v", i, ev.Data, err)
		}
	}
	if waits != 1 {
		t.Errorf("waited %d times for two events read at once, want 1", waits)
	}
	if _, err := d.Next(); !errors.Is(err, stop) {
		t.Errorf("after the buffered events: %v, want wait's error", err)
	}
}

func FuzzDecoder(f *testing.F) {
	f.Add([]byte("data: {\"a\":1}\n\ndata: [DONE]\n\n"), 8)
	f.Add([]byte("\xEF\xBB\xBFevent: x\rid: 1\rdata\rdata: b\r\rretry: 10\n: c\nid: \x00\n\n"), 1)
	f.Add([]byte("data:a\r\ndata: b\r\n\r\nid\n\ndata: c"), 3)
	f.Fuzz(func(t *testing.T, in []byte, size int) {
		size = 16 + abs(size)%64
		// Limits past the input's size: this holds the rules, not the bounds.
		d := NewDecoder(NewReader(iotest.HalfReader(bytes.NewReader(in)), size, len(in)+1), len(in)+2, nil)
		got, want := decoded(t, d), specClient(in)
		if strings.Join(got.events, "\x01") != strings.Join(want.events, "\x01") {
			t.Fatalf("events\n got %q\nwant %q", got.events, want.events)
		}
		if strings.Join(got.retries, ",") != strings.Join(want.retries, ",") {
			t.Fatalf("retries %q, want %q", got.retries, want.retries)
		}
	})
}

// Ahead offers the buffered bytes only between blocks, never inside one
// whose type or id is read, nor after a CR whose LF may follow; what Skip
// takes, Next does not return again.
func TestAheadIsOfferedOnlyBetweenBlocks(t *testing.T) {
	d := NewDecoder(NewReader(strings.NewReader("event: x\n: c\ndata: 1\n\ndata: 2\n\ndata: 3\r\r"), 64, 64), 64, nil)
	if b, _ := d.Ahead(); b != nil {
		t.Errorf("Ahead before the stream is read: %q", b)
	}
	if ev, _ := d.Next(); !ev.Comment {
		t.Fatalf("want the comment first, got %+v", ev)
	}
	if b, _ := d.Ahead(); b != nil {
		t.Errorf("Ahead inside a block with a type: %q", b)
	}
	if ev, _ := d.Next(); string(ev.Data) != "1" || string(ev.Type) != "x" {
		t.Fatalf("want data 1 of type x, got %+v", ev)
	}
	b, max := d.Ahead()
	if string(b) != "data: 2\n\ndata: 3\r\r" || max != 64 {
		t.Fatalf("Ahead between blocks: %q %d", b, max)
	}
	d.Skip(len("data: 2\n\n"))
	if ev, _ := d.Next(); string(ev.Data) != "3" || len(ev.Type) != 0 {
		t.Fatalf("after Skip, want data 3 of no type, got %+v", ev)
	}
	if b, _ := d.Ahead(); b != nil {
		t.Errorf("Ahead after a CR whose LF may follow: %q", b)
	}
}
