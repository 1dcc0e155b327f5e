package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// NewLogger returns a JSON logger to w at level (debug, info, warn, error).
func NewLogger(w io.Writer, level, process string) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(strings.ToLower(level))
	if err != nil || lvl == zerolog.NoLevel {
		return zerolog.Nop(), fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Str("process", process).Logger(), nil
}

// DefaultReadTimeout bounds reading one request, headers and body, unless
// a Server says otherwise.
const DefaultReadTimeout = 10 * time.Second

// Server is one listener of a process.
type Server struct {
	Name    string
	Addr    string
	Handler http.Handler
	// ReadTimeout bounds reading a request's headers and body together
	// (default DefaultReadTimeout), so a client trickling bytes cannot hold
	// a handler. Streaming handlers must lift the deadline once they have
	// read the body (http.ResponseController.SetReadDeadline(time.Time{})):
	// a deadline left on the connection would end the stream when it fires.
	ReadTimeout time.Duration
	// Streaming servers leave WriteTimeout off: a stream's writes are
	// bounded per flush by its handler instead.
	Streaming bool
	// SendBuffer, when positive, fixes each connection's kernel send buffer
	// (SO_SNDBUF). Autotuning grows it to 4 MiB, enough to swallow a whole
	// stream for a client that reads at 1 KB/s: the handler finishes, the
	// kernel holds the rest, and no write deadline ever sees the client.
	// Bounded, a slow reader blocks the handler's flush and is cut.
	SendBuffer int
}

// sendBufferListener sets each accepted connection's send buffer.
type sendBufferListener struct {
	net.Listener
	size int
}

func (l sendBufferListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok && err == nil {
		// Best effort: a kernel that refuses keeps its autotuning.
		_ = tc.SetWriteBuffer(l.size)
	}
	return c, err
}

// Drain is how a process stops once its context ends: it first answers
// /readyz with 503 for Grace while its listeners still accept, so load
// balancers and probes take it out of rotation before any connection is
// refused; then the listeners close and requests in flight get up to
// Timeout to finish.
type Drain struct {
	Ready   *Readiness
	Grace   time.Duration
	Timeout time.Duration
}

// Serve listens on every server and, once ctx ends, drains them as d says.
// It returns the first listener error, or nil after a clean drain.
func Serve(ctx context.Context, log zerolog.Logger, d Drain, servers ...Server) error {
	var hs []*http.Server
	errc := make(chan error, len(servers))
	for _, s := range servers {
		ln, err := net.Listen("tcp", s.Addr)
		if err != nil {
			for _, h := range hs {
				h.Close()
			}
			return fmt.Errorf("%s listener: %w", s.Name, err)
		}
		if s.SendBuffer > 0 {
			ln = sendBufferListener{ln, s.SendBuffer}
		}
		read := s.ReadTimeout
		if read <= 0 {
			read = DefaultReadTimeout
		}
		watch := watchConns(log.With().Str("listener", s.Name).Logger())
		h := &http.Server{
			Handler:           watch.handler(s.Handler),
			ReadHeaderTimeout: min(read, 5*time.Second),
			ReadTimeout:       read,
			IdleTimeout:       2 * time.Minute,
			MaxHeaderBytes:    64 << 10,
			ConnContext:       watch.connContext,
			ConnState:         watch.connState,
		}
		if !s.Streaming {
			h.WriteTimeout = 2 * time.Minute
		}
		hs = append(hs, h)
		log.Info().Str("listener", s.Name).Str("addr", ln.Addr().String()).Msg("listening")
		go func() {
			if err := h.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("%s listener: %w", s.Name, err)
			}
		}()
	}
	select {
	case err := <-errc:
		for _, h := range hs {
			h.Close()
		}
		return err
	case <-ctx.Done():
	}
	if d.Ready != nil {
		d.Ready.Drain()
	}
	if d.Grace > 0 {
		log.Info().Dur("grace", d.Grace).Msg("shutting down: not ready, still accepting during the grace period")
		select {
		case err := <-errc:
			for _, h := range hs {
				h.Close()
			}
			return err
		case <-time.After(d.Grace):
		}
	}
	log.Info().Dur("drain", d.Timeout).Msg("shutting down: listeners closed, draining in-flight requests")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), d.Timeout)
	defer cancel()
	var firstErr error
	for _, h := range hs {
		if err := h.Shutdown(shutdownCtx); err != nil {
			h.Close() // past the drain: whatever is left is cut, on every listener
			if firstErr == nil {
				firstErr = fmt.Errorf("drain: %w", err)
			}
		}
	}
	return firstErr
}

// unfinished logs connections that close while a request on them is
// still being read: net/http drops them silently when the read deadline
// fires, and a slow-header client would otherwise leave no trace. A request
// that reached its handler is the handler's to log.
type unfinished struct {
	log   zerolog.Logger
	mu    sync.Mutex
	conns map[net.Conn]*connWatch
}

type connWatch struct {
	opened  time.Time
	reading atomic.Bool
}

type connWatchKey struct{}

func watchConns(log zerolog.Logger) *unfinished {
	return &unfinished{log: log, conns: map[net.Conn]*connWatch{}}
}

func (u *unfinished) connContext(ctx context.Context, c net.Conn) context.Context {
	w := &connWatch{opened: time.Now()}
	w.reading.Store(true)
	u.mu.Lock()
	u.conns[c] = w
	u.mu.Unlock()
	return context.WithValue(ctx, connWatchKey{}, w)
}

func (u *unfinished) connState(c net.Conn, state http.ConnState) {
	u.mu.Lock()
	w := u.conns[c]
	if state == http.StateClosed || state == http.StateHijacked {
		delete(u.conns, c)
	}
	u.mu.Unlock()
	if w == nil {
		return
	}
	switch state {
	case http.StateActive:
		w.reading.Store(true)
	case http.StateIdle:
		w.reading.Store(false)
	case http.StateClosed:
		if w.reading.Load() {
			u.log.Warn().Str("remote", c.RemoteAddr().String()).Dur("open", time.Since(w.opened).Round(time.Millisecond)).
				Msg("connection closed before a complete request arrived (read deadline, or the client hung up)")
		}
	}
}

// handler marks a request as read once it reaches h.
func (u *unfinished) handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cw, ok := r.Context().Value(connWatchKey{}).(*connWatch); ok {
			cw.reading.Store(false)
		}
		h.ServeHTTP(w, r)
	})
}
