package proxy

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// A burst past directWrite is on the connection when its flush returns,
// with no flush of net/http's buffer: the client reads all of it while the
// handler waits, as on an upstream that pauses. The first burst goes out
// with the response's header, the second after a chunk whose CRLF waits.
// And what the flush spares is the write of the chunk's CRLF alone, which
// a flush of every burst makes (the last case shows that write, so the
// test can tell).
func TestABurstNeedsNoFlush(t *testing.T) {
	for _, c := range []struct {
		name      string
		http1     bool
		size      int
		crlfAlone bool // the last write of each flush is the chunk's CRLF alone
	}{
		{"skipped, smallest", true, directWrite + 1, false},
		{"skipped, large", true, 3 * writeAt, false},
		{"flushed", false, directWrite + 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			event := []byte("data: {\"x\":1}\n\n")
			burst := bytes.Repeat(event, c.size/len(event)+1)[:c.size]
			const bursts = 2
			flushed, next := make(chan error, bursts), make(chan struct{})
			var conns writeLog
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				out := newFlusher(w, time.Minute)
				out.http1 = c.http1 && r.ProtoMajor == 1
				for range bursts {
					out.take()
					out.buf = append(out.buf, burst...)
					conns.mark()
					err := out.flush()
					conns.mark()
					flushed <- err
					<-next // the upstream pauses
				}
			}))
			srv.Listener = logListener{srv.Listener, &conns}
			srv.Start()
			defer srv.Close()
			defer close(next)

			resp, err := http.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			for i := range bursts {
				got := make([]byte, len(burst))
				read := make(chan error, 1)
				go func() { _, err := io.ReadFull(resp.Body, got); read <- err }()
				select {
				case err := <-read:
					if err != nil || !bytes.Equal(got, burst) {
						t.Fatalf("burst %d: read %v; the bytes match: %v", i, err, bytes.Equal(got, burst))
					}
				case <-time.After(20 * time.Second):
					t.Fatalf("burst %d: %d bytes flushed did not reach the client while the handler waited", i, len(burst))
				}
				if err := <-flushed; err != nil { // the flush's writes are all logged
					t.Fatal(err)
				}
				last := conns.lastOfFlush(i)
				if crlf := string(last) == "\r\n"; crlf != c.crlfAlone {
					t.Errorf("burst %d: the flush's last write was %d bytes ending %q; want the CRLF alone: %v", i, len(last), last[max(0, len(last)-8):], c.crlfAlone)
				}
				next <- struct{}{}
			}
		})
	}
}

// writeLog keeps the writes to a server's connections, and marks where a
// flush begins and ends.
type writeLog struct {
	mu     sync.Mutex
	writes [][]byte
	marks  []int
}

func (l *writeLog) add(p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes = append(l.writes, bytes.Clone(p))
}

func (l *writeLog) mark() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.marks = append(l.marks, len(l.writes))
}

// lastOfFlush is the last write of the i-th flush, between its marks.
func (l *writeLog) lastOfFlush(i int) []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.marks) < 2*i+2 || l.marks[2*i+1] == l.marks[2*i] {
		return nil
	}
	return l.writes[l.marks[2*i+1]-1]
}

type logListener struct {
	net.Listener
	log *writeLog
}

func (l logListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return logConn{c, l.log}, nil
}

type logConn struct {
	net.Conn
	log *writeLog
}

func (c logConn) Write(p []byte) (int, error) {
	c.log.add(p)
	return c.Conn.Write(p)
}
