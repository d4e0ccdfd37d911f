package namedlock_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loanq/loanq/internal/child"
	"github.com/loanq/loanq/internal/testkit/testdb"
	"github.com/loanq/loanq/namedlock"
)

// The keeper's tests run real commands (sh -c, through internal/child) under
// leases in a real database.

func start(t *testing.T, script string, killAfter time.Duration) *child.Proc {
	t.Helper()
	p, err := child.Start("/bin/sh", []string{"sh", "-c", script}, child.Environ(os.Environ(), "", nil), killAfter, nil, os.Stdout, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Signal(syscall.SIGKILL); <-p.Done() })
	return p
}

// events records what Keep reports.
type events struct {
	mu          sync.Mutex
	renewFailed []string
	lost        []string
}

func (e *events) keep() namedlock.KeepEvents {
	return namedlock.KeepEvents{
		RenewFailed: func(err error) { e.mu.Lock(); e.renewFailed = append(e.renewFailed, err.Error()); e.mu.Unlock() },
		Lost:        func(why string) { e.mu.Lock(); e.lost = append(e.lost, why); e.mu.Unlock() },
	}
}

func TestKillAfter(t *testing.T) {
	for _, c := range []struct{ ttl, want time.Duration }{
		{time.Second, time.Second / 3}, {15 * time.Second, 5 * time.Second}, {time.Minute, 5 * time.Second},
	} {
		if got := namedlock.KillAfter(c.ttl); got != c.want {
			t.Errorf("KillAfter(%s) = %s, want %s", c.ttl, got, c.want)
		}
	}
}

// While the command runs its lease is renewed (it outlives its ttl), and it
// is still the holder's, with its token, when the command ends.
func TestKeepRenewsWhileTheCommandRuns(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, db := testdb.Migrated(t, dsn)
		s := &namedlock.Store{DB: db, Driver: d}
		ctx := context.Background()
		l, err := s.Acquire(ctx, "keep", "a", time.Second, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		var ev events
		p := start(t, "sleep 1.8", namedlock.KillAfter(time.Second))
		if lost := s.Keep(ctx, l, time.Second, p, nil, ev.keep()); lost != "" {
			t.Fatalf("lost: %s", lost)
		}
		if p.Status() != 0 || len(ev.renewFailed) != 0 || len(ev.lost) != 0 {
			t.Fatalf("status %d, events %+v", p.Status(), &ev)
		}
		info, err := s.Get(ctx, "keep")
		if err != nil || info.State != "held" || info.Holder != "a" || info.Token != l.Token || !info.ExpiresAt.After(l.ExpiresAt.Add(500*time.Millisecond)) {
			t.Fatalf("after 1.8s under a 1s lease: %+v (taken: %+v), %v", info, l, err)
		}
		if ok, err := s.Release(ctx, l); err != nil || !ok {
			t.Fatalf("release: %v, %v", ok, err)
		}
	})
}

// A keeper whose renewal comes too late (its lease expired and was taken
// over meanwhile, as after a long pause) stops its command at once.
func TestKeepLosesATakenOverLease(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, db := testdb.Migrated(t, dsn)
		s := &namedlock.Store{DB: db, Driver: d}
		ctx := context.Background()
		l, err := s.Acquire(ctx, "over", "a", time.Second, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		// Kept with a 3s ttl, the 1s lease is first renewed 1s after b
		// has taken it over.
		b, err := s.Acquire(ctx, "over", "b", time.Minute, 10*time.Second, nil)
		if err != nil || b.Token != l.Token+1 {
			t.Fatalf("b's take-over: %+v, %v", b, err)
		}
		var ev events
		p := start(t, "exec sleep 30", time.Second)
		began := time.Now()
		lost := s.Keep(ctx, l, 3*time.Second, p, nil, ev.keep())
		if !strings.Contains(lost, "taken over") || p.Status() != 128+int(syscall.SIGTERM) || len(ev.lost) != 1 || ev.lost[0] != lost {
			t.Fatalf("lost %q, status %d, events %+v", lost, p.Status(), &ev)
		}
		if took := time.Since(began); took > 5*time.Second {
			t.Fatalf("the command was stopped after %s, want at the first renewal (1s)", took)
		}
		if info, err := s.Get(ctx, "over"); err != nil || info.Holder != "b" || info.Token != b.Token {
			t.Fatalf("b's lease: %+v, %v", info, err)
		}
	})
}

// Renewals that fail (the database cannot be reached) are retried until
// the lease would have expired; then the command gets SIGTERM, and SIGKILL
// one ttl later when it ignores SIGTERM.
func TestKeepLosesALeaseItCannotRenew(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, db := testdb.Migrated(t, dsn)
		ctx := context.Background()
		l, err := (&namedlock.Store{DB: db, Driver: d}).Acquire(ctx, "cut", "a", time.Second, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, gone := testdb.Open(t, dsn)
		gone.Close()
		s := &namedlock.Store{DB: gone, Driver: d}
		var ev events
		p := start(t, "trap '' TERM; sleep 30", time.Second)
		began := time.Now()
		lost := s.Keep(ctx, l, time.Second, p, nil, ev.keep())
		took := time.Since(began)
		if !strings.HasPrefix(lost, "renewals failed for ") || p.Status() != 128+int(syscall.SIGKILL) {
			t.Fatalf("lost %q, status %d", lost, p.Status())
		}
		if len(ev.renewFailed) < 1 || len(ev.lost) != 1 {
			t.Fatalf("events %+v, want failed renewals, then the loss", &ev)
		}
		if took < 2*time.Second || took > 6*time.Second {
			t.Fatalf("the command ended after %s, want ttl (1s) of failures, then SIGKILL a ttl after SIGTERM", took)
		}
	})
}

// Signals loanq receives go to the command; the lease is kept.
func TestKeepPassesSignalsOn(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, db := testdb.Migrated(t, dsn)
		s := &namedlock.Store{DB: db, Driver: d}
		ctx := context.Background()
		l, err := s.Acquire(ctx, "sig", "a", time.Minute, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		sigs := make(chan os.Signal, 1)
		sigs <- os.Interrupt
		p := start(t, "exec sleep 30", time.Second)
		if lost := s.Keep(ctx, l, time.Minute, p, sigs, namedlock.KeepEvents{}); lost != "" {
			t.Fatalf("lost: %s", lost)
		}
		if st := p.Status(); st != 128+int(syscall.SIGINT) {
			t.Fatalf("status %d, want %d", st, 128+int(syscall.SIGINT))
		}
		if ok, err := s.Release(ctx, l); err != nil || !ok {
			t.Fatalf("release: %v, %v", ok, err)
		}
	})
}

// Acquire: held elsewhere, it answers at once (no wait) or when the wait is
// over, with the holder; a signal ends the wait; a lease released while it
// waits is taken.
func TestAcquireWaits(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, db := testdb.Migrated(t, dsn)
		s := &namedlock.Store{DB: db, Driver: d}
		ctx := context.Background()
		a, err := s.Acquire(ctx, "wait", "a", time.Minute, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, wait := range []time.Duration{0, 600 * time.Millisecond} {
			began := time.Now()
			_, err := s.Acquire(ctx, "wait", "b", time.Minute, wait, nil)
			var held *namedlock.HeldError
			if !errors.As(err, &held) || held.Info == nil || held.Info.Holder != "a" || held.Info.Token != a.Token {
				t.Fatalf("wait %s: %v, want held by a", wait, err)
			}
			if took := time.Since(began); took < wait {
				t.Fatalf("wait %s: answered after %s", wait, took)
			}
		}
		sigs := make(chan os.Signal, 1)
		time.AfterFunc(300*time.Millisecond, func() { sigs <- syscall.SIGTERM })
		_, err = s.Acquire(ctx, "wait", "b", time.Minute, time.Minute, sigs)
		var intr *namedlock.InterruptedError
		if !errors.As(err, &intr) || intr.Signal != syscall.SIGTERM {
			t.Fatalf("signalled: %v", err)
		}
		time.AfterFunc(500*time.Millisecond, func() { s.Release(ctx, a) })
		b, err := s.Acquire(ctx, "wait", "b", time.Minute, time.Minute, nil)
		if err != nil || b.Holder != "b" || b.Token != a.Token+1 {
			t.Fatalf("after the release: %+v, %v", b, err)
		}
	})
}
