package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/postgres"
)

// drivers.RetryDeadlock runs a deadlock victim (40P01) again, up to its
// number of tries, and returns anything else, or the last victim's error, at
// once: what the rows claim, the request log's neighbours and the named
// lock's first insert rely on.
func TestRetryDeadlock(t *testing.T) {
	victim := fmt.Errorf("claiming rows: %w", &pgconn.PgError{Code: "40P01", Message: "deadlock detected"})
	other := errors.New("connection reset")
	d := &postgres.Driver{}
	for _, c := range []struct {
		name  string
		errs  []error // what op returns, call after call
		tries int
		calls int
		want  error
	}{
		{"success at once", []error{nil}, 6, 1, nil},
		{"victim twice, then done", []error{victim, victim, nil}, 6, 3, nil},
		{"another error is not retried", []error{other}, 6, 1, other},
		{"victim, then another error", []error{victim, other}, 6, 2, other},
		{"victim every time: stops after the tries", []error{victim, victim, victim, victim}, 3, 3, victim},
	} {
		t.Run(c.name, func(t *testing.T) {
			calls := 0
			err := drivers.RetryDeadlock(context.Background(), d, c.tries, func() error {
				calls++
				return c.errs[min(calls, len(c.errs))-1]
			})
			if calls != c.calls || !errors.Is(err, c.want) {
				t.Fatalf("%d calls, error %v; want %d calls, error %v", calls, err, c.calls, c.want)
			}
		})
	}

	// A cancelled context ends the pause: the victim's error comes back
	// without another try.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := 0
	if err := drivers.RetryDeadlock(ctx, d, 6, func() error { calls++; return victim }); calls != 1 || !errors.Is(err, victim) {
		t.Fatalf("cancelled: %d calls, error %v; want 1 call and the deadlock", calls, err)
	}
}

// A deadlock victim's retries pause a little, more each time, never long.
func TestDeadlockPause(t *testing.T) {
	prev := time.Duration(0)
	for n := 1; n <= 20; n++ {
		p := drivers.DeadlockPause(n)
		if p < 5*time.Millisecond || p > 300*time.Millisecond {
			t.Fatalf("pause %d is %s; want 5 ms to 300 ms", n, p)
		}
		if n <= 6 && p < prev/2 {
			t.Fatalf("pause %d is %s after %s: it should grow", n, p, prev)
		}
		prev = p
	}
}
