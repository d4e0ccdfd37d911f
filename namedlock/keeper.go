package namedlock

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"
)

// The lease keeper of `loanq lock run`: take the lease (waiting for it if
// asked), keep it while the command runs, stop the command when it is lost.

// Poll is how often Acquire tries again while the lock is held.
const Poll = 250 * time.Millisecond

// KillAfter is how long the command has between SIGTERM and SIGKILL when
// loanq dies: 5s, or a third of ttl when that is shorter. Keep renews the
// lease every ttl/3, so while renewals succeed loanq dies at most ttl/3
// after one and the lease lasts at least 2·ttl/3 more: the command is gone
// before the next holder can take it.
func KillAfter(ttl time.Duration) time.Duration {
	return min(5*time.Second, ttl/3)
}

// HeldError is Acquire's answer when another holder still had the lock at
// the end of the wait. Info is its state then (nil if it could not be read).
type HeldError struct {
	Name string
	Info *Info
}

func (e *HeldError) Error() string { return fmt.Sprintf("lock %s is held", e.Name) }

// InterruptedError is Acquire's answer when a signal came while it waited.
type InterruptedError struct {
	Name   string
	Signal os.Signal
}

func (e *InterruptedError) Error() string {
	return fmt.Sprintf("interrupted by %s while waiting for lock %s", e.Signal, e.Name)
}

// Acquire takes the named lease for holder, trying again every Poll for up
// to wait while another holder has it: a *HeldError when it is still held
// then, an *InterruptedError when a signal arrives on signals first.
func (s *Store) Acquire(ctx context.Context, name, holder string, ttl, wait time.Duration, signals <-chan os.Signal) (*Lease, error) {
	deadline := time.Now().Add(wait)
	for {
		l, info, err := s.Take(ctx, name, holder, ttl)
		if err != nil {
			return nil, err
		}
		if l != nil {
			return l, nil
		}
		if !time.Now().Before(deadline) {
			return nil, &HeldError{Name: name, Info: info}
		}
		select {
		case sig := <-signals:
			return nil, &InterruptedError{Name: name, Signal: sig}
		case <-time.After(Poll):
		}
	}
}

// Process is the command a lease protects (internal/child's *Proc).
type Process interface {
	Done() <-chan struct{}
	Signal(syscall.Signal)
}

// KeepEvents are told what happens to a kept lease (nil: not told).
type KeepEvents struct {
	// RenewFailed: a renewal failed; Keep tries again at the next tick.
	RenewFailed func(err error)
	// Lost: the lease is lost (why); the command gets SIGTERM now.
	Lost func(why string)
}

// Keep renews the lease every ttl/3 until the command p ends, passing the
// signals that arrive on signals on to it. It returns why the lease was
// lost ("" if it was kept): a renewal that changed no row (expired or taken
// over: at once), or renewals that failed until the lease would have
// expired. Then the command gets SIGTERM, and SIGKILL one ttl later if it
// still runs, and Keep waits for it to end.
func (s *Store) Keep(ctx context.Context, l *Lease, ttl time.Duration, p Process, signals <-chan os.Signal, ev KeepEvents) string {
	tick := time.NewTicker(ttl / 3)
	defer tick.Stop()
	// renewedAt is taken before each renewal is sent: the database computes
	// the new expiry later than that, so renewedAt+ttl never overshoots it.
	renewedAt := time.Now()
	lost := ""
	var kill <-chan time.Time
	for {
		select {
		case <-p.Done():
			return lost
		case sig := <-signals:
			p.Signal(sig.(syscall.Signal))
		case <-kill:
			p.Signal(syscall.SIGKILL)
		case <-tick.C:
			if lost != "" {
				continue
			}
			t0 := time.Now()
			rctx, cancel := context.WithTimeout(ctx, ttl/3)
			ok, err := s.Renew(rctx, l, ttl)
			cancel()
			switch {
			case err == nil && ok:
				renewedAt = t0
				continue
			case err == nil:
				lost = "it expired or was taken over; the renewal found another holder or token"
			case time.Since(renewedAt) >= ttl:
				lost = fmt.Sprintf("renewals failed for %s, longer than --ttl %s: %v", time.Since(renewedAt).Round(time.Millisecond), ttl, err)
			default:
				if ev.RenewFailed != nil {
					ev.RenewFailed(err)
				}
				continue
			}
			if ev.Lost != nil {
				ev.Lost(lost)
			}
			p.Signal(syscall.SIGTERM)
			kill = time.After(ttl)
		}
	}
}
