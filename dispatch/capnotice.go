package dispatch

import (
	"context"
	"fmt"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
)

// noteCap says, on a request answered partial or empty, when the task's
// per-user cap (--max-active) is the reason: without it a capped user reads
// "empty, no loan available" while hundreds of loans match. It reads the
// user's active count after the answer: the cap was what stopped the request
// exactly when that count reached it (a request stopped by a lack of loans
// leaves the user below the cap). The three ways of serving (the task lock,
// --lock rows, the candidate pool) all answer through Get, so this is said
// once here. A failed read only leaves the notice out.
func (e *Engine) noteCap(ctx context.Context, task *Task, req *Request) *Request {
	if req == nil || task.MaxActive <= 0 || req.Assigned >= req.Requested ||
		(req.Status != StatusPartial && req.Status != StatusEmpty) {
		return req
	}
	active, err := e.activeCount(ctx, e.db, task, req.User)
	if err != nil {
		return req
	}
	if active < task.MaxActive {
		return req
	}
	req.CappedAt = task.MaxActive
	notice := fmt.Sprintf("your cap of %d active loan(s) in task %s is reached (--max-active %d): you hold %d", task.MaxActive, task.Name, task.MaxActive, active)
	if req.Assigned > 0 {
		notice += fmt.Sprintf(", %d of them from this request", req.Assigned)
	}
	req.Notice = notice + "; end some with `loanq disposition " + task.Name + " LOAN complete|return|never` (`loanq pipeline` lists yours) before asking for more"
	return req
}

// activeCount is user's active work in task: what the per-user cap counts.
func (e *Engine) activeCount(ctx context.Context, q drivers.Querier, task *Task, user string) (int, error) {
	r, err := e.sql().ActiveCountForUser.One(ctx, q, engineio.TaskUserParams{TaskID: task.ID, User: user})
	if err != nil {
		return 0, fmt.Errorf("counting active work of %s: %w", user, err)
	}
	return int(r.N), nil
}
