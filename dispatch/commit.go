package dispatch

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/problem"
)

// The writes that end a serving round or claim, shared by every way of
// serving (the task's row lock, its lease, --lock rows, the candidate pool):
// the status rule, the requests' finish, the work rows, the query-run log
// and the commit. A round or claim writes all of them in one transaction,
// so a request is answered exactly when its work rows and its run's log
// entry commit.

// requestStatus is a served request's status: assigned when it got all it
// asked for, partial when some, empty when none.
func requestStatus(requested, taken int) string {
	switch {
	case taken == 0:
		return StatusEmpty
	case taken < requested:
		return StatusPartial
	}
	return StatusAssigned
}

// finishRequest sets the outcome of one request, only while it is still
// pending: false when it no longer was (served by another caller, or
// cancelled). Its error does not name the request: a rows claim's new
// request is not committed yet, and a message naming its id would send the
// user to `work status ID`, which does not know it (the callers that serve
// a committed request name it).
func (e *Engine) finishRequest(ctx context.Context, tx *sql.Tx, id int64, taken int, status string) (bool, error) {
	res, err := e.sql().RequestFinish.Exec(ctx, tx, engineio.RequestFinishParams{Assigned: taken, Status: status, ID: id})
	if err != nil {
		return false, fmt.Errorf("finishing the request: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// errRoundRaced: a request the round meant to serve was no longer pending when
// its batched finish ran (its requester cancelled it between the round's read
// and the finish). The round is rolled back whole and run again: its loans
// were shared out counting that request, and must go to the next ones.
var errRoundRaced = errors.New("a request of the round was cancelled while it was served: the round runs again")

// errLoanTakenMeanwhile: a loan the round meant to assign was assigned by a
// claim beside it after its recheck (recheck.go); the round rolled back
// whole and runs again.
var errLoanTakenMeanwhile = errors.New("a loan of the round was assigned by a claim meanwhile: the round runs again")

// finishRequests sets the outcome of every request a round served in one
// statement (RequestFinishMany), only while each is still pending.
func (e *Engine) finishRequests(ctx context.Context, tx *sql.Tx, taskID int64, served []outcome) error {
	if len(served) == 0 {
		return nil
	}
	outcomes := make([][]any, len(served)) // [request id, assigned, status]
	for i, o := range served {
		outcomes[i] = []any{o.request.id, len(o.loans), o.status}
	}
	text, err := json.Marshal(outcomes)
	if err != nil {
		return fmt.Errorf("finishing the round's requests: %w", err)
	}
	res, err := e.sql().RequestFinishMany.Exec(ctx, tx, engineio.RequestFinishManyParams{TaskID: taskID, Outcomes: string(text)})
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
		res, err := e.sql().WorkInsertMany.Exec(ctx, tx, engineio.WorkInsertManyParams{TaskID: task.ID, Assignments: text})
		if err != nil {
			if e.driver.IsUniqueViolation(err) {
				// A claim that holds the loan's source row (rows) assigned
				// it after the round's recheck: the round rolls back and
				// runs again (serve), with a query that sees that claim.
				return fmt.Errorf("%w: a loan of %s ([loan, request, user]) is already active in task %s (the database's one-active-row constraint stopped a double assignment): %w", errLoanTakenMeanwhile, text, task.Name, err)
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

// logRun logs a criteria-query run (loanq_query_run) in the transaction of
// the round or claim that used it: the log holds the runs whose answers
// committed. pooled is what the run added to the task's candidate pool.
func (e *Engine) logRun(ctx context.Context, tx *sql.Tx, taskID int64, run QueryRun, pooled int) error {
	_, err := e.sql().QueryRunInsert.Exec(ctx, tx, engineio.QueryRunParams{TaskID: taskID, Strategy: run.Strategy,
		Holder: truncate(run.Holder, 100), StartedAgoMS: time.Since(run.started).Milliseconds(), DurationMS: run.DurationMS,
		RowsFound: run.RowsFound, RequestsServed: run.RequestsServed, LoansAssigned: run.LoansAssigned, Pooled: pooled})
	return err
}

// commit commits the transaction of a round or claim (what: "assignments
// of task x"). The beforeCommit test hook runs just before, inside it:
// tests place a request in the window the look after the commit closes
// (docs/algorithm.md, step 6).
func (e *Engine) commit(tx *sql.Tx, what string) error {
	hook(e.hooks.beforeCommit)
	if err := tx.Commit(); err != nil {
		return &commitError{what: what, err: err}
	}
	hook(e.hooks.afterCommit)
	return nil
}

// commitError is a COMMIT that did not answer. Whether the database applied
// it cannot be known from here: the connection may have been lost before the
// COMMIT reached the server or after it was applied, before its answer came
// back. A claim that logs its own request says so (claimFailed).
type commitError struct {
	what string
	err  error
}

func (c *commitError) Error() string { return fmt.Sprintf("committing %s: %v", c.what, c.err) }

func (c *commitError) Unwrap() error { return c.err }

// committedRequestError is the failure to read back a request that a claim
// logged, served and committed in its own transaction (a pool claim, a fresh
// rows claim): unlike the claim's own failures, the request exists and
// holds its loans, so the error names it and claimFailed passes it on as
// it is rather than saying nothing was assigned.
type committedRequestError struct {
	id  int64
	err error
}

func (c *committedRequestError) Error() string {
	return fmt.Sprintf("request %d was served and committed, but reading its loans back failed: %v", c.id, c.err)
}

func (c *committedRequestError) Unwrap() error { return c.err }

// readCommitted reads back the request a claim committed (see
// committedRequestError).
func (e *Engine) readCommitted(ctx context.Context, id int64) (*Request, error) {
	req, err := e.Request(ctx, id)
	if err != nil {
		kind := problem.KindOf(err)
		if ctx.Err() != nil {
			kind = problem.Interrupted
		}
		return nil, &problem.Error{Kind: kind, Err: &committedRequestError{id: id, err: err},
			Hint: fmt.Sprintf("its loans are yours: `loanq work status %d` shows them once the database answers; asking again would add more", id)}
	}
	return req, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
