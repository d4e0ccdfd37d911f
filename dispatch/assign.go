package dispatch

import (
	"context"
	"database/sql"
	"fmt"
	"github.com/loanq/loanq/loankey"
	"slices"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
)

// A round's allocation with its I/O: read what the plan needs, plan
// (allocate.go, pure), write the outcome (commit.go).

// assign serves the pending requests of the task, oldest first, from the
// loans the criteria query found, inside the caller's transaction (which
// holds the task lock or has passed the lease fence): it reads what the
// allocation plan needs, plans (planAllocation), and writes the plan. It
// re-reads the pending requests so that requests that arrived while the
// query ran are served too.
//
// When own's request is among those served, its answer is kept in own.served
// for the caller to return once tx commits.
func (e *Engine) assign(ctx context.Context, tx *sql.Tx, task *Task, found criteriaResult, run QueryRun, own *ownRequest) error {
	if own != nil {
		own.served = nil
	}
	// Where the round's transaction sees every commit at each statement
	// (READ COMMITTED: roundTxOptions), read in it: no second connection
	// while the round holds the lock (a command-line call would open one
	// for this read; a bounded pool may have none free). Else through the
	// pool: a snapshot taken before the query ran would hide the requests
	// that arrived since. Only committed requests are seen either way, and
	// RequestFinish updates a request only while it is still pending.
	var through drivers.Querier = e.db
	if e.caps().RoundReads == drivers.RoundReadsTransaction {
		through = tx
	}
	pending, err := e.pending(ctx, through, task.ID)
	if err != nil {
		return err
	}
	hook(e.hooks.afterPending)
	// Four eyes (governance.go): candidates a waiting user worked in a
	// named task go to the others; when that leaves a request short and the
	// criteria may hold more, fetch more before planning.
	if found, err = e.fourEyesTopUp(ctx, tx, task, pending, found, &run); err != nil {
		return err
	}
	in := allocation{pending: pending, loans: found.loans, exhausted: found.exhausted, maxActive: task.MaxActive}
	var pool *roundPool
	if task.Prefetch > 0 {
		// Pool claims run beside this round: take the pool rows nobody is
		// claiming, and leave out the loans claims hold or assigned.
		if pool, err = e.takePool(ctx, tx, task, in.loans); err != nil {
			return err
		}
		in.loans = pool.loans
		if len(pool.held) > 0 {
			// A claim under way may still give its loans back: a request
			// this round cannot fill waits for the next round rather than
			// being told partial or empty.
			in.exhausted = false
		}
	}
	// What the query found may have been assigned, worked and disposed of
	// by callers that do not take the task lock while it ran (recheck.go):
	// the round hands out only what matches and is eligible now.
	var unchecked []string
	var dropped bool
	need := requestedTotal(pending)
	if task.FourEyes {
		need = len(in.loans) // a request may pass over candidates: check them all
	}
	if in.loans, unchecked, dropped, err = e.recheckCandidates(ctx, tx, task, in.loans, need); err != nil {
		return err
	}
	if dropped {
		// The snapshot is out of date: a request this round cannot fill
		// waits for a round with a fresh query rather than being told
		// partial or empty.
		in.exhausted = false
	}
	if task.MaxActive > 0 {
		// In the round's transaction, before the plan, which needs the
		// count of every pending user it may reach.
		if in.active, err = e.activeCounts(ctx, tx, task); err != nil {
			return err
		}
	}
	if in.blocked, err = e.fourEyesBlocked(ctx, tx, task, in.loans); err != nil {
		return err
	}
	if in.refused, err = e.notAllowedPending(ctx, tx, task); err != nil {
		return err
	}
	plan, err := e.finishServed(ctx, tx, task, in)
	if err != nil {
		return err
	}
	if err := e.insertWork(ctx, tx, task, plan.work); err != nil {
		return err
	}
	pooled := 0
	if task.Prefetch > 0 {
		// The unchecked tail follows what the plan left, in criteria
		// order; a pool claim rechecks each candidate it takes.
		if pooled, err = e.refillPool(ctx, tx, task, pool, slices.Concat(plan.left, unchecked)); err != nil {
			return err
		}
	}
	run.RequestsServed, run.LoansAssigned = len(plan.served), len(plan.work)
	if err := e.logRun(ctx, tx, task.ID, run, pooled); err != nil {
		return fmt.Errorf("logging the criteria-query run: %w", err)
	}
	for _, o := range plan.served {
		if own != nil && o.request.id == own.id {
			r := o.request
			own.served = &Request{ID: r.id, TaskID: task.ID, Task: task.Name, User: r.user, Requested: r.requested,
				Assigned: len(o.loans), Status: o.status, Loans: loankey.List(task.KeyKind, o.loans), CreatedAt: r.createdAt}
		}
	}
	return nil
}

// activeCounts reads the active work of each user with a pending request,
// for the per-user cap.
func (e *Engine) activeCounts(ctx context.Context, tx *sql.Tx, task *Task) (map[string]int, error) {
	// One read for all of them, not one per user: the round holds the
	// task's lock meanwhile.
	rows, err := e.sql().ActiveCountsPending.All(ctx, tx, engineio.TaskParams{TaskID: task.ID})
	if err != nil {
		return nil, fmt.Errorf("counting the active work of task %s's waiting users: %w", task.Name, err)
	}
	active := make(map[string]int, len(rows))
	for _, r := range rows {
		active[r.User] = int(r.N)
	}
	return active, nil
}

// finishServed plans the round and sets the outcome of every request the
// plan serves, only while each is still pending; it returns the plan that
// stands.
//
// The requests are finished before the work rows are inserted: the finish
// updates a request only while it is pending, so a request its requester
// cancelled after the round's read is skipped, its loans kept for the next
// request (docs/algorithm.md, "Cancelling and attaching"). The row lock the
// finish takes makes a concurrent cancel wait for this commit and then find
// the request served. Where the dialect finishes a round's requests in one
// statement (finishRequests), a cancelled request rolls the round back
// instead (errRoundRaced).
func (e *Engine) finishServed(ctx context.Context, tx *sql.Tx, task *Task, in allocation) (allocationPlan, error) {
	plan := planAllocation(in)
	batch := e.caps().RoundFinish == drivers.FinishMany
	if batch {
		return plan, e.finishRequests(ctx, tx, task.ID, plan.served)
	}
	for i := 0; i < len(plan.served); i++ {
		r := plan.served[i].request
		ok, err := e.finishRequest(ctx, tx, r.id, len(plan.served[i].loans), plan.served[i].status)
		if err != nil {
			return plan, fmt.Errorf("request %d: %w", r.id, err)
		}
		if ok {
			continue
		}
		if !e.cancelled(ctx, r.id) {
			return plan, fmt.Errorf("request %d was finished by someone else while this caller held the task lock", r.id)
		}
		// Plan again without it: the answers before it stand (they do not
		// depend on later requests), so the finish goes on from the same
		// place, with its loans now going to the next request.
		if in.skip == nil {
			in.skip = map[int64]bool{}
		}
		in.skip[r.id] = true
		plan = planAllocation(in)
		i--
	}
	return plan, nil
}

// assignCommit ends a round that holds the task lock or has passed the lease
// fence: it assigns, commits, and keeps own's answer if this commit served
// it.
func (e *Engine) assignCommit(ctx context.Context, tx *sql.Tx, task *Task, found criteriaResult, run QueryRun, own *ownRequest) error {
	if err := e.assign(ctx, tx, task, found, run, own); err != nil {
		return err
	}
	if err := e.commit(tx, "assignments of task "+task.Name); err != nil {
		return err
	}
	own.committed()
	return nil
}

// fourEyesTopUp runs the criteria query again with a larger limit, in the
// round's transaction, while four eyes leaves a pending request short of
// candidates the query did not exhaust (fourEyesShort): a round's one
// query serves every requester, and the loans one of them may not have
// would otherwise fill its limit round after round.
func (e *Engine) fourEyesTopUp(ctx context.Context, tx *sql.Tx, task *Task, pending []pendingRequest, found criteriaResult, run *QueryRun) (criteriaResult, error) {
	if !task.FourEyes {
		return found, nil
	}
	for !found.exhausted {
		blocked, err := e.fourEyesBlocked(ctx, tx, task, found.loans)
		if err != nil {
			return found, err
		}
		if !fourEyesShort(pending, found.loans, blocked) {
			return found, nil
		}
		more, _, err := e.runCriteria(ctx, tx, task, max(2*len(found.loans), len(found.loans)+requestedTotal(pending)))
		if err != nil {
			return found, err
		}
		found = more
		run.RowsFound = len(found.loans)
	}
	return found, nil
}
