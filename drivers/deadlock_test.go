package drivers_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/loanq/loanq/drivers"
)

var errVictim = errors.New("deadlock victim")

// victimDriver says which errors are deadlocks; nothing else of a Driver is
// used by the retry loops.
type victimDriver struct{ drivers.Driver }

func (victimDriver) IsDeadlock(err error) bool { return errors.Is(err, errVictim) }

// RetryDeadlockFor sends again after each deadlock until its bound has
// passed, and returns at once on anything else: a victim five times in a
// row (more than RetryDeadlock's usual four tries) is still done within the
// bound; one that never ends is told after about the bound, not before.
func TestRetryDeadlockForIsBoundedByTime(t *testing.T) {
	ctx := context.Background()
	calls := 0
	err := drivers.RetryDeadlockFor(ctx, victimDriver{}, 10*time.Second, func() error {
		calls++
		if calls <= 5 {
			return errVictim
		}
		return nil
	})
	if err != nil || calls != 6 {
		t.Errorf("five deadlocks, then done: %v after %d calls; want nil after 6", err, calls)
	}

	start, calls := time.Now(), 0
	err = drivers.RetryDeadlockFor(ctx, victimDriver{}, 300*time.Millisecond, func() error { calls++; return errVictim })
	if took := time.Since(start); !errors.Is(err, errVictim) || took < 300*time.Millisecond || took > 2*time.Second || calls < 5 {
		t.Errorf("always a victim: %v after %v and %d calls; want the deadlock after about 300 ms and several tries", err, took, calls)
	}

	calls = 0
	other := errors.New("permission denied")
	if err := drivers.RetryDeadlockFor(ctx, victimDriver{}, time.Second, func() error { calls++; return other }); err != other || calls != 1 {
		t.Errorf("another error: %v after %d calls; want it at once", err, calls)
	}
}
