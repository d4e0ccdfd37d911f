package dispatch

import (
	"context"
	"fmt"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/internal/pause"
	"github.com/loanq/loanq/problem"
)

// Abandoned requests (docs/algorithm.md, "Abandoned requests"). A request is
// served only while someone waits for it: every caller that waits for its
// request shows a sign of life on it (RequestAlive, the database's clock in
// alive_at) at least every aliveEvery, and so does every recheck of its
// requester (`work status`, the API's GET). A pending request without one
// for longer than drivers.RequestAlive is never served: the statements that
// read and finish pending requests for a round (RequestsPending,
// RequestFinish, RequestFinishMany) leave it out themselves, every read of
// one request says it is expired, and RequestsExpire ends it as 'expired'
// (the waiters' heartbeat does, a recheck of it, and a new request of its
// user that collides with it on the one-pending index).

// StatusExpired is a pending request that nobody showed a sign of life on
// for longer than drivers.RequestAlive (its caller was killed, or went away
// without cancelling it). It is never served.
const StatusExpired = "expired"

// aliveEvery is how often a caller that waits for its request shows a sign
// of life on it: a quarter of drivers.RequestAlive, so that three missed in
// a row (a slow database, a stalled process) still leave it alive.
var aliveEvery = drivers.RequestAlive / 4

// keepAlive shows a sign of life on own's request every aliveEvery while the
// caller waits for it, until the returned stop is called, and meanwhile ends
// the task's abandoned requests. Failures are left to the waiter's own
// statements to report: a sign of life that cannot be written is retried
// at the next tick, well within the bound.
func (e *Engine) keepAlive(ctx context.Context, task *Task, own *ownRequest) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(aliveEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if alive, err := e.showAlive(ctx, own.id, own.user); err == nil && !alive {
				return // served, cancelled or expired: nothing to keep alive
			}
			_ = e.expireAbandoned(ctx, task.ID)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// showAlive is the requester's sign of life on its pending request id:
// false when it is no longer pending and alive (served, cancelled, or past
// the bound: an expired request is never revived).
func (e *Engine) showAlive(ctx context.Context, id int64, user string) (bool, error) {
	res, err := e.sql().RequestAlive.Exec(ctx, e.db, engineio.IDUserParams{ID: id, User: user})
	if err != nil {
		return false, fmt.Errorf("showing that request %d is still waited for: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("showing that request %d is still waited for: %w", id, err)
	}
	return n == 1, nil
}

// expireAbandoned ends the task's pending requests that nobody showed a
// sign of life on within drivers.RequestAlive as expired. Its own statement,
// never inside a round's transaction.
func (e *Engine) expireAbandoned(ctx context.Context, taskID int64) error {
	if _, err := e.sql().RequestsExpire.Exec(ctx, e.db, engineio.TaskParams{TaskID: taskID}); err != nil {
		return fmt.Errorf("ending the abandoned requests of the task: %w", err)
	}
	return nil
}

// settleExpired ends req as expired in the database when it reads as
// expired but is still pending there (nobody ended it yet), so that counts
// of pending requests and a new request of its user agree with what it
// says. A failure changes nothing that matters: it is never served either
// way, and the next caller ends it.
func (e *Engine) settleExpired(ctx context.Context, req *Request) {
	if req != nil && req.Status == StatusExpired {
		_ = e.expireAbandoned(ctx, req.TaskID)
	}
}

// otherPoll is how often a caller that must not share an answer looks at
// the user's pending request it collided with (awaitOther).
const otherPoll = time.Second

// awaitOther waits, without serving it, for the user's pending request id
// that another call logged (or that a call killed meanwhile left behind) to
// be answered: served by the rounds of whoever waits for it, cancelled, or
// expired once nobody shows a sign of life on it. Used by a caller that hands
// each loan it gets to a worker (`work run`, GetOptions.OwnRequest): it must
// neither share that request's answer nor get its loans assigned to a
// request it would not work on. It honours opt's NoWait and Timeout.
func (e *Engine) awaitOther(ctx context.Context, task *Task, id int64, opt GetOptions) error {
	var deadline time.Time
	if opt.Timeout > 0 {
		deadline = time.Now().Add(opt.Timeout)
	}
	for {
		req, err := e.Request(ctx, id)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return err
		}
		if req.Status != StatusPending {
			e.settleExpired(ctx, req)
			return nil
		}
		wait := otherPoll
		if !deadline.IsZero() {
			wait = min(wait, time.Until(deadline))
		}
		if opt.NoWait || wait <= 0 {
			return &problem.Error{Kind: problem.Busy,
				Msg:  fmt.Sprintf("your request %d of task %s is pending for another call of yours: this caller asks for its own loans once it is answered (or expired, %s after its last sign of life)", id, task.Name, drivers.RequestAlive),
				Hint: fmt.Sprintf("`loanq work status %d` shows it; `loanq work cancel %d` cancels it if nobody waits for it", id, id),
				API: fmt.Sprintf("your request %d of task %s is pending for another call of yours: this caller asks for its own loans once it is answered (or expired, %s after its last sign of life) (GET /api/v1/requests/%d shows it; DELETE /api/v1/requests/%d cancels it if nobody waits for it)",
					id, task.Name, drivers.RequestAlive, id, id)}
		}
		if err := pause.For(ctx, wait); err != nil {
			break
		}
	}
	return &problem.Error{Kind: problem.Interrupted, Err: context.Cause(ctx),
		Msg: fmt.Sprintf("interrupted while waiting for your pending request %d of task %s (another call's): nothing was logged for this call", id, task.Name)}
}
