package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/internal/pause"
	"github.com/loanq/loanq/loankey"
	"github.com/loanq/loanq/problem"
)

// A request's life (docs/algorithm.md, "Step by step"): Get logs it and
// serves it or waits, Status reads it and serves it while it is pending,
// and both return its answer. How a round serves is round.go (the task's
// row lock), lease.go (its lease) and rows.go (no task lock); waiting is
// wake.go; logging, attaching and cancelling are cancel.go.

// Request statuses, as `work get` and `work status` print them (docs/json.md).
const (
	StatusPending  = "pending"
	StatusAssigned = "assigned"
	StatusPartial  = "partial"
	StatusEmpty    = "empty"
	// StatusCancelled: see cancel.go; StatusExpired: alive.go.
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
	Loans     []loankey.Key `json:"loans"`
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
	// Work is Loans with what their task shows of each (details.go): set
	// by Get and Status.
	Work []LoanItem `json:"work,omitempty"`
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
	// CancelAs, when set, is the requester: if ctx is cancelled (a signal,
	// an API client gone) while the request is pending, it is cancelled as
	// that user's. Status shows signs of life on the request (alive.go)
	// unless CancelAs names someone else: a recheck by its requester, or by
	// a caller that does not say who it is, keeps it alive.
	CancelAs string
	// OwnRequest: never attach to the user's pending request. A caller
	// that hands each loan it gets to a worker (`work run`) must not share
	// its answer with another process of the same user, nor have loans
	// assigned to a request it will not work on: it waits, without serving
	// it, for that pending request to be answered by whoever waits for it
	// or to expire (awaitOther), then logs its own.
	OwnRequest bool
}

// Get is `work get` (docs/algorithm.md, "Step by step"). On busy or timeout it
// returns the request, still pending, together with a problem.Busy error
// naming its id.
func (e *Engine) Get(ctx context.Context, taskName, user string, count int, opt GetOptions) (*Request, error) {
	if count < 1 || count > MaxCount {
		return nil, problem.Paramf("--count", "count", "invalid %s %d: ask for between 1 and %d loans", count, MaxCount)
	}
	if err := validateUser(user); err != nil {
		return nil, err
	}
	task, err := e.Task(ctx, taskName)
	if err != nil {
		return nil, err
	}
	if err := e.mayWorkTask(ctx, task, user); err != nil { // governance.go
		return nil, err
	}
	srv, err := e.serverFor(task, opt.Lock)
	if err != nil {
		return nil, err
	}
	// A task with a candidate pool serves from it when it can (pool.go): one
	// short transaction, no query. rows: the claim logs the request itself
	// (rows.go, serveRowsFresh), one commit per get, unless the request
	// must wait. Otherwise nothing was written, and the usual way below.
	if req, err := srv.fresh(ctx, task, user, count); err != nil || req != nil {
		return e.withWork(ctx, task, e.noteCap(ctx, task, req)), err
	}
	// Step 1: the request is committed on its own, before any lock is tried,
	// so that whoever holds the lock can see and serve it.
	// A user has at most one pending request per task: asking again
	// attaches to it (cancel.go).
	hook(e.hooks.beforeRequestLog)
	id, attached, err := e.logRequest(ctx, task.ID, user, count, !opt.OwnRequest)
	for err == nil && attached && opt.OwnRequest {
		// Someone else's answer, or nobody's (a call killed while it
		// waited): not this caller's to serve. Wait until it is answered or
		// expired, then log this caller's own.
		if err = e.awaitOther(ctx, task, id, opt); err != nil {
			break
		}
		id, attached, err = e.logRequest(ctx, task.ID, user, count, false)
	}
	if err != nil && drivers.Unreached(err) {
		return nil, problem.WithHint(err, fmt.Sprintf("once the database answers again, `loanq work get %s` asks again", task.Name))
	}
	if err != nil {
		return nil, err
	}
	if attached && opt.OnAttach != nil {
		opt.OnAttach(id)
	}
	own := &ownRequest{id: id, user: user, requested: count, alive: true}
	if attached {
		own.requested = 0 // the first request's count stands: unknown here
	}
	req, err := e.serveOrCancel(ctx, task, srv, own, opt)
	if req != nil {
		req.Attached = attached
	}
	return e.withWork(ctx, task, e.noteCap(ctx, task, req)), err
}

// claimFailed says what a claim that logs its own request (a pool claim, a
// fresh rows claim) left when it failed: its transaction rolled back with
// the request in it, so there is no request id to recheck, and asking again
// is safe. A signal (exit 130/143) says so too; bad input and busy answers
// pass as they are.
func (e *Engine) claimFailed(ctx context.Context, task *Task, err error, doing string) error {
	var committed *committedRequestError
	var unanswered *commitError
	switch {
	case err == nil || errors.As(err, &committed):
		return err // committed: the request exists, and the error names it
	case ctx.Err() != nil:
		return &problem.Error{Kind: problem.Interrupted, Err: context.Cause(ctx),
			Msg: fmt.Sprintf("interrupted while %s task %s: the claim rolled back, nothing was assigned and no request is left pending", doing, task.Name)}
	case errors.As(err, &unanswered):
		return &problem.Error{Kind: problem.Failure, Err: fmt.Errorf("%s task %s: %w", doing, task.Name, err),
			Hint: fmt.Sprintf("the connection was lost at the commit: if the database applied it, `loanq pipeline --task %s` shows your new loans, else nothing was assigned; either way no request is left pending; look there before you ask again", task.Name)}
	case problem.KindOf(err) == problem.Failure:
		return &problem.Error{Kind: problem.Failure, Err: fmt.Errorf("%s task %s: %w", doing, task.Name, err),
			Hint: fmt.Sprintf("the claim rolled back: nothing was assigned and no request is left pending; once the database answers again, `loanq work get %s` asks again", task.Name)}
	}
	return err
}

// ownRequest is the request a call of Get or Status serves or waits for, as
// far as the call knows it, and its answer once a round this call ran has
// served it and committed: then the call returns that answer without reading
// the request back.
type ownRequest struct {
	id        int64
	user      string
	requested int // 0: not known (attached to another call's request)
	// alive: this call is the requester waiting for the request, and shows
	// signs of life on it while it waits (alive.go).
	alive bool

	answer *Request // set once this call's commit served the request
	// woke is the request as a granted wait read it, no longer pending
	// (readWake): served by another caller's round, or ended.
	woke *Request
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
func (e *Engine) serveOrCancel(ctx context.Context, task *Task, srv server, own *ownRequest, opt GetOptions) (*Request, error) {
	req, err := e.serveUntilDone(ctx, task, srv, own, opt)
	if err != nil && ctx.Err() != nil {
		return e.interrupted(ctx, task, own.id, opt, err)
	}
	return req, err
}

// Status is `work status` (docs/algorithm.md, step 7): it reads the request
// and, while it is pending and the task lock is free, serves the pending
// requests itself.
func (e *Engine) Status(ctx context.Context, id int64, wait bool, opt GetOptions) (*Request, error) {
	req, err := e.Request(ctx, id)
	if err != nil {
		return nil, err
	}
	// A recheck by the requester is a sign of life (alive.go): first, so
	// that a request rechecked within the bound is served, and one past it
	// stays expired.
	alive := opt.CancelAs == "" || opt.CancelAs == req.User
	if req.Status == StatusPending && alive {
		ok, err := e.showAlive(ctx, id, req.User)
		if err != nil {
			return nil, err
		}
		if !ok { // answered or expired meanwhile
			if req, err = e.Request(ctx, id); err != nil {
				return nil, err
			}
		}
	}
	if req.Status != StatusPending {
		e.settleExpired(ctx, req)
		return e.withWork(ctx, nil, req), nil
	}
	task, err := e.taskByID(ctx, req.TaskID)
	if err != nil {
		return nil, err
	}
	if err := e.mayWorkTask(ctx, task, req.User); err != nil { // governance.go
		return nil, err
	}
	srv, err := e.serverFor(task, opt.Lock)
	if err != nil {
		return nil, err
	}
	opt.NoWait = !wait
	req, err = e.serveOrCancel(ctx, task, srv, &ownRequest{id: id, user: req.User, requested: req.Requested, alive: alive}, opt)
	return e.withWork(ctx, task, req), err
}

// serveUntilDone tries to serve, then waits to be woken (docs/algorithm.md,
// "Waiting") and tries again, until the request is no longer pending, the
// caller gave up (NoWait), or the timeout passed. The backoff steps are the
// longest a wait lasts before the caller looks again on its own.
func (e *Engine) serveUntilDone(ctx context.Context, task *Task, srv server, own *ownRequest, opt GetOptions) (*Request, error) {
	id := own.id
	backoff := opt.Backoff
	if len(backoff) == 0 {
		backoff = DefaultBackoff
	}
	var deadline time.Time
	if opt.Timeout > 0 {
		deadline = time.Now().Add(opt.Timeout)
	}
	if own.alive {
		defer e.keepAlive(ctx, task, own)()
	}
	served := false // the last wait saw the request served: just read it
	for attempt := 0; ; attempt++ {
		var err error
		if !served {
			err = srv.serve(ctx, task, own, deadline)
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
		req, err := own.woke, error(nil) // read by the wait that saw it answered
		own.woke = nil
		if req == nil || !served {
			req, err = e.Request(ctx, id)
		}
		if err != nil {
			return nil, err
		}
		if req.Status != StatusPending {
			e.settleExpired(ctx, req)
			return req, nil
		}
		wait := backoff[min(attempt, len(backoff)-1)]
		if !deadline.IsZero() {
			wait = min(wait, time.Until(deadline))
		}
		if opt.NoWait || wait <= 0 {
			return req, &problem.Error{Kind: problem.Busy,
				Msg:  fmt.Sprintf("request %d for task %s is still pending: %s", id, task.Name, srv.pendingWhy()),
				Hint: fmt.Sprintf("check again with `loanq work status %d --wait`", id)}
		}
		if opt.OnWait != nil {
			opt.OnWait(req, wait)
		}
		// Wait for the holder's commit (or for the lock to become free), at
		// most `wait`; then serve and look again. The last round after the
		// timeout passes takes no lock wait (the deadline bounds it).
		if served, err = srv.await(ctx, task, own, wait); err != nil {
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

type pendingRequest struct {
	id        int64
	user      string
	requested int
	createdAt time.Time
}

func (e *Engine) pending(ctx context.Context, q drivers.Querier, taskID int64) ([]pendingRequest, error) {
	rows, err := e.sql().RequestsPending.All(ctx, q, engineio.TaskParams{TaskID: taskID})
	if err != nil {
		return nil, fmt.Errorf("reading pending requests: %w", err)
	}
	var out []pendingRequest
	for _, r := range rows {
		out = append(out, pendingRequest{id: r.ID, user: r.User, requested: r.Requested, createdAt: r.CreatedAt.T})
	}
	return out, nil
}

// Request reads a request and its loans (one statement: a row per loan, one
// row with no loan when it has none); an unknown id is bad input.
func (e *Engine) Request(ctx context.Context, id int64) (*Request, error) {
	if id <= 0 {
		return nil, problem.UsageAPI(fmt.Sprintf("invalid request id %d: give the request_id that `loanq work get` printed", id),
			fmt.Sprintf("invalid request id %d: give the request_id that POST /api/v1/tasks/{task}/requests answered", id))
	}
	return e.requestOn(ctx, e.db, id)
}

// requestOn is Request read through q (a wait's transaction, or the pool).
func (e *Engine) requestOn(ctx context.Context, q drivers.Querier, id int64) (*Request, error) {
	rows, err := e.sql().RequestWithLoans.All(ctx, q, engineio.IDParams{ID: id})
	if err != nil {
		return nil, fmt.Errorf("reading request %d: %w", id, err)
	}
	var r *Request
	for _, x := range rows {
		if r == nil {
			r = &Request{ID: x.ID, TaskID: x.TaskID, Task: x.Task, User: x.User, Requested: x.Requested,
				Assigned: x.Assigned, Status: x.Status, CreatedAt: x.CreatedAt.T, Loans: []loankey.Key{}}
		}
		if x.LoanID.Valid {
			r.Loans = append(r.Loans, loankey.New(loankey.ParseKind(x.KeyKind.String), x.LoanID.String))
		}
	}
	if r == nil {
		return nil, problem.UsageAPI(fmt.Sprintf("unknown request id %d: give the request_id that `loanq work get` printed", id),
			fmt.Sprintf("unknown request id %d: give the request_id that POST /api/v1/tasks/{task}/requests answered", id))
	}
	return r, nil
}
