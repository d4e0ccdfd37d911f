package drivers

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/loanq/loanq/internal/pause"
)

// InnoDB (and, rarely, PostgreSQL and Oracle) ends one of two transactions
// waiting on each other as a deadlock victim and rolls it back, or rolls back
// the victim's statement. The victim's work was undone whole and says nothing
// about the data: the answer is to run it again. These are the one way loanq
// does that.

// RetryDeadlock runs op until it returns anything but a deadlock-victim error
// of d's database, at most tries times in all, pausing DeadlockPause(n)
// before the nth retry. It returns op's last error; a ctx that ends during a
// pause returns the deadlock error that preceded it. op must be safe to run
// again after a deadlock: a whole transaction, or one statement outside one.
func RetryDeadlock(ctx context.Context, d Driver, tries int, op func() error) error {
	for n := 1; ; n++ {
		err := op()
		if n >= tries || !d.IsDeadlock(err) {
			return err
		}
		if pause.For(ctx, DeadlockPause(n)) != nil {
			return err
		}
	}
}

// RetryDeadlockFor is RetryDeadlock bounded by time instead of tries: op
// runs again after each deadlock, with DeadlockPause's growing pauses (at
// most 200 ms), until bound has passed since the first try; then the last
// deadlock error is returned. For a call a person or a script made and
// would otherwise have to repeat by hand (a disposition): under heavy
// contention InnoDB chose one disposition as the victim four times in a row
// (200 API clients on one task, e2e TestAPILoadShort), and a count of tries
// with short pauses ran out in 50 ms.
func RetryDeadlockFor(ctx context.Context, d Driver, bound time.Duration, op func() error) error {
	end := time.Now().Add(bound)
	for n := 1; ; n++ {
		err := op()
		if !d.IsDeadlock(err) || !time.Now().Before(end) {
			return err
		}
		if pause.For(ctx, min(DeadlockPause(n), time.Until(end))) != nil {
			return err
		}
	}
}

// DeadlockPause is the pause before the nth retry of a deadlock victim:
// 5 ms, doubling, at most 200 ms, with up to half of it again at random so
// that the victims of one deadlock do not meet again.
func DeadlockPause(n int) time.Duration {
	d := min(5*time.Millisecond<<min(max(n, 1)-1, 6), 200*time.Millisecond)
	return d + time.Duration(rand.Int64N(int64(d/2)+1))
}
