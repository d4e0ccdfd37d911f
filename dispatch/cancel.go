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

// StatusCancelled is a request its requester cancelled (`work cancel`, or a
// signal while `work get` waited). It is never served: the engine reads and
// finishes only pending requests (docs/algorithm.md, "Cancelling and
// attaching").
const StatusCancelled = "cancelled"

// maxAttach bounds how often logRequest goes round when the pending request it
// collided with was served before it could be read, or its insert was a
// deadlock victim.
const maxAttach = 10

// requestLogTimeout bounds logging a request once it has begun (logRequest).
const requestLogTimeout = 30 * time.Second

// logRequest records a work request of user on task, or attaches to the
// user's pending request of the task: a user has at most one pending request
// per task. The database decides (loanq_request_one_pending_uq): the insert
// comes first, and only when it fails with a unique violation — the user has
// a pending request, logged earlier or by a call racing with this one — does
// the caller read that request and attach to it. Asking while nothing is
// pending, the common case, is one statement.
//
// A signal that arrives while the request is being logged must not leave a
// committed request this call never learned the id of (and so could not
// cancel, and no one would serve): once begun, logging runs to its end,
// bounded in time, and the caller finds ctx done right after and cancels
// what it logged.
//
// Only a request someone still waits for is attached to: one past its last
// sign of life (alive.go) is ended as expired and the insert tried again.
// Attaching is a sign of life on the request (when beat: the caller will
// wait for it), so that it does not expire between the attach and the
// caller's first wait.
func (e *Engine) logRequest(ctx context.Context, taskID int64, user string, count int, beat bool) (id int64, attached bool, err error) {
	if ctx.Err() != nil {
		return 0, false, &problem.Error{Kind: problem.Interrupted, Msg: "interrupted before the work request was logged; nothing was recorded",
			Err: context.Cause(ctx)}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), requestLogTimeout)
	defer cancel()
	deadlocks := 0
	var lastInsert error
	for tries := 0; tries < maxAttach; {
		id, err = e.sql().RequestInsert.InsertID(ctx, e.db, engineio.RequestInsertParams{TaskID: taskID, User: user, Requested: count})
		lastInsert = err
		if err == nil {
			return id, false, nil
		}
		if e.driver.IsDeadlock(err) {
			// InnoDB may make the insert a deadlock victim against a
			// holder finishing requests of the task (both change the
			// request table's indexes: seen with 32 callers on MariaDB,
			// ten times in a row for one insert under a load of 25 on 2
			// cores). The victim's insert was rolled back and says
			// nothing about a pending request: try again after a short,
			// growing pause, for as long as requestLogTimeout allows.
			deadlocks++
			if perr := pause.For(ctx, drivers.DeadlockPause(deadlocks)); perr != nil {
				return 0, false, fmt.Errorf("recording the work request: %d deadlocks in a row, the last: %w", deadlocks, err)
			}
			continue
		}
		tries++
		if drivers.Unreached(err) {
			// The insert never left this machine: say so, so that the
			// caller knows asking again is safe (the caller adds how).
			return 0, false, &problem.Error{Kind: problem.Failure, Err: err,
				Msg: "the work request was not recorded: the database could not be reached, so nothing was assigned and no request is left pending"}
		}
		if !e.driver.IsUniqueViolation(err) {
			return 0, false, fmt.Errorf("recording the work request: %w", err)
		}
		var pending engineio.IDRow
		pending, err = e.sql().RequestPendingFor.One(ctx, e.db, engineio.TaskUserParams{TaskID: taskID, User: user})
		if err == nil && !beat {
			return pending.ID, true, nil
		}
		if err == nil {
			alive, err := e.showAlive(ctx, pending.ID, user)
			if err != nil {
				return 0, false, err
			}
			if alive {
				return pending.ID, true, nil
			}
			continue // answered or expired since: insert again
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return 0, false, fmt.Errorf("looking for the pending request of %s: %w", user, err)
		}
		// The pending request the insert collided with was served or
		// cancelled before it could be read, or nobody waits for it any
		// more (RequestPendingFor reads only live ones): end it if so, and
		// insert again.
		if err := e.expireAbandoned(ctx, taskID); err != nil && !e.driver.IsDeadlock(err) {
			return 0, false, err
		}
	}
	return 0, false, fmt.Errorf("recording the work request: the pending request of %s kept changing (%d tries, %d deadlocks; the last insert: %w)", user, maxAttach, deadlocks, lastInsert)
}

// Cancel is `work cancel`: it cancels the pending request id of user. A
// request that is no longer pending is returned as it is, with a Notice: a
// holder served it before the cancel (the database decides which came
// first), or it was cancelled already. Someone else's request is bad input.
func (e *Engine) Cancel(ctx context.Context, id int64, user string) (*Request, error) {
	req, err := e.Request(ctx, id)
	if err != nil {
		return nil, err
	}
	if req.User != user {
		return nil, problem.Usagef("request %d is %s's, not %s's: only the user who asked can cancel it (--user)", id, req.User, user)
	}
	return e.cancel(ctx, id, user)
}

// cancel runs RequestCancel and reads the request back. The UPDATE changes the
// row only while it is pending, so a cancel racing with a holder's
// RequestFinish is decided by the database: 0 rows means served first.
func (e *Engine) cancel(ctx context.Context, id int64, user string) (*Request, error) {
	res, err := e.sql().RequestCancel.Exec(ctx, e.db, engineio.IDUserParams{ID: id, User: user})
	if err != nil {
		return nil, fmt.Errorf("cancelling request %d: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, fmt.Errorf("cancelling request %d: %w", id, err)
	}
	req, err := e.Request(ctx, id)
	if err != nil {
		return nil, err
	}
	switch {
	case n == 1:
	case req.Status == StatusCancelled:
		req.Notice = fmt.Sprintf("request %d was already cancelled", id)
	case req.Status == StatusExpired:
		req.Notice = fmt.Sprintf("request %d had expired (nobody showed it was waiting for it for %s): it will not be served", id, drivers.RequestAlive)
	case req.Status == StatusPending: // someone else's: the UPDATE names the user
		req.Notice = fmt.Sprintf("request %d is %s's and stays pending", id, req.User)
	default:
		req.Notice = fmt.Sprintf("request %d was served before it could be cancelled: its loans (if any) are yours: `loanq pipeline` lists them", id)
	}
	return req, nil
}

// interrupted turns a wait or a serve stopped by a cancelled ctx into the
// caller's answer: its request is cancelled (when opt.CancelAs names the
// requester) with a context of its own, since ctx is done. A request served
// meanwhile is returned as served, with a Notice and no error: its loans are
// the caller's.
func (e *Engine) interrupted(ctx context.Context, task *Task, id int64, opt GetOptions, cause error) (*Request, error) {
	what := fmt.Sprintf("interrupted while waiting for request %d (task %s)", id, task.Name)
	var pe *problem.Error
	if errors.As(cause, &pe) && pe.Kind == problem.Interrupted {
		what = pe.Msg // interrupted while serving: say so
	}
	sig := context.Cause(ctx)
	if opt.CancelAs == "" {
		return nil, &problem.Error{Kind: problem.Interrupted, Msg: what + "; the request stays pending", Err: sig,
			Hint: fmt.Sprintf("`loanq work status %d --wait` serves it, `loanq work cancel %d` cancels it", id, id)}
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	req, err := e.cancel(cctx, id, opt.CancelAs)
	if err != nil {
		return nil, &problem.Error{Kind: problem.Interrupted, Msg: what + "; cancelling the request failed, it stays pending",
			Err: errors.Join(sig, err), Hint: fmt.Sprintf("`loanq work cancel %d` cancels it", id)}
	}
	if req.Status != StatusPending && req.Status != StatusCancelled {
		return req, nil // served first: the Notice says so, the loans are printed
	}
	if req.Status == StatusPending {
		return req, &problem.Error{Kind: problem.Interrupted, Msg: what + "; " + req.Notice, Err: sig}
	}
	req.Notice = ""
	return req, &problem.Error{Kind: problem.Interrupted, Msg: what + fmt.Sprintf("; request %d cancelled, it will not be served", id), Err: sig}
}

// cancelled reports whether request id is never to be served any more:
// cancelled, or expired (alive.go; also while still pending in the table,
// once past its last sign of life), read through the pool (the latest
// commit, not a REPEATABLE READ snapshot of the caller's transaction).
func (e *Engine) cancelled(ctx context.Context, id int64) bool {
	req, err := e.Request(ctx, id)
	return err == nil && (req.Status == StatusCancelled || req.Status == StatusExpired)
}
