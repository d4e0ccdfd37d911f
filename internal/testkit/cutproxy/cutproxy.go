// Package cutproxy is a TCP proxy tests put between loanq and a database
// server: Cut refuses new connections and breaks the open ones, as a
// database that went away (a dial then fails: connection refused);
// Restore listens again on the same port.
package cutproxy

import (
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// Proxy forwards 127.0.0.1:port to its target until cut.
type Proxy struct {
	t      testing.TB
	target string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

// Through puts a Proxy in front of dsn's server (a URL DSN with a host): it
// returns the proxy, dsn pointed at it, and the database name and the
// proxy's port, which no message may show. ok is false for a DSN with no
// host (SQLite's file).
func Through(t testing.TB, dsn string) (p *Proxy, viaProxy, dbName, port string, ok bool) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		return nil, "", "", "", false
	}
	p = New(t, u.Host)
	u.Host = p.addr
	_, port, _ = net.SplitHostPort(p.addr)
	return p, u.String(), strings.TrimPrefix(u.Path, "/"), port, true
}

// New starts a Proxy to target (host:port), stopped when the test ends.
func New(t testing.TB, target string) *Proxy {
	p := &Proxy{t: t, target: target, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(func() { p.Cut(); p.wg.Wait() })
	return p
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[s] = true, true
			p.mu.Unlock()
			p.wg.Add(2)
			go func() { defer p.wg.Done(); io.Copy(s, c); s.Close(); c.Close() }()
			go func() { defer p.wg.Done(); io.Copy(c, s); s.Close(); c.Close() }()
		}
	}()
}

// Cut closes the listener and every forwarded connection.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// Restore listens again on the proxy's port.
func (p *Proxy) Restore() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("listening again on %s: %v", p.addr, err)
	}
	p.serve(ln)
}
