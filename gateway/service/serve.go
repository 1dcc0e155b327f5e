package service

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// NewLogger returns a JSON logger at level (debug, info, warn, error).
func NewLogger(level, process string) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(strings.ToLower(level))
	if err != nil || lvl == zerolog.NoLevel {
		return zerolog.Nop(), fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	return zerolog.New(os.Stderr).Level(lvl).With().Timestamp().Str("process", process).Logger(), nil
}

// Server is one listener of a process.
type Server struct {
	Name    string
	Addr    string
	Handler http.Handler
	// Streaming servers leave WriteTimeout off: a stream's writes are
	// bounded per flush by its handler instead.
	Streaming bool
}

// Serve listens on every server, and on ctx's end shuts them all down,
// letting in-flight requests finish for up to drain. It returns the first
// listener error, or nil after a clean drain.
func Serve(ctx context.Context, log zerolog.Logger, drain time.Duration, servers ...Server) error {
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
		h := &http.Server{
			Handler:           s.Handler,
			ReadHeaderTimeout: 5 * time.Second,
			IdleTimeout:       2 * time.Minute,
			MaxHeaderBytes:    64 << 10,
		}
		if !s.Streaming {
			h.ReadTimeout, h.WriteTimeout = 30*time.Second, 2*time.Minute
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
	log.Info().Dur("drain", drain).Msg("shutting down: draining in-flight requests")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	var firstErr error
	for _, h := range hs {
		if err := h.Shutdown(shutdownCtx); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("drain: %w", err)
			h.Close()
		}
	}
	return firstErr
}
