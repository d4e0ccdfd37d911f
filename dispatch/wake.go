package dispatch

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/internal/pause"
	"github.com/loanq/loanq/internal/proc"
)

// Waiting (docs/algorithm.md, "Waiting"). A caller whose request is still
// pending after a busy answer does not sleep a fixed delay: it waits for the
// holder's commit and then looks at once.
//
//   - Row-lock strategies: it queues on the task row with a locking read
//     whose wait is bounded by `bound` (the smaller of the recheck step and
//     the caller's remaining timeout): in share mode where the dialect has
//     one (PostgreSQL FOR SHARE, MySQL/MariaDB LOCK IN SHARE MODE), so all
//     waiters are granted together, else a plain FOR UPDATE. The database
//     grants the lock the moment the holder commits or dies; the waiter then
//     reads its request and rolls back at once. So a waiter never holds a
//     transaction longer than the holder holds the lock. Served: it rolls
//     back at once (it held the lock for one primary-key read). Still
//     pending: the holder is gone or committed before this request was
//     logged; the waiter queues exclusively (at once if it already holds the
//     exclusive lock) and serves the pending requests in that transaction,
//     as a holder would.
//   - Lease (and SQLite, which has only lease): there is no lock to queue on,
//     so it polls its request row (one primary-key read joined to the task
//     row) at an interval adapted to the task's recent criteria-query time,
//     and looks again as soon as the request is served, the lease is free, or
//     the lease holder is a process of this host that is gone.

// minPoll is the shortest poll interval: a local indexed read every 25 ms is
// nothing to any database, and well within "tens of milliseconds".
const minPoll = 25 * time.Millisecond

// The servers of strategy.go choose: rowLockServer.await queues on the task
// row (awaitLock) or, where no lock wait can be bounded, polls
// (pollRequest), as leaseServer.await does; rowsServer.await waits for a
// held loan row (rowswait.go).

// awaitLock queues on the task row, bounded, then reads the request.
//
// Where the dialect has a share row lock, the caller first queues in share
// mode: every waiter is granted at the holder's commit at once, reads its
// request and rolls back (the holder serves up to ~10 requests a round: with
// exclusive waits they would take the lock one after the other, and no round
// could start meanwhile). Only a waiter whose request is still pending then
// queues exclusively, as on a dialect without share locks, to serve.
func (e *Engine) awaitLock(ctx context.Context, task *Task, strategy drivers.Strategy, own *ownRequest, bound time.Duration) (served bool, err error) {
	end := time.Now().Add(bound)
	if e.caps().Wait == drivers.WaitQueueShared {
		granted, err := e.shareWaits.wait(ctx, task.ID, bound, func(ctx context.Context) (bool, error) {
			return e.waitShared(ctx, task, bound)
		})
		if err != nil || !granted {
			return false, err
		}
		if served, err := e.readWake(ctx, e.db, own); err != nil || served {
			return served, err
		}
		// Granted and still pending: the holder committed before this
		// request was logged (or died). Queue exclusively for what is left
		// of the bound; the first waiter granted serves every pending
		// request, the later ones find theirs served.
		if bound = time.Until(end); bound <= 0 {
			return false, nil
		}
	}
	w, err := e.openWaitConn(ctx)
	if err != nil {
		return false, fmt.Errorf("waiting for the lock of task %s: %w", task.Name, err)
	}
	defer w.close(ctx)
	tx, err := w.conn.BeginTx(ctx, e.roundTxOptions(task))
	if err != nil {
		return false, fmt.Errorf("waiting for the lock of task %s: %w", task.Name, err)
	}
	defer tx.Rollback() // no-op after serveLocked's commit
	granted, err := w.queue(ctx, tx, bound, e.lockTaskRow(tx, task, e.sql().BoundedLock(boundSeconds(bound))))
	if err != nil || !granted {
		return false, e.waitFailed(task, err)
	}
	// Granted: the holder committed (or died). The bound was for the queue
	// only: serving statements wait as long as the session normally allows.
	if err := w.unbound(ctx, tx); err != nil {
		return false, err
	}
	if served, err := e.readWake(ctx, tx, own); err != nil || served {
		return served, err // served: give the lock back at once (deferred rollback)
	}
	// Still pending, and this caller holds the task lock: it is the holder
	// now and serves. (Releasing it to take it again with the task's own
	// strategy would let the next queued waiter grab it, and so on: with
	// many waiters the lock would pass from waiter to waiter while nobody
	// serves.) The caller's next serve looks for what arrived meanwhile.
	if err := e.serveLocked(ctx, tx, task, strategy, own); !errors.Is(err, errRoundRaced) {
		return false, err
	}
	return false, nil // rolled back: the caller serves again at once
}

// waitShared is the share-mode queue of awaitLock, on a connection and in a
// transaction of its own that it rolls back before returning: granted says
// the lock was granted (the holder committed or died).
func (e *Engine) waitShared(ctx context.Context, task *Task, bound time.Duration) (granted bool, err error) {
	w, err := e.openWaitConn(ctx)
	if err != nil {
		return false, fmt.Errorf("waiting for the lock of task %s: %w", task.Name, err)
	}
	defer w.close(ctx)
	tx, err := w.conn.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("waiting for the lock of task %s: %w", task.Name, err)
	}
	defer tx.Rollback() // a share lock: nothing to commit
	granted, err = w.queue(ctx, tx, bound, e.lockTaskRow(tx, task, &e.sql().LockShareBounded))
	return granted, e.waitFailed(task, err)
}

// wakeGroups lets the callers of one process that wait for the same task's
// holder share one share-mode wait. A `serve` with dozens of API clients on
// one task would otherwise hold a pooled connection per waiter, each queued
// on the same row for the same commit, while the pool (--max-conns) is what
// the next round needs. The share wait only says "the holder committed";
// each caller then reads its own request and, if it is still pending,
// queues exclusively to serve, as before: the lock that serves is never
// shared, so a joined wait changes who is woken, not what is handed out.
type wakeGroups struct {
	mu     sync.Mutex
	byTask map[int64]*wakeGroup
}

// wakeGroup is one share-mode wait in progress: done closes when it ends,
// granted says whether the lock was granted then.
type wakeGroup struct {
	done    chan struct{}
	granted bool
}

// wait joins the task's wait in progress, for at most bound, or leads a new
// one with share (which waits at most bound itself). A joiner whose leader
// gave up (its bound passed first, its caller went away, its connection
// failed) is told "not granted" and looks again on its own, as after a
// bound of its own that passed.
func (g *wakeGroups) wait(ctx context.Context, taskID int64, bound time.Duration, share func(context.Context) (bool, error)) (bool, error) {
	g.mu.Lock()
	if w := g.byTask[taskID]; w != nil {
		g.mu.Unlock()
		t := time.NewTimer(bound)
		defer t.Stop()
		select {
		case <-w.done:
			return w.granted, nil
		case <-t.C:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	if g.byTask == nil {
		g.byTask = map[int64]*wakeGroup{}
	}
	w := &wakeGroup{done: make(chan struct{})}
	g.byTask[taskID] = w
	g.mu.Unlock()
	granted, err := share(ctx)
	g.mu.Lock()
	delete(g.byTask, taskID)
	g.mu.Unlock()
	w.granted = granted && err == nil
	close(w.done)
	return granted, err
}

// lockTaskRow is the locking read of a wait on the task row.
func (e *Engine) lockTaskRow(tx *sql.Tx, task *Task, lock *drivers.Query[engineio.TaskParams, engineio.IDRow]) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := lock.One(ctx, tx, engineio.TaskParams{TaskID: task.ID})
		return err
	}
}

// waitFailed names the task in a wait's error; a cancelled context passes as it is.
func (e *Engine) waitFailed(task *Task, err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("waiting for the lock of task %s: %w", task.Name, err)
}

// readWake reads the request after a granted wait: true when it is no longer
// pending. It reads the whole answer (its loans too), kept in own.woke, so
// that the caller returns it without reading the request again: one round
// trip fewer for every caller a holder's round served while it waited.
func (e *Engine) readWake(ctx context.Context, q drivers.Querier, own *ownRequest) (bool, error) {
	req, err := e.requestOn(ctx, q, own.id)
	if err != nil {
		return false, err
	}
	if req.Status == StatusPending {
		return false, nil
	}
	own.woke = req
	return true, nil
}

// pollRequest polls the request row until it is served, the lease is free or
// held by a dead process of this host, or bound passes.
func (e *Engine) pollRequest(ctx context.Context, task *Task, id int64, bound time.Duration) (served bool, err error) {
	interval := e.pollInterval(ctx, task, bound)
	end := time.Now().Add(bound)
	for {
		step := min(interval, time.Until(end))
		if step <= 0 {
			return false, nil
		}
		if err := pause.For(ctx, step); err != nil {
			return false, err
		}
		w, err := e.sql().RequestWake.One(ctx, e.db, engineio.IDParams{ID: id})
		if err != nil {
			return false, fmt.Errorf("reading request %d: %w", id, err)
		}
		if w.Status != StatusPending {
			return true, nil
		}
		if w.LeaseFree == 1 || (w.Owner.Valid && proc.DeadOnThisHost(w.Owner.String)) {
			return false, nil
		}
	}
}

// pollInterval is a quarter of the task's recent criteria-query time, at
// least minPoll and at most bound (the recheck step: 5/10/20 s by default,
// the ceiling for heavy queries).
func (e *Engine) pollInterval(ctx context.Context, task *Task, bound time.Duration) time.Duration {
	return min(bound, max(minPoll, e.recentQueryTime(ctx, task)/4))
}

// recentQueryTime is the mean duration of the task's ten latest criteria-query
// runs (loanq_query_run), or its --query-delay when none is logged yet.
func (e *Engine) recentQueryTime(ctx context.Context, task *Task) time.Duration {
	r, err := e.sql().RecentRuns.One(ctx, e.db, engineio.TaskParams{TaskID: task.ID})
	if err != nil || r.Runs == 0 {
		return task.QueryDelay
	}
	return time.Duration(r.MeanMS) * time.Millisecond
}

// saveLockWait reads the session's lock wait limit on conn into saved, to
// be put back with WaitLockRestore.
func (e *Engine) saveLockWait(ctx context.Context, conn *sql.Conn, saved *any) error {
	r, err := e.sql().WaitLockSave.One(ctx, conn, engineio.NoParams{})
	*saved = r.Value
	return err
}
