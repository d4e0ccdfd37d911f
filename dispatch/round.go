package dispatch

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/internal/pause"
	"github.com/loanq/loanq/problem"
)

// A serving round under the task's row lock (skip, nowait, wait): take the
// lock as the transaction's first statement, size and run the criteria
// query (sizing.go), assign (assign.go) and commit (commit.go). serveRounds
// runs rounds, of either kind (lease.go has the other), until nothing is
// left pending; the servers of strategy.go call it.

// serveRounds runs round (one serving round under the task lock or lease,
// as the server's strategy takes it) and then looks again for requests that
// committed while it held the lock, serving those in another round. A Busy
// error from round means someone else holds the lock: that holder will do
// the same look after its own commit, so nothing is left.
func (e *Engine) serveRounds(ctx context.Context, task *Task, round func() error) error {
	for n := 0; n < max(e.MaxRounds, 1); n++ {
		err := round()
		if errors.Is(err, errRoundRaced) || errors.Is(err, errLoanTakenMeanwhile) {
			continue // rolled back: serve the requests still pending afresh
		}
		if e.driver.IsDeadlock(err) {
			// Chosen as a deadlock victim (InnoDB, with pool claims or
			// requests being logged beside the round): rolled back whole,
			// so the next round serves the same requests afresh.
			continue
		}
		if err != nil {
			return err
		}
		pending, err := e.pending(ctx, e.db, task.ID)
		if err != nil {
			return err
		}
		if len(pending) == 0 {
			return nil
		}
	}
	return nil
}

var errBusy = &problem.Error{Kind: problem.Busy, Msg: "the task lock is held by another caller"}

// serveRoundRowLock is one round under a row lock on the task (skip, nowait,
// wait). The lock is the first statement of the transaction
// (docs/algorithm.md, step 2): in MySQL's REPEATABLE READ the snapshot of
// every later read is taken after the lock is granted, so the pending requests
// and the per-user counts it reads are never older than the previous holder's
// commit.
func (e *Engine) serveRoundRowLock(ctx context.Context, task *Task, strategy drivers.Strategy, lockDeadline time.Time, own *ownRequest) error {
	tx, err := e.db.BeginTx(ctx, e.roundTxOptions(task))
	if err != nil {
		return fmt.Errorf("beginning the assignment transaction: %w", err)
	}
	defer tx.Rollback() // no-op after Commit

	// A plain FOR UPDATE queues behind the holder for as long as the database
	// allows (no limit on PostgreSQL and Oracle by default, 50 s of
	// innodb_lock_wait_timeout on MySQL): the caller's --timeout bounds it.
	// Cancelling the statement cancels it on the server; the transaction is
	// then rolled back, having done nothing.
	lockCtx := ctx
	if strategy == drivers.Wait && !lockDeadline.IsZero() {
		var cancel context.CancelFunc
		lockCtx, cancel = context.WithDeadline(ctx, lockDeadline)
		defer cancel()
	}
	_, err = e.sql().Lock(strategy).One(lockCtx, tx, engineio.TaskParams{TaskID: task.ID})
	switch {
	case errors.Is(err, sql.ErrNoRows): // SKIP LOCKED skipped the row
		return errBusy
	case err != nil && e.driver.IsLockBusy(err): // NOWAIT, or the wait timed out
		return errBusy
	case err != nil && lockCtx.Err() != nil && ctx.Err() == nil: // --timeout passed while queued
		return errBusy
	case err != nil:
		return fmt.Errorf("taking the lock of task %s (%s): %w", task.Name, strategy, err)
	}
	return e.serveLocked(ctx, tx, task, strategy, own)
}

// serveLocked serves the pending requests inside tx, which holds the task's
// row lock (taken by serveRoundRowLock, or by a waiter in awaitLock), and
// commits. own, when not nil, is the caller's request: its answer is kept
// if this commit served it.
func (e *Engine) serveLocked(ctx context.Context, tx *sql.Tx, task *Task, strategy drivers.Strategy, own *ownRequest) error {
	return e.serveLockedMode(ctx, tx, task, strategy, own, false)
}

// serveLockedMode is serveLocked; refill runs the criteria query even with
// no request pending, to refill the task's candidate pool (Refill).
func (e *Engine) serveLockedMode(ctx context.Context, tx *sql.Tx, task *Task, strategy drivers.Strategy, own *ownRequest, refill bool) (err error) {
	// What is pending, and the task's recent runs (for the hold limit and
	// the criteria query's room), in one read right after the lock.
	load, err := e.load(ctx, tx, task)
	if err != nil {
		return err
	}
	// The database ends this session if it holds the lock past the task's
	// hold limit, whatever becomes of this process (dispatch/hold.go). Set
	// here, not in serveRoundRowLock, so a waiter granted the lock in
	// awaitLock is bounded too.
	hold, err := e.limitHold(ctx, tx, task, load.maxMS)
	if err != nil {
		return err
	}
	defer hold.explain(&err)
	if load.requests == 0 && !refill {
		return nil
	}
	// Abandoned work first, under the lock: it is eligible again in this
	// very run, and the per-user counts below no longer include it.
	if err := e.expire(ctx, tx, task); err != nil {
		return err
	}
	found, run, err := e.runCriteria(ctx, tx, task, criteriaLimit(task, load))
	if err != nil {
		return err
	}
	run.Strategy = string(strategy)
	return e.assignCommit(ctx, tx, task, found, run, own)
}

// runCriteria runs the task's criteria query once, after the task's
// --query-delay (a documented stand-in for a heavy query), and times it.
func (e *Engine) runCriteria(ctx context.Context, q drivers.Querier, task *Task, limit int) (criteriaResult, QueryRun, error) {
	run := QueryRun{Holder: e.Holder, started: time.Now()}
	if task.QueryDelay > 0 {
		if err := pause.For(ctx, task.QueryDelay); err != nil {
			return criteriaResult{}, run, err
		}
	}
	rows, err := drivers.CriteriaQuery(e.driver.Dialect(), task.criteria()).Query(ctx, q, engineio.CriteriaParams{TaskID: task.ID, Limit: limit})
	if err != nil {
		return criteriaResult{}, run, fmt.Errorf("running the criteria query of task %s: %w", task.Name, err)
	}
	defer rows.Close()
	var res criteriaResult
	for rows.Next() {
		var key string
		if err := rows.Scan(&key); err != nil {
			return criteriaResult{}, run, fmt.Errorf("reading the criteria query of task %s: %w", task.Name, err)
		}
		if err := checkKeyLength(task, key); err != nil {
			return criteriaResult{}, run, err
		}
		res.loans = append(res.loans, key)
	}
	if err := rows.Err(); err != nil {
		return criteriaResult{}, run, fmt.Errorf("running the criteria query of task %s: %w", task.Name, err)
	}
	res.exhausted = len(res.loans) < limit
	run.DurationMS = time.Since(run.started).Milliseconds()
	hook(e.hooks.afterQuery)
	run.RowsFound = len(res.loans)
	return res, run, nil
}

type criteriaResult struct {
	loans []string
	// exhausted: the query returned fewer rows than asked, so there are no
	// more eligible loans; requests it cannot fill are final (partial/empty).
	exhausted bool
}
