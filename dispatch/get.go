package dispatch

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/pause"
	"github.com/loanq/loanq/internal/proc"
	"github.com/loanq/loanq/problem"
)

// Request statuses, as `work get` and `work status` print them (docs/json.md).
const (
	StatusPending  = "pending"
	StatusAssigned = "assigned"
	StatusPartial  = "partial"
	StatusEmpty    = "empty"
	// StatusCancelled: see cancel.go.
)

// Request is a logged work request and, once served, its loans.
type Request struct {
	ID        int64         `json:"request_id"`
	TaskID    int64         `json:"-"`
	Task      string        `json:"task"`
	User      string        `json:"user"`
	Requested int           `json:"requested"`
	Assigned  int           `json:"assigned"`
	Status    string        `json:"status"`
	Loans     []drivers.Key `json:"loans"`
	CreatedAt time.Time     `json:"created_at"`
	// Attached is set when `work get` found the user's pending request of
	// the task and attached to it instead of logging another.
	Attached bool `json:"-"`
	// Notice, when set, is said on stderr: why a cancel did not cancel, or
	// that the per-user cap cut the request short (capnotice.go).
	Notice string `json:"-"`
	// CappedAt is the task's per-user cap (--max-active) when that cap is
	// why the request got fewer loans than it asked for; otherwise absent.
	CappedAt int `json:"capped_at,omitempty"`
}

// GetOptions tune one `work get` or `work status --wait`.
type GetOptions struct {
	NoWait  bool             // answer busy at once instead of rechecking
	Timeout time.Duration    // give up rechecking after this long (0: never)
	Lock    drivers.Strategy // "" for the task's own strategy
	Backoff []time.Duration  // recheck delays; the last one repeats
	// OnWait, if set, is told before each pause that the request is still
	// pending and when the next look is (the command line's status line).
	OnWait func(req *Request, next time.Duration)
	// OnAttach, if set, is told that `work get` attached to the user's
	// pending request id instead of logging another.
	OnAttach func(id int64)
	// CancelAs, when set, is the requester: if ctx is cancelled (a signal)
	// while the request is pending, it is cancelled as that user's.
	CancelAs string
	// OwnRequest: never attach to the user's pending request. A caller
	// that hands each loan it gets to a worker (`work run`) must not share
	// its answer with another process of the same user: it serves (or
	// waits for) that pending request first, then logs its own.
	OwnRequest bool
}

// Get is `work get` (docs/algorithm.md, "Step by step"). On busy or timeout it
// returns the request, still pending, together with a problem.Busy error
// naming its id.
func (e *Engine) Get(ctx context.Context, taskName, user string, count int, opt GetOptions) (*Request, error) {
	if count < 1 || count > MaxCount {
		return nil, problem.Usagef("invalid --count %d: ask for between 1 and %d loans", count, MaxCount)
	}
	if err := validateUser(user); err != nil {
		return nil, err
	}
	task, err := e.Task(ctx, taskName)
	if err != nil {
		return nil, err
	}
	strategy, err := e.strategyFor(task, opt.Lock)
	if err != nil {
		return nil, err
	}
	// A task with a candidate pool serves from it when it can (pool.go):
	// one short transaction, no query. Otherwise the usual way below.
	if task.Prefetch > 0 {
		if req, err := e.servePool(ctx, task, user, count); err != nil || req != nil {
			return e.noteCap(ctx, task, req), e.claimInterrupted(ctx, task, err, "claiming from the pool of")
		}
		if strategy == drivers.Rows {
			defer e.refillIfLow(context.WithoutCancel(ctx), task)
		}
	}
	// rows: the claim logs the request itself (rows.go, serveRowsFresh),
	// one commit per get. Unless the request must wait: then nothing was
	// written, and it is logged on its own below.
	if strategy == drivers.Rows {
		req, err := e.serveRowsFresh(ctx, task, user, count)
		if err != nil && ctx.Err() == nil && problem.KindOf(err) == problem.Failure {
			// No request id to recheck: nothing of this call was written.
			return nil, &problem.Error{Kind: problem.Failure, Err: fmt.Errorf("claiming loans of task %s: %w", task.Name, err),
				Hint: fmt.Sprintf("the claim rolled back: nothing was assigned and no request is left pending; once the database answers again, `loanq work get %s` asks again", task.Name)}
		}
		if err != nil || req != nil {
			return e.noteCap(ctx, task, req), e.claimInterrupted(ctx, task, err, "claiming loans of")
		}
	}
	// Step 1: the request is committed on its own, before any lock is tried,
	// so that whoever holds the lock can see and serve it.
	// A user has at most one pending request per task: asking again
	// attaches to it (cancel.go).
	id, attached, err := e.logRequest(ctx, task.ID, user, count)
	for err == nil && attached && opt.OwnRequest {
		// Someone else's answer: get it served, then log this caller's.
		wait := opt
		wait.NoWait, wait.CancelAs, wait.OnWait = false, "", nil
		if _, err = e.serveOrCancel(ctx, task, strategy, &ownRequest{id: id, user: user}, wait); err != nil {
			break
		}
		id, attached, err = e.logRequest(ctx, task.ID, user, count)
	}
	if err != nil {
		return nil, err
	}
	if attached && opt.OnAttach != nil {
		opt.OnAttach(id)
	}
	own := &ownRequest{id: id, user: user, requested: count}
	if attached {
		own.requested = 0 // the first request's count stands: unknown here
	}
	req, err := e.serveOrCancel(ctx, task, strategy, own, opt)
	if req != nil {
		req.Attached = attached
	}
	return e.noteCap(ctx, task, req), err
}

// claimInterrupted says what a signal during a claim that logs its own
// request (a pool claim, a fresh rows claim) did: the claim's transaction
// rolled back, and no request was left behind (exit 130/143).
func (e *Engine) claimInterrupted(ctx context.Context, task *Task, err error, doing string) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	return &problem.Error{Kind: problem.Interrupted, Err: context.Cause(ctx),
		Msg: fmt.Sprintf("interrupted while %s task %s: the claim rolled back, nothing was assigned and no request is left pending", doing, task.Name)}
}

// ownRequest is the request a call of Get or Status serves or waits for, as
// far as the call knows it, and its answer once a round this call ran has
// served it and committed: then the call returns that answer without reading
// the request back.
type ownRequest struct {
	id        int64
	user      string
	requested int // 0: not known (attached to another call's request)

	answer *Request // set once this call's commit served the request
	// served is the answer assign built, in a transaction not yet committed.
	served *Request
}

// committed records that the transaction that served (or did not serve)
// the request committed.
func (o *ownRequest) committed() {
	if o != nil && o.served != nil {
		o.answer, o.served = o.served, nil
	}
}

// serveOrCancel is serveUntilDone, then, when a signal stopped it, the
// cancellation of the request (interrupted).
func (e *Engine) serveOrCancel(ctx context.Context, task *Task, strategy drivers.Strategy, own *ownRequest, opt GetOptions) (*Request, error) {
	req, err := e.serveUntilDone(ctx, task, strategy, own, opt)
	if err != nil && ctx.Err() != nil {
		return e.interrupted(ctx, task, own.id, opt, err)
	}
	return req, err
}

// Status is `work status` (docs/algorithm.md, step 7): it reads the request
// and, while it is pending and the task lock is free, serves the pending
// requests itself.
func (e *Engine) Status(ctx context.Context, id int64, wait bool, opt GetOptions) (*Request, error) {
	if id <= 0 {
		return nil, problem.Usagef("invalid request id %d: give the request_id that `loanq work get` printed", id)
	}
	req, err := e.Request(ctx, id)
	if err != nil {
		return nil, err
	}
	if req.Status != StatusPending {
		return req, nil
	}
	task, err := e.taskByID(ctx, req.TaskID)
	if err != nil {
		return nil, err
	}
	strategy, err := e.strategyFor(task, opt.Lock)
	if err != nil {
		return nil, err
	}
	opt.NoWait = !wait
	return e.serveOrCancel(ctx, task, strategy, &ownRequest{id: id, user: req.User, requested: req.Requested}, opt)
}

func (e *Engine) strategyFor(t *Task, override drivers.Strategy) (drivers.Strategy, error) {
	if err := e.runnable(t); err != nil {
		return "", err
	}
	s := t.Lock
	if override != "" {
		s = override
	}
	if !drivers.Supports(e.Driver, s) {
		return "", problem.Usagef("lock strategy %q is not available on %s: use one of %s", s, e.Driver.Name(), strategyList(e.Driver))
	}
	return s, nil
}

// serveUntilDone tries to serve, then waits to be woken (docs/algorithm.md,
// "Waiting") and tries again, until the request is no longer pending, the
// caller gave up (NoWait), or the timeout passed. The backoff steps are the
// longest a wait lasts before the caller looks again on its own.
func (e *Engine) serveUntilDone(ctx context.Context, task *Task, strategy drivers.Strategy, own *ownRequest, opt GetOptions) (*Request, error) {
	id := own.id
	backoff := opt.Backoff
	if len(backoff) == 0 {
		backoff = DefaultBackoff
	}
	var deadline time.Time
	if opt.Timeout > 0 {
		deadline = time.Now().Add(opt.Timeout)
	}
	served := false // the last wait saw the request served: just read it
	for attempt := 0; ; attempt++ {
		var err error
		switch {
		case served:
		case strategy == drivers.Rows:
			err = e.serveRows(ctx, task, own)
		default:
			err = e.serve(ctx, task, strategy, deadline, own)
		}
		if err != nil && ctx.Err() != nil {
			// A signal while this caller served: its transaction rolled
			// back, nothing was assigned, nothing failed.
			return nil, &problem.Error{Kind: problem.Interrupted, Err: context.Cause(ctx),
				Msg: fmt.Sprintf("interrupted while serving task %s: the assignment transaction rolled back, nothing was assigned by this call, and the task's pending requests stay pending for their callers", task.Name)}
		}
		if err != nil && problem.KindOf(err) != problem.Busy {
			// The request is committed and stays pending: say how to get it
			// served rather than asking again (a new request would be served too).
			return nil, &problem.Error{Kind: problem.KindOf(err), Err: fmt.Errorf("serving request %d: %w", id, err),
				Hint: fmt.Sprintf("once the database answers again, `loanq work status %d --wait` serves this request", id)}
		}
		if own.answer != nil {
			return own.answer, nil // served by this call: nothing to read back
		}
		req, err := e.Request(ctx, id)
		if err != nil {
			return nil, err
		}
		if req.Status != StatusPending {
			return req, nil
		}
		wait := backoff[min(attempt, len(backoff)-1)]
		if !deadline.IsZero() {
			wait = min(wait, time.Until(deadline))
		}
		if opt.NoWait || wait <= 0 {
			why := "another caller holds the task lock"
			if strategy == drivers.Rows {
				why = "other callers hold eligible loans (rows strategy): it is not served until they let go of them"
			}
			return req, &problem.Error{Kind: problem.Busy,
				Msg:  fmt.Sprintf("request %d for task %s is still pending: %s", id, task.Name, why),
				Hint: fmt.Sprintf("check again with `loanq work status %d --wait`", id)}
		}
		if opt.OnWait != nil {
			opt.OnWait(req, wait)
		}
		// Wait for the holder's commit (or for the lock to become free), at
		// most `wait`; then serve and look again. The last round after the
		// timeout passes takes no lock wait (the deadline bounds it).
		if served, err = e.await(ctx, task, strategy, own, wait); err != nil {
			if ctx.Err() != nil {
				return req, ctx.Err()
			}
			// The wait failed (a connection cut, a server restart): sleep a
			// little instead, then serve again; a failure that lasts is
			// reported by serve, with the request id to recheck.
			served = false
			if err := pause.For(ctx, min(wait, time.Second)); err != nil {
				return req, err
			}
		}
	}
}

// serve takes the task lock and serves the pending requests, then looks again
// for requests that committed while it held the lock and serves those in
// another round. It returns a Busy error when someone else holds the lock:
// that holder will do the same look after its own commit, so nothing is left.
//
// lockDeadline bounds how long the wait strategy queues for the row lock (the
// caller's --timeout); zero waits as long as the database lets it.
func (e *Engine) serve(ctx context.Context, task *Task, strategy drivers.Strategy, lockDeadline time.Time, own *ownRequest) error {
	for round := 0; round < max(e.MaxRounds, 1); round++ {
		var err error
		if strategy == drivers.Lease {
			err = e.serveRoundLease(ctx, task, own)
		} else {
			err = e.serveRoundRowLock(ctx, task, strategy, lockDeadline, own)
		}
		if errors.Is(err, errRoundRaced) {
			continue // rolled back: serve the requests still pending afresh
		}
		if drivers.IsDeadlock(e.Driver, err) {
			// Chosen as a deadlock victim (InnoDB, with pool claims or
			// requests being logged beside the round): rolled back whole,
			// so the next round serves the same requests afresh.
			continue
		}
		if err != nil {
			return err
		}
		pending, err := e.pending(ctx, e.DB, task.ID)
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
	tx, err := e.DB.BeginTx(ctx, e.roundTxOptions(task))
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
	var locked int64
	err = e.sql().Lock(strategy).QueryRow(lockCtx, tx, drivers.TaskParams{TaskID: task.ID}).Scan(&locked)
	switch {
	case errors.Is(err, sql.ErrNoRows): // SKIP LOCKED skipped the row
		return errBusy
	case err != nil && e.Driver.IsLockBusy(err): // NOWAIT, or the wait timed out
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
	if err := e.assign(ctx, tx, task, found, run, own); err != nil {
		return err
	}
	if e.beforeCommit != nil {
		e.beforeCommit()
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing assignments of task %s: %w", task.Name, err)
	}
	own.committed()
	return nil
}

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
			_, _ = e.sql().LeaseRelease.Exec(rctx, e.DB, drivers.LeaseFenceParams{TaskID: task.ID, Owner: e.Holder, Token: token})
		}
	}()

	load, err := e.load(ctx, e.DB, task)
	if err != nil || (load.requests == 0 && !refill) {
		return err
	}
	// Abandoned work first, while this caller holds the lease (its own
	// statement: no transaction stays open in the lease strategy).
	if err := e.expire(ctx, e.DB, task); err != nil {
		return err
	}
	found, run, err := e.runCriteria(ctx, e.DB, task, criteriaLimit(task, load))
	if err != nil {
		return err
	}
	run.Strategy = string(drivers.Lease)
	// The fence decides from here: a renewal racing with it changes nothing.
	stopHeartbeat()

	tx, err := e.DB.BeginTx(ctx, e.roundTxOptions(task))
	if err != nil {
		return fmt.Errorf("beginning the assignment transaction: %w", err)
	}
	defer tx.Rollback()
	res, err := e.sql().LeaseFenceRelease.Exec(ctx, tx, drivers.LeaseFenceParams{TaskID: task.ID, Owner: e.Holder, Token: token})
	if err != nil {
		return fmt.Errorf("fencing check on the lease of task %s: %w", task.Name, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		released = true // it is no longer ours to release
		return &problem.Error{Kind: problem.Busy, Msg: fmt.Sprintf("the lease on task %s expired before its holder could commit (lease-ttl %s); nothing was assigned by it", task.Name, task.LeaseTTL)}
	}
	if err := e.assign(ctx, tx, task, found, run, own); err != nil {
		return err
	}
	if e.beforeCommit != nil {
		e.beforeCommit()
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing assignments of task %s: %w", task.Name, err)
	}
	own.committed()
	released = true
	return nil
}

func (e *Engine) acquireLease(ctx context.Context, task *Task) (int64, error) {
	tx, err := e.DB.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("beginning the lease transaction: %w", err)
	}
	defer tx.Rollback()
	res, err := e.sql().LeaseAcquire.Exec(ctx, tx, drivers.LeaseTakeParams{Owner: e.Holder, TTLMS: task.LeaseTTL.Milliseconds(), TaskID: task.ID})
	if err != nil {
		if e.Driver.IsLockBusy(err) {
			return 0, errBusy
		}
		return 0, fmt.Errorf("taking the lease of task %s: %w", task.Name, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		// Held. A holder of this host whose process is gone (killed,
		// crashed) will never renew nor release: take its lease over now
		// instead of after its TTL. The take-over names the dead owner, so
		// of several callers seeing it at once only one gets the lease.
		var owner string
		err := e.sql().LeaseHolder.QueryRow(ctx, tx, drivers.TaskParams{TaskID: task.ID}).Scan(&owner)
		if err != nil || !proc.DeadOnThisHost(owner) {
			return 0, errBusy
		}
		res, err := e.sql().LeaseTakeOver.Exec(ctx, tx, drivers.LeaseTakeOverParams{Owner: e.Holder, TTLMS: task.LeaseTTL.Milliseconds(), TaskID: task.ID, DeadOwner: owner})
		if err != nil {
			return 0, fmt.Errorf("taking over the lease of task %s from %s, whose process is gone: %w", task.Name, owner, err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return 0, errBusy
		}
	}
	var token int64
	if err := e.sql().LeaseToken.QueryRow(ctx, tx, drivers.LeaseOwnerParams{TaskID: task.ID, Owner: e.Holder}).Scan(&token); err != nil {
		return 0, fmt.Errorf("reading the lease token of task %s: %w", task.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("committing the lease of task %s: %w", task.Name, err)
	}
	return token, nil
}

type pendingRequest struct {
	id        int64
	user      string
	requested int
	createdAt time.Time
}

func (e *Engine) pending(ctx context.Context, q drivers.Querier, taskID int64) ([]pendingRequest, error) {
	rows, err := e.sql().RequestsPending.Query(ctx, q, drivers.TaskParams{TaskID: taskID})
	if err != nil {
		return nil, fmt.Errorf("reading pending requests: %w", err)
	}
	defer rows.Close()
	var out []pendingRequest
	for rows.Next() {
		var p pendingRequest
		var created nullTime
		if err := rows.Scan(&p.id, &p.user, &p.requested, &created); err != nil {
			return nil, fmt.Errorf("reading pending requests: %w", err)
		}
		p.createdAt = created.T
		out = append(out, p)
	}
	return out, rows.Err()
}

// lateArrivalRoom is how many loans beyond the pending requests' need the
// criteria query fetches, at least: room for requests that arrive while the
// query runs, which the same run serves (docs/algorithm.md, step 5).
const lateArrivalRoom = 10

// maxRoom caps the extra rows a burst estimate may add to one query.
const maxRoom = 2 * MaxCount

// arrivalWindow is how far back the arrival rate is measured.
const arrivalWindow = 10 * time.Second

// taskLoad is what a serving round reads of its task in one statement
// (TaskLoad), right after taking the lock.
type taskLoad struct {
	requests int64         // pending requests
	need     int64         // loans they ask for
	recent   int64         // loans requested in the last arrivalWindow
	runs     int64         // of the ten latest criteria-query runs: how many,
	meanMS   int64         // their mean duration,
	maxMS    sql.NullInt64 // and the longest (NULL: none yet)
}

func (e *Engine) load(ctx context.Context, q drivers.Querier, task *Task) (taskLoad, error) {
	var l taskLoad
	err := e.sql().TaskLoad.QueryRow(ctx, q, drivers.TaskWindowParams{TaskID: task.ID, WindowMS: arrivalWindow.Milliseconds()}).
		Scan(&l.requests, &l.need, &l.recent, &l.runs, &l.meanMS, &l.maxMS)
	if err != nil {
		return l, fmt.Errorf("reading the pending requests of task %s: %w", task.Name, err)
	}
	return l, nil
}

// criteriaLimit is the criteria query's row limit for the pending need: the
// need, plus room for the requests expected to arrive while the query runs
// (arrivalRoom), at least the need again and lateArrivalRoom. Rows left over
// are simply not assigned; a late request the room cannot fill waits for the
// next round.
func criteriaLimit(task *Task, l taskLoad) int {
	need := int(l.need)
	// A task with a candidate pool fetches its pool's size besides: what
	// the round does not assign refills the pool.
	return need + min(maxRoom, max(need, lateArrivalRoom, arrivalRoom(task, l))) + max(task.Prefetch, 0)
}

// arrivalRoom estimates the loans requested while one criteria query runs:
// the loans requested per second over the last window, times the task's
// recent query time (plus its --query-delay, which the log's durations
// include; the delay alone before any run is logged), doubled for a burst.
func arrivalRoom(task *Task, l taskLoad) int {
	if l.recent == 0 {
		return 0
	}
	queryTime := task.QueryDelay
	if l.runs > 0 {
		queryTime = time.Duration(l.meanMS) * time.Millisecond
	}
	perSecond := float64(l.recent) / arrivalWindow.Seconds()
	return int(2 * perSecond * max(queryTime, 100*time.Millisecond).Seconds())
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
	rows, err := drivers.CriteriaQuery(e.Driver.Dialect(), task.criteria()).Query(ctx, q, drivers.CriteriaParams{TaskID: task.ID, Limit: limit})
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
	if e.afterQuery != nil {
		e.afterQuery()
	}
	run.RowsFound = len(res.loans)
	return res, run, nil
}

type criteriaResult struct {
	loans []string
	// exhausted: the query returned fewer rows than asked, so there are no
	// more eligible loans; requests it cannot fill are final (partial/empty).
	exhausted bool
}

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
	batch := e.caps().RoundFinish == drivers.FinishMany
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

// errRoundRaced: a request the round meant to serve was no longer pending when
// its batched finish ran (its requester cancelled it between the round's read
// and the finish). The round is rolled back whole and run again: its loans
// were shared out counting that request, and must go to the next ones.
var errRoundRaced = errors.New("a request of the round was cancelled while it was served: the round runs again")

// finishRequests sets the outcome of every request a round served in one
// statement (RequestFinishMany), only while each is still pending.
func (e *Engine) finishRequests(ctx context.Context, tx *sql.Tx, taskID int64, outcomes [][]any) error {
	if len(outcomes) == 0 {
		return nil
	}
	text, err := json.Marshal(outcomes)
	if err != nil {
		return fmt.Errorf("finishing the round's requests: %w", err)
	}
	res, err := e.sql().RequestFinishMany.Exec(ctx, tx, drivers.RequestFinishManyParams{TaskID: taskID, Outcomes: string(text)})
	if err != nil {
		return fmt.Errorf("finishing the round's requests: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != int64(len(outcomes)) {
		return errRoundRaced
	}
	return nil
}

// assignment is a work row to insert: a loan for a request of a user.
type assignment struct {
	loan    string
	request int64
	user    string
}

// insertWork inserts the work rows of a serving round, every request's, in
// as few statements as the bind size allows, usually one (a round serves ~10
// requests under contention: one statement instead of one per loan shortens
// the time the lock is held). The database's one-active-row constraint
// refuses a whole statement if any of its loans is active already; the
// round's transaction then rolls back and nothing of the round is assigned.
func (e *Engine) insertWork(ctx context.Context, tx *sql.Tx, task *Task, work []assignment) error {
	for len(work) > 0 {
		text, n, err := assignmentsJSON(work)
		if err != nil {
			return fmt.Errorf("assigning the loans of task %s: %w", task.Name, err)
		}
		work = work[n:]
		res, err := e.sql().WorkInsertMany.Exec(ctx, tx, drivers.WorkInsertManyParams{TaskID: task.ID, Assignments: text})
		if err != nil {
			if e.Driver.IsUniqueViolation(err) {
				return fmt.Errorf("a loan of %s ([loan, request, user]) is already active in task %s (the database's one-active-row constraint stopped a double assignment): %w", text, task.Name, err)
			}
			return fmt.Errorf("assigning the loans of task %s: %w", task.Name, err)
		}
		if got, err := res.RowsAffected(); err == nil && got != int64(n) {
			return fmt.Errorf("assigning the loans of task %s: %d work rows inserted for the %d loans of %s", task.Name, got, n, text)
		}
	}
	return nil
}

// maxAssignmentsJSON bounds the JSON text of one WorkInsertMany: under
// 4,000 bytes, Oracle's VARCHAR2 bind limit in SQL.
const maxAssignmentsJSON = 3900

// assignmentsJSON is the JSON list of the first n assignments of work that
// fit in maxAssignmentsJSON bytes (at least one).
func assignmentsJSON(work []assignment) (string, int, error) {
	var b strings.Builder
	b.WriteByte('[')
	n := 0
	for _, a := range work {
		one, err := json.Marshal([]any{a.loan, a.request, a.user})
		if err != nil {
			return "", 0, err
		}
		if n > 0 && b.Len()+1+len(one)+1 > maxAssignmentsJSON {
			break
		}
		if n > 0 {
			b.WriteByte(',')
		}
		b.Write(one)
		n++
	}
	b.WriteByte(']')
	return b.String(), n, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// Request reads a request and its loans (one statement: a row per loan, one
// row with no loan when it has none); an unknown id is bad input.
func (e *Engine) Request(ctx context.Context, id int64) (*Request, error) {
	rows, err := e.sql().RequestWithLoans.Query(ctx, e.DB, drivers.IDParams{ID: id})
	if err != nil {
		return nil, fmt.Errorf("reading request %d: %w", id, err)
	}
	defer rows.Close()
	var r *Request
	for rows.Next() {
		var x Request
		var created nullTime
		var loan, kind sql.NullString
		if err := rows.Scan(&x.ID, &x.TaskID, &x.Task, &x.User, &x.Requested, &x.Assigned, &x.Status, &created, &loan, &kind); err != nil {
			return nil, fmt.Errorf("reading request %d: %w", id, err)
		}
		if r == nil {
			x.CreatedAt, x.Loans = created.T, []drivers.Key{}
			r = &x
		}
		if loan.Valid {
			r.Loans = append(r.Loans, drivers.NewKey(drivers.ParseKeyKind(kind.String), loan.String))
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading request %d: %w", id, err)
	}
	if r == nil {
		return nil, problem.Usagef("unknown request id %d: give the request_id that `loanq work get` printed", id)
	}
	return r, nil
}
