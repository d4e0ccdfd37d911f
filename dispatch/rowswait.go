package dispatch

import (
	"context"
	"fmt"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/internal/pause"
)

// A rows caller answers `empty` or `partial` only when the criteria are
// exhausted (docs/algorithm.md, "The rows strategy"). SKIP LOCKED passes over
// rows other claimers hold, and those may be many more than they will take:
// where the task's order needs a sort, InnoDB locks every row the claim
// scanned, not the n it returns. A claim that got fewer than it may take
// therefore reads the criteria once more without locking (heldEligible): an
// eligible loan it did not get is held by another transaction. The claim
// then rolls back, the request stays pending, and the caller waits for that
// row to be let go of (awaitRows, bounded by the caller's recheck step and
// --timeout) before it claims again. Only a claim that finds nothing held
// commits partial or empty.

// heldEligible runs the criteria query in q, without locking, for its first
// eligible loan: inside a claim transaction, the loans this claim assigned
// are no longer eligible (its own inserts), so any key found is one another
// transaction holds (or one that became eligible since the claim's read).
func (e *Engine) heldEligible(ctx context.Context, q drivers.Querier, task *Task, user string) (string, bool, error) {
	// The criteria as user's claim runs them: with four eyes, a loan user
	// may not have is no loan held from them (governance.go).
	rows, err := drivers.CriteriaQuery(e.driver.Dialect(), e.criteriaFor(task, user)).Query(ctx, q, engineio.CriteriaParams{TaskID: task.ID, Limit: 1})
	if err != nil {
		return "", false, fmt.Errorf("looking for loans other claimers of task %s hold: %w", task.Name, err)
	}
	defer rows.Close()
	var key string
	found := rows.Next()
	if found {
		if err := rows.Scan(&key); err != nil {
			return "", false, fmt.Errorf("looking for loans other claimers of task %s hold: %w", task.Name, err)
		}
	}
	if err := rows.Err(); err != nil {
		return "", false, fmt.Errorf("looking for loans other claimers of task %s hold: %w", task.Name, err)
	}
	return key, found, nil
}

// awaitRows waits at most bound for an eligible loan another claimer holds
// to be let go of: it queues on that row with a bounded locking read, which
// the database grants the moment the holder commits or rolls back, and
// rolls back at once. It never reports the request served: the caller
// claims again and reads its request then.
func (e *Engine) awaitRows(ctx context.Context, task *Task, user string, bound time.Duration) (bool, error) {
	start := time.Now()
	defer func() {
		// A row nobody holds (it became eligible after the claim's read, or
		// another strategy's holder is assigning it) is granted at once:
		// never claim again in a tight loop.
		if rest := minPoll - time.Since(start); rest > 0 {
			_ = pause.For(ctx, rest)
		}
	}()
	key, held, err := e.heldEligible(ctx, e.db, task, user)
	if err != nil || !held {
		return false, err // nothing held any more: claim again at once
	}
	if _, ok := e.driver.(drivers.RowWaiter); !ok {
		return false, pause.For(ctx, min(bound, minPoll))
	}
	w, err := e.openWaitConn(ctx)
	if err != nil {
		return false, fmt.Errorf("waiting for loan %s of task %s: %w", key, task.Name, err)
	}
	defer w.close(ctx)
	tx, err := w.conn.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("waiting for loan %s of task %s: %w", key, task.Name, err)
	}
	defer tx.Rollback() // a lock taken only to learn of the holder's end
	// Granted, gone, or the bound passed: either way the caller claims again.
	_, err = w.queue(ctx, tx, bound, func(lockCtx context.Context) error {
		return drivers.WaitForRow(lockCtx, e.driver, tx, e.criteriaFor(task, user), key, boundSeconds(bound))
	})
	if err != nil && ctx.Err() == nil {
		return false, fmt.Errorf("waiting for loan %s of task %s: %w", key, task.Name, err)
	}
	return false, err
}
