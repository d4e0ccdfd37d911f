package dispatch

import (
	"context"
	"database/sql"
	"time"

	"github.com/loanq/loanq/drivers"
)

// SetBeforeCommit lets tests act inside the assignment transaction, just
// before it commits (to place a request in the race window that the
// post-commit pending check closes: docs/algorithm.md, step 6).
func (e *Engine) SetBeforeCommit(f func()) { e.hooks.beforeCommit = f }

// SetAfterQuery lets tests log a request right after the criteria query ran
// (docs/algorithm.md, step 5: such a request is served from that same run).
func (e *Engine) SetAfterQuery(f func()) { e.hooks.afterQuery = f }

// SetAfterPending lets tests act between a serving round's read of the
// pending requests and their finish (a cancel in that window).
func (e *Engine) SetAfterPending(f func()) { e.hooks.afterPending = f }

// SetAfterCommit lets tests act right after an assignment or claim
// transaction committed (a database lost before its answer is read back).
func (e *Engine) SetAfterCommit(f func()) { e.hooks.afterCommit = f }

// SetBeforeRequestLog lets tests act in Get just before the request is
// logged on its own (the database lost between the task's read and the
// request's insert).
func (e *Engine) SetBeforeRequestLog(f func()) { e.hooks.beforeRequestLog = f }

// SetRenewed lets tests count lease renewals (the heartbeat).
func (e *Engine) SetRenewed(f func()) { e.hooks.renewed = f }

// HoldBounds is the idle and statement bound a lock transaction of t gets.
func (e *Engine) HoldBounds(ctx context.Context, t *Task) (idle, stmt time.Duration, err error) {
	b, err := e.Admin().holdLimit(ctx, e.db, t)
	return b.idle, b.stmt, err
}

// DB is the engine's database, for tests that read or change its tables
// around the engine (production code has no such access: dispatch.go).
func (e *Engine) DB() *sql.DB { return e.db }

// Driver is the engine's driver, for the same tests.
func (e *Engine) Driver() drivers.Driver { return e.driver }

// ArrivalRate is the loans requested per second a serving round of t would
// size its room with (sizing.go), and how many requests TaskLoad read for it.
func (e *Engine) ArrivalRate(ctx context.Context, t *Task) (rate float64, arrivals, spanMS int64, err error) {
	l, err := e.load(ctx, e.db, t)
	return arrivalRate(l), l.arrivals, l.spanMS, err
}

// SetLoggedInClaim sets the hook a rows claim runs, inside its
// transaction, right after logging its fresh request.
func (e *Engine) SetLoggedInClaim(f func(tx *sql.Tx, id int64)) { e.hooks.loggedInClaim = f }
