package dispatch

import (
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/loankey"

	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/loanq/loanq/problem"
)

// Dispositions (docs/algorithm.md, "Dispositions and eligibility").
const (
	Complete = "complete" // done; assignable again while it still matches
	Return   = "return"   // back to the queue once --after has passed
	Never    = "never"    // never assigned again for this task
)

// dispositionDeadlockBound is how long a disposition chosen as a deadlock
// victim (InnoDB, against rounds inserting the task's work rows) is sent
// again before its caller is told: the statement or transaction was rolled
// back whole, so sending it again is always safe.
const dispositionDeadlockBound = 10 * time.Second

// Disposed is the outcome of a disposition.
type Disposed struct {
	Task        string        `json:"task"`
	LoanID      loankey.Key   `json:"loan_id"`
	User        string        `json:"user"`
	Disposition string        `json:"disposition"`
	After       time.Duration `json:"-"`
	AfterSecs   float64       `json:"return_after_seconds,omitempty"`
	AfterMS     int64         `json:"return_after_ms,omitempty"` // the same, in the JSON convention (docs/json.md)
	// Reason and Note: as given (docs/reasons.md); "" when not.
	Reason string `json:"reason,omitempty"`
	Note   string `json:"note,omitempty"`
}

// DispositionNote is what a disposition may say about itself
// (docs/reasons.md): a reason code of the task's and a note of at most
// MaxNote characters; both optional unless the task requires a reason.
type DispositionNote struct {
	Reason string
	Note   string
}

// ParseAction checks a disposition name.
func ParseAction(s string) (string, error) {
	switch strings.ToLower(s) {
	case Complete, Return, Never:
		return strings.ToLower(s), nil
	}
	return "", problem.UsageAPI(fmt.Sprintf("unknown disposition %q: use complete, return or never", s),
		fmt.Sprintf("invalid action %q: use complete, return or never", s))
}

// CheckDisposition checks a disposition's action and its --after without a
// database (commands call it before they connect) and returns the action
// as stored.
func CheckDisposition(action string, after time.Duration, afterGiven bool) (string, error) {
	action, err := ParseAction(action)
	if err != nil {
		return "", err
	}
	if afterGiven && action != Return {
		return "", problem.Paramf("--after", "after", "%s only goes with return (a %s disposition has no return time)", action)
	}
	if after < 0 || after > MaxReturnWait {
		return "", problem.Paramf("--after", "after", "invalid %s %s: give a duration from 0s to 72h (e.g. 0s, 90m, 4h)", after)
	}
	return action, nil
}

// Dispose ends the user's active assignment of a loan in a task. Only the
// assignee may do it; the row keeps who, when and what as history. loanArg
// is the loan key as given (command line, API), parsed per the task's key
// kind (loankey.Parse): an integer task refuses "abc".
func (e *Engine) Dispose(ctx context.Context, taskName string, loanArg string, user, action string, after time.Duration, afterGiven bool) (*Disposed, error) {
	return e.DisposeNoted(ctx, taskName, loanArg, user, action, after, afterGiven, DispositionNote{})
}

// DisposeNoted is Dispose with a reason and a note. The database checks the
// reason against the task's codes (migration 00019): no read of them before
// the UPDATE; a refusal is explained from them after.
func (e *Engine) DisposeNoted(ctx context.Context, taskName string, loanArg string, user, action string, after time.Duration, afterGiven bool, note DispositionNote) (*Disposed, error) {
	action, err := checkDisposeCall(taskName, user, action, after, afterGiven, note)
	if err != nil {
		return nil, err
	}
	task, taskID, kind, loans, err := e.disposeTarget(ctx, taskName, []string{loanArg})
	if err != nil {
		return nil, err
	}
	loan := loans[0]
	var afterMS sql.NullInt64 // NULL: no return time
	if action == Return {
		afterMS = sql.NullInt64{Int64: after.Milliseconds(), Valid: true}
	}
	// One UPDATE that ends the loan's active assignment only if it is the
	// user's; only when it changes nothing is there a read, to say why.
	err = e.disposeUntilDone(ctx, task, taskName, taskID, action, note.Reason, "loan "+loan,
		func(taskID int64) (bool, error) {
			// One statement, its own transaction: a deadlock victim (InnoDB,
			// against a round inserting work rows of the task: measured 2 in
			// 10,620 dispositions beside processors on one task) changed
			// nothing and is simply sent again.
			var res sql.Result
			err := drivers.RetryDeadlockFor(ctx, e.driver, dispositionDeadlockBound, func() error {
				var err error
				res, err = e.sql().DisposeLoan.Exec(ctx, e.db, engineio.DisposeLoanParams{Disposition: action, ReturnAfterMS: afterMS, TaskID: taskID, LoanID: loan, User: user,
					Reason: nullString(note.Reason), Note: nullString(note.Note)})
				return err
			})
			if err != nil {
				return false, err
			}
			n, err := res.RowsAffected()
			return n == 1, err
		},
		func(task *Task, try int) error { return e.notDisposed(ctx, task, loan, user, try) })
	if err != nil {
		return nil, err
	}
	d := &Disposed{Task: taskName, LoanID: loankey.New(kind, loan), User: user, Disposition: action, Reason: note.Reason, Note: note.Note}
	if action == Return {
		d.After, d.AfterSecs, d.AfterMS = after, after.Seconds(), after.Milliseconds()
	}
	return d, nil
}

// checkDisposeCall checks what a disposition call gives before it reaches
// the database, and returns the action as stored.
func checkDisposeCall(taskName, user, action string, after time.Duration, afterGiven bool, note DispositionNote) (string, error) {
	action, err := CheckDisposition(action, after, afterGiven)
	if err != nil {
		return "", err
	}
	if err := CheckReasonAndNote(note.Reason, note.Note); err != nil {
		return "", err
	}
	if err := validateUser(user); err != nil {
		return "", err
	}
	return action, ValidateTaskName(taskName)
}

// disposeUntilDone sends a disposition (send: true when it changed every
// loan it names) until it is done or explain says why it cannot be (an
// error). Between tries: a refusal by the reason rule is explained with the
// task's codes (reasonRefusal); a task id that came from the cache (task
// nil) is checked by reading the task, and the disposition is sent again
// under its new id if it changed. An explain that returns nil means the
// loans are the user's active work again (assigned to them right after
// the UPDATE looked): the disposition is sent again. what names the loans
// in errors ("loan 7", "3 loans of task t").
func (e *Engine) disposeUntilDone(ctx context.Context, task *Task, taskName string, taskID int64, action, reason, what string,
	send func(taskID int64) (bool, error), explain func(task *Task, try int) error) error {
	for try := 0; ; try++ {
		done, err := send(taskID)
		if err != nil {
			if uerr := e.reasonRefusal(ctx, taskID, taskName, action, reason); uerr != nil {
				return uerr
			}
			return fmt.Errorf("recording disposition %s of %s: %w", action, what, err)
		}
		if done {
			return nil
		}
		if task == nil {
			// The id came from an earlier read: the task may be gone, or
			// another task by now. Read it, and try again if its id changed.
			if task, err = e.taskByName(ctx, taskName); err != nil {
				return err
			}
			if task.ID != taskID {
				taskID = task.ID
				continue
			}
		}
		if err := explain(task, try); err != nil {
			return err
		}
	}
}

// disposeTarget is the task a disposition names, as this engine last read
// it (its id and key kind), and the loan keys given parsed per that kind
// (loankey.Parse: an integer task refuses "abc"). task is nil when the id
// came from the cache: the caller reads the task when an UPDATE finds
// nothing, as the id may be stale (the task deleted, or created again).
func (e *Engine) disposeTarget(ctx context.Context, taskName string, loanArgs []string) (task *Task, taskID int64, kind loankey.Kind, loans []string, err error) {
	// The task's id, as this engine last read it; the task is read when it
	// has not been, or when the id may be stale (below).
	cached, known := e.taskIDs.Load(taskName)
	if !known {
		if task, err = e.taskByName(ctx, taskName); err != nil {
			return nil, 0, 0, nil, err
		}
		cached = taskRef{id: task.ID, kind: task.KeyKind}
	}
	taskID, kind = cached.(taskRef).id, cached.(taskRef).kind
	loans, err = parseLoans(kind, taskName, loanArgs)
	if err != nil && task == nil {
		// The kind came from an earlier read: the task may have another key
		// column by now (task update). Read it and parse again.
		if task, err = e.taskByName(ctx, taskName); err != nil {
			return nil, 0, 0, nil, err
		}
		taskID, kind = task.ID, task.KeyKind
		loans, err = parseLoans(kind, taskName, loanArgs)
	}
	if err != nil {
		return nil, 0, 0, nil, err
	}
	return task, taskID, kind, loans, nil
}

// parseLoans parses each key of args per the task's key kind; the first
// bad one is the error.
func parseLoans(kind loankey.Kind, taskName string, args []string) ([]string, error) {
	out := make([]string, len(args))
	for i, a := range args {
		k, err := loankey.Parse(kind, taskName, a)
		if err != nil {
			return nil, err
		}
		out[i] = k
	}
	return out, nil
}

// notDisposed says why DisposeLoan changed nothing: the loan is someone
// else's, or not active. It returns nil when the loan is active and the
// user's after all (assigned to them again just after the UPDATE looked), for
// the caller to try again, at most a few times.
func (e *Engine) notDisposed(ctx context.Context, task *Task, loan string, user string, try int) error {
	w, err := e.sql().ActiveWork.One(ctx, e.db, engineio.TaskLoanParams{TaskID: task.ID, LoanID: loan})
	assignee := w.User
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return e.notActive(ctx, task, loan)
	case err != nil:
		return fmt.Errorf("reading the assignment of loan %s: %w", loan, err)
	case assignee != user:
		return notAssignee(task.Name, loan, assignee, user)
	case try >= 2:
		return problem.Usagef("loan %s in task %s was dispositioned by another command just now", loan, task.Name)
	}
	return nil
}

func (e *Engine) notActive(ctx context.Context, task *Task, loan string) error {
	last, err := e.sql().LastWork.One(ctx, e.db, engineio.TaskLoanParams{TaskID: task.ID, LoanID: loan})
	if errors.Is(err, sql.ErrNoRows) {
		return problem.UsageAPI(fmt.Sprintf("loan %s has never been assigned in task %s: `loanq pipeline` lists your active loans", loan, task.Name),
			fmt.Sprintf("loan %s has never been assigned in task %s: GET /api/v1/pipeline lists your active loans", loan, task.Name))
	}
	if err != nil {
		return fmt.Errorf("reading the history of loan %s: %w", loan, err)
	}
	return problem.Usagef("loan %s in task %s is not active: its last assignment (to %s) was already dispositioned %s", loan, task.Name, last.User, last.Disposition.String)
}

// PipelineItem is one active assignment.
type PipelineItem struct {
	Task       string      `json:"task"`
	LoanID     loankey.Key `json:"loan_id"`
	AssignedAt time.Time   `json:"assigned_at"`
	AgeSeconds int64       `json:"age_seconds"`
	// AgeMS is the age in milliseconds (the JSON convention of
	// docs/json.md); both ages are by the database clock read with the
	// pipeline, AgeSeconds in whole seconds (cut).
	AgeMS int64 `json:"age_ms"`
	// Details and Link: what the task shows of the loan (details.go).
	Details Details `json:"details"`
	Link    *string `json:"link"`
}

// Pipeline is the user's active work, oldest first; taskName "" means all tasks.
func (e *Engine) Pipeline(ctx context.Context, user, taskName string) ([]PipelineItem, error) {
	if err := validateUser(user); err != nil {
		return nil, err
	}
	if taskName != "" {
		if _, err := e.Task(ctx, taskName); err != nil {
			return nil, err
		}
	}
	rows, err := e.sql().Pipeline.All(ctx, e.db, engineio.PipelineParams{User: user, Task: taskName})
	if err != nil {
		return nil, fmt.Errorf("reading the pipeline of %s: %w", user, err)
	}
	out := []PipelineItem{}
	for _, r := range rows {
		age := max(0, r.DBNow.T.Sub(r.AssignedAt.T))
		out = append(out, PipelineItem{Task: r.Task, LoanID: loankey.New(loankey.ParseKind(r.KeyKind), r.LoanID),
			AssignedAt: r.AssignedAt.T, AgeSeconds: int64(age / time.Second), AgeMS: age.Milliseconds(), Details: Details{}})
	}
	return out, e.pipelineDetails(ctx, out)
}

// reasonRefusal explains a disposition the database refused: when the
// reason rule (migration 00019) refuses the action's reason, the bad-input
// error that names the codes the task takes (read now: the task may have
// changed since it was cached); nil when the rule accepts it, or the codes
// cannot be read, so that the caller reports the database's error.
func (e *Engine) reasonRefusal(ctx context.Context, taskID int64, taskName string, action, reason string) error {
	r, err := e.taskReasons(ctx, e.db, taskID, taskName)
	if err != nil {
		return nil
	}
	return r.CheckReason(taskName, action, reason)
}
