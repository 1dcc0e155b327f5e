package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func lines(t *testing.T, r *Reader) ([]string, error) {
	t.Helper()
	var out []string
	for {
		l, err := r.ReadLine()
		if err != nil {
			return out, err
		}
		out = append(out, string(l))
	}
}

func TestReadLine(t *testing.T) {
	in := "\xEF\xBB\xBFdata: a\r\n\r\n: comment\nevent: x\ndata: b\n\ndata: c\rdata: d\r\r\n\rlast"
	for name, src := range map[string]func() io.Reader{
		"whole":       func() io.Reader { return strings.NewReader(in) },
		"byte a read": func() io.Reader { return iotest.OneByteReader(strings.NewReader(in)) },
	} {
		got, err := lines(t, NewReader(src(), 16, 64))
		if !errors.Is(err, io.EOF) {
			t.Fatalf("%s: err = %v", name, err)
		}
		// The BOM is no part of the first line; a lone CR ends a line,
		// a CRLF split between two reads ends only one, and what no
		// terminator ends is no line.
		want := []string{"data: a", "", ": comment", "event: x", "data: b", "", "data: c", "data: d", "", ""}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("%s: lines = %q, want %q", name, got, want)
		}
	}
}

func TestLongLinesAcrossBufferAndLimit(t *testing.T) {
	ok := strings.Repeat("x", 100)
	got, _ := lines(t, NewReader(strings.NewReader(ok+"\nnext\n"), 16, 100))
	if len(got) != 2 || got[0] != ok || got[1] != "next" {
		t.Fatalf("lines = %q", got)
	}
	_, err := lines(t, NewReader(strings.NewReader(strings.Repeat("y", 1<<20+1)+"\n"), 4096, 1<<20))
	if !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("1 MiB + 1 line: err = %v, want ErrLineTooLong", err)
	}
}

// An endless line must fail within the limit, not buffer the whole stream.
func TestEndlessLineIsBounded(t *testing.T) {
	endless := io.LimitReader(infinite{}, 64<<20)
	r := NewReader(endless, 4096, 1<<20)
	_, err := r.ReadLine()
	if !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("err = %v", err)
	}
	if c := cap(r.long); c > 2<<20 {
		t.Fatalf("buffered %d bytes for a 1 MiB limit", c)
	}
}

type infinite struct{}

func (infinite) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'z'
	}
	return len(p), nil
}

func TestBufferedTellsWhenTheNextReadWouldBlock(t *testing.T) {
	r := NewReader(strings.NewReader("a\nb\npartial"), 64, 64)
	if r.Buffered() {
		t.Fatal("nothing read yet, nothing buffered")
	}
	r.ReadLine()
	if !r.Buffered() {
		t.Fatal(`"b\n" is buffered`)
	}
	r.ReadLine()
	if r.Buffered() {
		t.Fatal("only a partial line is buffered: the next read may block")
	}
}

func FuzzReadLine(f *testing.F) {
	f.Add([]byte("data: {\"a\":1}\n\n"), 8)
	f.Add([]byte("x\r\n\r\r\n\n"), 1)
	f.Add([]byte("\xEF\xBB\xBFdata: a\r\rdata: b\r"), 1)
	f.Add([]byte(strings.Repeat("q", 300)), 3)
	f.Fuzz(func(t *testing.T, in []byte, size int) {
		size = 16 + abs(size)%64
		// The lines as the standard's plain split of the whole input says
		// they are: the reader must return exactly these, up to the first
		// too long.
		want := specLines(in)
		r := iotest.HalfReader(bytes.NewReader(in))
		rd := NewReader(r, size, 128)
		for i := 0; ; i++ {
			l, err := rd.ReadLine()
			if i == len(want) {
				// Past the last line: the end, or a tail no terminator
				// ends that is already over the limit.
				tail := len(in) - 1 - bytes.LastIndexAny(in, "\r\n")
				if !errors.Is(err, io.EOF) && !(errors.Is(err, ErrLineTooLong) && tail > 128) {
					t.Fatalf("after the last line: %q, %v; want io.EOF", l, err)
				}
				return
			}
			if w := want[i]; len(w) > 128 {
				if !errors.Is(err, ErrLineTooLong) {
					t.Fatalf("line %d of %d bytes: %q, %v; want ErrLineTooLong", i, len(w), l, err)
				}
				return
			} else if err != nil || string(l) != w {
				t.Fatalf("line %d: %q, %v; want %q", i, l, err, w)
			}
		}
	})
}

// specLines splits a stream into lines as the standard states it, one rule
// at a time and with no buffer: one leading U+FEFF is dropped; a line ends
// at CRLF, LF or a lone CR; what follows the last terminator is no line.
func specLines(in []byte) []string {
	s := strings.TrimPrefix(string(in), "\uFEFF")
	var out []string
	for len(s) > 0 {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			break
		}
		out = append(out, s[:i])
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			i++
		}
		s = s[i+1:]
	}
	return out
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// FuzzBufferedReadsTheSameLines holds the reader to one answer whether or
// not Buffered looked ahead before each ReadLine: Buffered remembers the
// line it found and ReadLine takes it, so the two paths must agree, and
// Buffered must say true only when the line is already in memory. SkipEmpty
// may take only an empty line, and only one already in memory.
func FuzzBufferedReadsTheSameLines(f *testing.F) {
	f.Add([]byte("data: {\"a\":1}\n\ndata: [DONE]\n\n"), 8, uint64(0b1011))
	f.Add([]byte("x\r\n\r\r\n\n"+strings.Repeat("q", 300)+"\nend"), 3, uint64(0xffff))
	f.Fuzz(func(t *testing.T, in []byte, size int, look uint64) {
		size = 16 + abs(size)%64
		plain := NewReader(bytes.NewReader(in), size, 128)
		reads := 0
		src := &countingReader{r: bytes.NewReader(in), reads: &reads}
		peeking := NewReader(src, size, 128)
		for i := 0; ; i++ {
			if look&(1<<(i%64)) != 0 {
				before := reads
				if peeking.Buffered() && reads != before {
					t.Fatal("Buffered read from the source")
				}
			}
			if look&(1<<((i+32)%64)) != 0 {
				before := reads
				if peeking.SkipEmpty() {
					if want, err := plain.ReadLine(); err != nil || len(want) > 0 {
						t.Fatalf("line %d: SkipEmpty skipped %q, %v", i, want, err)
					}
				}
				if reads != before {
					t.Fatal("SkipEmpty read from the source")
				}
			}
			want, werr := plain.ReadLine()
			got, gerr := peeking.ReadLine()
			if string(got) != string(want) || (werr == nil) != (gerr == nil) {
				t.Fatalf("line %d: %q %v with Buffered, %q %v without", i, got, gerr, want, werr)
			}
			if werr != nil {
				return
			}
		}
	})
}

type countingReader struct {
	r     io.Reader
	reads *int
}

func (c *countingReader) Read(p []byte) (int, error) {
	*c.reads++
	return c.r.Read(p)
}
