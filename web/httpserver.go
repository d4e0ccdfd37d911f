package web

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// newHTTPServer is the http.Server of `loanq serve`: every phase of a
// connection has a deadline, so a client that sends or reads slowly (or not
// at all) cannot hold a connection and its goroutine for ever.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		// Above pageWait, and above the API's longest wait (60 s): a page
		// that waited for a slow refresh, or an API call that waited for
		// its request, still has time to write its answer.
		WriteTimeout:   90 * time.Second,
		IdleTimeout:    60 * time.Second,
		MaxHeaderBytes: 64 << 10,
	}
}

// shutdownGrace is how long Serve waits for requests under way when ctx
// ends (a variable for the tests).
var shutdownGrace = 5 * time.Second

// Serve serves h (Handler's) on ln until ctx ends, then lets the requests
// under way finish for shutdownGrace and closes what is left: a client
// holding a connection on which it never sent a request (http.Server counts
// such a connection as busy for its first 5 s) does not turn a stop into a
// failure.
func Serve(ctx context.Context, h http.Handler, ln net.Listener) error {
	srv := newHTTPServer(h)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	err := srv.Shutdown(shut)
	if errors.Is(err, context.DeadlineExceeded) {
		return srv.Close()
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
