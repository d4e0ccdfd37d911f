package web

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"
)

// Every phase of a connection has a deadline, and a page's wait for a slow
// refresh ends before the write deadline.
func TestHTTPServerTimeouts(t *testing.T) {
	s := newHTTPServer(http.NotFoundHandler())
	if s.ReadHeaderTimeout <= 0 || s.ReadTimeout <= 0 || s.WriteTimeout <= 0 || s.IdleTimeout <= 0 || s.MaxHeaderBytes <= 0 {
		t.Fatalf("http.Server without a deadline: %+v", s)
	}
	if s.WriteTimeout < pageWait+10*time.Second {
		t.Fatalf("WriteTimeout %s leaves a page that waited %s no time to answer", s.WriteTimeout, pageWait)
	}
}

// A stop (SIGINT) ends Serve without an error even while a client holds a
// connection on which it never sent a request: after the grace period the
// connection is closed.
func TestServeStopsWithASilentClient(t *testing.T) {
	shutdownGrace = 300 * time.Millisecond
	t.Cleanup(func() { shutdownGrace = 5 * time.Second })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, http.NotFoundHandler(), ln) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve after the stop with a silent client: %v, want nil", err)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("Serve did not return within 4 s of the stop")
	}
}
