package dispatch

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/loanq/loanq/drivers"
)

// A round's allocation with its I/O: read what the plan needs, plan
// (allocate.go, pure), write the outcome (commit.go).

// assign serves the pending requests of the task, oldest first, from the
// loans the criteria query found, inside the caller's transaction (which
// holds the task lock or has passed the lease fence). It re-reads the pending
// requests so that requests that arrived while the query ran are served too.
//
// When the loans run out before a request is filled and the query was cut by
// its limit (not exhausted), that request and the later ones stay pending and
// the next round serves them with a fresh query: a request is never answered
// partial or empty while eligible loans may remain.
//
// When own's request is among those served, its answer is kept in own.served
// for the caller to return once tx commits.
func (e *Engine) assign(ctx context.Context, tx *sql.Tx, task *Task, found criteriaResult, run QueryRun, own *ownRequest) error {
	if own != nil {
		own.served = nil
	}
	// Read through the pool, not the transaction: on MySQL/MariaDB's
	// REPEATABLE READ the transaction's snapshot dates from its first read,
	// before the query ran, and would hide the requests that arrived since.
	// Only committed requests are seen either way, and RequestFinish updates
	// a request only while it is still pending.
	pending, err := e.pending(ctx, e.DB, task.ID)
	if err != nil {
		return err
	}
	if e.afterPending != nil {
		e.afterPending()
	}
	loans := found.loans
	var pool *roundPool
	if task.Prefetch > 0 {
		// Pool claims run beside this round: take the pool rows nobody is
		// claiming, and leave out the loans claims hold or assigned.
		if pool, err = e.takePool(ctx, tx, task, loans); err != nil {
			return err
		}
		loans = pool.loans
		if len(pool.held) > 0 {
			// A claim under way may still give its loans back: a request
			// this round cannot fill waits for the next round rather than
			// being told partial or empty.
			found.exhausted = false
		}
	}
	active := map[string]int{} // per-user active work, for max_active
	var work []assignment      // the work rows, inserted at the end
	batch := !e.sql().RequestFinishMany.Empty()
	var outcomes [][]any // batch: [request id, assigned, status] of each request served
	for _, r := range pending {
		allow := r.requested
		if task.MaxActive > 0 {
			n, seen := active[r.user]
			if !seen {
				if err := e.sql().ActiveCountForUser.QueryRow(ctx, tx, drivers.TaskUserParams{TaskID: task.ID, User: r.user}).Scan(&n); err != nil {
					return fmt.Errorf("counting active work of %s: %w", r.user, err)
				}
			}
			active[r.user] = n
			allow = max(0, min(allow, task.MaxActive-n))
		}
		take := min(allow, len(loans))
		if take < allow && !found.exhausted {
			break // more loans may exist: serve this one fully in the next round
		}
		status := StatusAssigned
		switch {
		case take == 0:
			status = StatusEmpty
		case take < r.requested:
			status = StatusPartial
		}
		// Finish first, then insert the work rows: the finish updates the
		// request only while it is pending, so a request its requester
		// cancelled after the read above is skipped here, its loans kept
		// for the next request (docs/algorithm.md, "Cancelling and
		// attaching"). The row lock the finish takes makes a concurrent
		// cancel wait for this commit and then find the request served.
		// Where the dialect finishes a round's requests in one statement,
		// the outcome is only noted here (see finishRequests).
		if batch {
			outcomes = append(outcomes, []any{r.id, take, status})
		} else {
			res, err := e.sql().RequestFinish.Exec(ctx, tx, drivers.RequestFinishParams{Assigned: take, Status: status, ID: r.id})
			if err != nil {
				return fmt.Errorf("finishing request %d: %w", r.id, err)
			}
			if n, _ := res.RowsAffected(); n != 1 {
				if e.cancelled(ctx, r.id) {
					continue
				}
				return fmt.Errorf("request %d was finished by someone else while this caller held the task lock", r.id)
			}
		}
		if own != nil && r.id == own.id {
			own.served = &Request{ID: r.id, TaskID: task.ID, Task: task.Name, User: r.user, Requested: r.requested,
				Assigned: take, Status: status, Loans: drivers.Keys(task.KeyKind, loans[:take]), CreatedAt: r.createdAt}
		}
		for _, loan := range loans[:take] {
			work = append(work, assignment{loan: loan, request: r.id, user: r.user})
		}
		loans = loans[take:]
		active[r.user] += take
		run.RequestsServed++
		run.LoansAssigned += take
	}
	if err := e.finishRequests(ctx, tx, task.ID, outcomes); err != nil {
		return err
	}
	if err := e.insertWork(ctx, tx, task, work); err != nil {
		return err
	}
	pooled := 0
	if task.Prefetch > 0 {
		if pooled, err = e.refillPool(ctx, tx, task, pool, loans); err != nil {
			return err
		}
	}
	if _, err := e.sql().QueryRunInsert.Exec(ctx, tx, drivers.QueryRunParams{TaskID: task.ID, Strategy: run.Strategy,
		Holder: truncate(run.Holder, 100), StartedAgoMS: time.Since(run.started).Milliseconds(), DurationMS: run.DurationMS,
		RowsFound: run.RowsFound, RequestsServed: run.RequestsServed, LoansAssigned: run.LoansAssigned, Pooled: pooled}); err != nil {
		return fmt.Errorf("logging the criteria-query run: %w", err)
	}
	return nil
}
