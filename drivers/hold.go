package drivers

import (
	"context"
	"fmt"
	"github.com/loanq/loanq/drivers/engineio"
	"time"
)

// HoldLimiter is implemented by a driver whose dialect has more than one way
// to bound a lock holder's session (MySQL 8 and MariaDB name their session
// variables differently). Drivers without it use their HoldLimitSet as is.
type HoldLimiter interface {
	// LimitHold makes the server end the session of q, the transaction that
	// holds a task lock, when it idles inside the transaction longer than
	// idle, and abort one statement that runs longer than stmt. It reports
	// whether a bound was set.
	LimitHold(ctx context.Context, q Querier, idle, stmt time.Duration) (bool, error)
}

// LimitHold bounds how long the session of q may hold its transaction open,
// through d: HoldLimiter when d implements it, else d's HoldLimitSet. It reports
// false when the capabilities say loanq sets no limit (hold limit none:
// SQLite, no session holds a task row lock; dba: Oracle, where a DBA
// configures the bound).
func LimitHold(ctx context.Context, d Driver, q Querier, idle, stmt time.Duration) (bool, error) {
	if !d.Capabilities().HoldLimit.IsSetting() {
		return false, nil
	}
	if hl, ok := d.(HoldLimiter); ok {
		return hl.LimitHold(ctx, q, idle, stmt)
	}
	set := &d.Statements().HoldLimitSet
	if _, err := set.Exec(ctx, q, engineio.HoldLimitParams{IdleMS: idle.Milliseconds(), StatementMS: stmt.Milliseconds()}); err != nil {
		return false, fmt.Errorf("setting the hold limit (%s idle, %s per statement) on the lock session: %w", idle, stmt, err)
	}
	return true, nil
}
