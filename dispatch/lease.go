package dispatch

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/internal/proc"
	"github.com/loanq/loanq/problem"
)

// A serving round under the task's lease (docs/algorithm.md, "The lease
// strategy"): the lease and its heartbeat instead of a transaction held
// while the criteria query runs, and the fence at commit.

// serveRoundLease is one round under the task's lease (docs/algorithm.md, "The
// lease strategy"). The lease is taken and committed in a short transaction,
// so no transaction stays open while the criteria query runs; a heartbeat
// renews it meanwhile, so a query may outlast the TTL. The assignment
// transaction then starts with the fencing statement, which succeeds only
// while this caller still holds an unexpired lease with its token. A holder
// that stalled past its lease (its heartbeat stalled too) and was taken over
// therefore cannot commit assignments.
func (e *Engine) serveRoundLease(ctx context.Context, task *Task, own *ownRequest) error {
	return e.serveRoundLeaseMode(ctx, task, own, false)
}

// serveRoundLeaseMode is serveRoundLease; refill runs the criteria query
// even with no request pending (Refill).
func (e *Engine) serveRoundLeaseMode(ctx context.Context, task *Task, own *ownRequest, refill bool) error {
	token, err := e.acquireLease(ctx, task)
	if err != nil {
		return err
	}
	stopHeartbeat := e.heartbeat(ctx, task, token)
	defer stopHeartbeat()
	released := false
	defer func() {
		if !released { // give the lease back on any failure; expiry covers a crash
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_, _ = e.sql().LeaseRelease.Exec(rctx, e.db, engineio.LeaseFenceParams{TaskID: task.ID, Owner: e.Holder, Token: token})
		}
	}()

	load, err := e.load(ctx, e.db, task)
	if err != nil || (load.requests == 0 && !refill) {
		return err
	}
	// Abandoned work first, while this caller holds the lease (its own
	// statement: no transaction stays open in the lease strategy).
	if err := e.expire(ctx, e.db, task); err != nil {
		return err
	}
	found, run, err := e.runCriteria(ctx, e.db, task, criteriaLimit(task, load))
	if err != nil {
		return err
	}
	run.Strategy = string(drivers.Lease)
	// The fence decides from here: a renewal racing with it changes nothing.
	stopHeartbeat()

	tx, err := e.db.BeginTx(ctx, e.roundTxOptions(task))
	if err != nil {
		return fmt.Errorf("beginning the assignment transaction: %w", err)
	}
	defer tx.Rollback()
	res, err := e.sql().LeaseFenceRelease.Exec(ctx, tx, engineio.LeaseFenceParams{TaskID: task.ID, Owner: e.Holder, Token: token})
	if err != nil {
		return fmt.Errorf("fencing check on the lease of task %s: %w", task.Name, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		released = true // it is no longer ours to release
		return &problem.Error{Kind: problem.Busy, Msg: fmt.Sprintf("the lease on task %s expired before its holder could commit (lease-ttl %s); nothing was assigned by it", task.Name, task.LeaseTTL)}
	}
	if err := e.assignCommit(ctx, tx, task, found, run, own); err != nil {
		return err
	}
	released = true
	return nil
}

func (e *Engine) acquireLease(ctx context.Context, task *Task) (int64, error) {
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("beginning the lease transaction: %w", err)
	}
	defer tx.Rollback()
	res, err := e.sql().LeaseAcquire.Exec(ctx, tx, engineio.LeaseTakeParams{Owner: e.Holder, TTLMS: task.LeaseTTL.Milliseconds(), TaskID: task.ID})
	if err != nil {
		if e.driver.IsLockBusy(err) {
			return 0, errBusy
		}
		return 0, fmt.Errorf("taking the lease of task %s: %w", task.Name, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		// Held. A holder of this host whose process is gone (killed,
		// crashed) will never renew nor release: take its lease over now
		// instead of after its TTL. The take-over names the dead owner, so
		// of several callers seeing it at once only one gets the lease.
		holder, err := e.sql().LeaseHolder.One(ctx, tx, engineio.TaskParams{TaskID: task.ID})
		owner := holder.Owner
		if err != nil || !proc.DeadOnThisHost(owner) {
			return 0, errBusy
		}
		res, err := e.sql().LeaseTakeOver.Exec(ctx, tx, engineio.LeaseTakeOverParams{Owner: e.Holder, TTLMS: task.LeaseTTL.Milliseconds(), TaskID: task.ID, DeadOwner: owner})
		if err != nil {
			return 0, fmt.Errorf("taking over the lease of task %s from %s, whose process is gone: %w", task.Name, owner, err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return 0, errBusy
		}
	}
	token, err := e.sql().LeaseToken.One(ctx, tx, engineio.LeaseOwnerParams{TaskID: task.ID, Owner: e.Holder})
	if err != nil {
		return 0, fmt.Errorf("reading the lease token of task %s: %w", task.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("committing the lease of task %s: %w", task.Name, err)
	}
	return token.Token, nil
}

// heartbeat renews the lease every TTL/3 until the returned stop is called
// (idempotent; it waits for the renewing goroutine). A renewal that finds the
// lease no longer this holder's stops renewing: the fence at commit refuses.
func (e *Engine) heartbeat(ctx context.Context, task *Task, token int64) (stop func()) {
	hctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(max(task.LeaseTTL/3, 100*time.Millisecond))
		defer tick.Stop()
		for {
			select {
			case <-hctx.Done():
				return
			case <-tick.C:
			}
			res, err := e.sql().LeaseRenew.Exec(hctx, e.db, engineio.LeaseRenewParams{TTLMS: task.LeaseTTL.Milliseconds(), TaskID: task.ID, Owner: e.Holder, Token: token})
			if err != nil {
				continue // try again at the next tick; the fence decides
			}
			if n, err := res.RowsAffected(); err == nil && n == 0 {
				return // lost (expired and taken, or released)
			}
			hook(e.hooks.renewed)
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			wg.Wait()
		})
	}
}
