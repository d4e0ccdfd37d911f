package dispatch

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/problem"
)

// The hold limit bounds how long one caller may hold a task's row lock. It is
// enforced by the database on the holder's own session (docs/reliability.md):
// a holder that is stopped (SIGSTOP, a paused VM, a long GC pause), cut off
// from the network or gone cannot act, so no client-side timer could free the
// lock; the server ends the session, rolls its transaction back and the lock
// is free for the next caller.
const (
	MinHoldLimit = time.Second
	MaxHoldLimit = 24 * time.Hour
	// A task without --hold-limit gets holdFactor times its slowest recent
	// criteria query (or its --query-delay), within these bounds: never
	// unbounded, and never so tight that an ordinary run is cut.
	DefaultHoldFloor   = 30 * time.Second
	DefaultHoldCeiling = time.Hour
	holdFactor         = 4
)

// DefaultHoldLimit is the hold limit of a task without --hold-limit, given
// the slowest of its recent criteria-query runs and its query delay.
func DefaultHoldLimit(measured, queryDelay time.Duration) time.Duration {
	return min(max(holdFactor*max(measured, queryDelay), DefaultHoldFloor), DefaultHoldCeiling)
}

func validateHoldLimit(limit, queryDelay time.Duration) error {
	if limit == 0 {
		return nil
	}
	if limit < MinHoldLimit || limit > MaxHoldLimit {
		return problem.Usagef("invalid --hold-limit %s: give a duration between %s and %s, or leave it out for a default derived from the criteria query's measured time", limit, MinHoldLimit, MaxHoldLimit)
	}
	if limit <= queryDelay {
		return problem.Usagef("--hold-limit %s must be longer than --query-delay %s, or the database ends every holder before it can commit", limit, queryDelay)
	}
	return nil
}

// HoldLimit is the hold limit in force for a task, and whether it is the
// derived default.
func (a *Admin) HoldLimit(ctx context.Context, t *Task) (time.Duration, bool, error) {
	b, err := a.holdLimit(ctx, a.db, t)
	return b.idle, b.derived, err
}

// holdBounds: idle is the hold limit; stmt bounds one statement. They are
// equal, except for a derived limit with nothing measured yet: the criteria
// query's cost is unknown, so its first run may take up to
// DefaultHoldCeiling (a 2-minute query must not be cut at 30 s forever, never
// getting a run measured), while an idle holder is still ended at the limit.
type holdBounds struct {
	idle, stmt time.Duration
	derived    bool
}

func (a *Admin) holdLimit(ctx context.Context, q drivers.Querier, t *Task) (holdBounds, error) {
	if t.HoldLimit > 0 {
		return holdBounds{idle: t.HoldLimit, stmt: t.HoldLimit}, nil
	}
	measured, err := a.sql().HoldMeasured.One(ctx, q, engineio.TaskParams{TaskID: t.ID})
	if err != nil {
		return holdBounds{derived: true}, fmt.Errorf("reading the measured criteria time of task %s: %w", t.Name, err)
	}
	return holdBoundsFor(t, measured.MaxMS), nil
}

// holdBoundsFor is the hold limit of t given the longest of its recent
// criteria-query runs in milliseconds (NULL: none logged yet).
func holdBoundsFor(t *Task, measured sql.NullInt64) holdBounds {
	if t.HoldLimit > 0 {
		return holdBounds{idle: t.HoldLimit, stmt: t.HoldLimit}
	}
	limit := DefaultHoldLimit(time.Duration(measured.Int64)*time.Millisecond, t.QueryDelay)
	b := holdBounds{idle: limit, stmt: limit, derived: true}
	if !measured.Valid {
		b.stmt = DefaultHoldCeiling
	}
	return b
}

// holdGuard is the hold limit set on one lock transaction.
type holdGuard struct {
	task  *Task
	limit time.Duration
	since time.Time // when the limit was set: the server's clock for it starts here
	set   bool      // false where the dialect cannot set it on the session
}

// limitHold runs right after the task lock is taken, in its transaction: it
// asks the database to end this session if it holds the lock longer than the
// task's hold limit. measured is the longest of the task's recent runs, as
// read with the lock (TaskLoad).
func (e *Engine) limitHold(ctx context.Context, tx *sql.Tx, t *Task, measured sql.NullInt64) (*holdGuard, error) {
	b := holdBoundsFor(t, measured)
	set, err := drivers.LimitHold(ctx, e.driver, tx, b.idle, b.stmt)
	if err != nil {
		return nil, err
	}
	return &holdGuard{task: t, limit: b.idle, since: time.Now(), set: set}, nil
}

// explain turns the failure of a round that outlived its hold limit into one
// message that says what happened: the database ended the session, the
// holder's transaction is rolled back and others serve the requests. The
// monotonic clock keeps running while the process is stopped, so a holder
// resumed after SIGCONT sees the time it lost.
func (g *holdGuard) explain(errp *error) {
	if g == nil || !g.set || *errp == nil || problem.KindOf(*errp) != problem.Failure || time.Since(g.since) < g.limit {
		return
	}
	*errp = &problem.Error{Kind: problem.Failure, Err: *errp,
		Msg: fmt.Sprintf("this caller held the lock of task %s longer than its hold limit of %s, so the database ended its session or statement and rolled back its transaction: nothing was assigned by it, and the pending requests are served by other callers",
			g.task.Name, g.limit)}
}
