package drivers

import (
	"context"
	"fmt"
	"time"
)

// HoldLimiter is implemented by a driver whose dialect has more than one way
// to bound a lock holder's session (MySQL 8 and MariaDB name their session
// variables differently). Drivers without it use their HoldLimitSet as is.
type HoldLimiter interface {
	// LimitHold makes the server end the session of q, the transaction that
	// holds a task lock, when it idles inside the transaction or runs one
	// statement longer than limit. It reports whether a bound was set.
	LimitHold(ctx context.Context, q Querier, limit time.Duration) (bool, error)
}

// LimitHold bounds how long the session of q may hold its transaction open,
// through d: HoldLimiter when d implements it, else d's HoldLimitSet (binds:
// the limit in milliseconds, twice). It reports false when the dialect has no
// session setting for it (SQLite; Oracle, where a DBA configures the bound).
func LimitHold(ctx context.Context, d Driver, q Querier, limit time.Duration) (bool, error) {
	if hl, ok := d.(HoldLimiter); ok {
		return hl.LimitHold(ctx, q, limit)
	}
	stmt := d.Statements().HoldLimitSet
	if stmt == "" {
		return false, nil
	}
	ms := limit.Milliseconds()
	if _, err := q.ExecContext(ctx, stmt, ms, ms); err != nil {
		return false, fmt.Errorf("setting the hold limit (%s) on the lock session: %w", limit, err)
	}
	return true, nil
}
