package dispatch

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/loankey"
	"github.com/loanq/loanq/problem"
)

// Several loans disposed of in one call (`loanq disposition TASK LOAN…
// ACTION`, POST /api/v1/tasks/{task}/dispositions): a script draining a
// queue gets N loans with one `work get --count N` and ends them with one
// call, one connection and one transaction instead of N of each
// (docs/scaling.md, "Dispositions in a batch").

// MaxDisposeMany is the most loans one batch disposition may name: as many
// as one work get may hand out.
const MaxDisposeMany = MaxCount

// maxRefusalsExplained bounds how many refused loans a batch's error
// explains one by one (each a read of the loan's history); it counts the
// rest.
const maxRefusalsExplained = 5

// DisposedMany is the outcome of a batch disposition: every loan in Loans
// was ended with the same disposition in one transaction.
type DisposedMany struct {
	Task        string        `json:"task"`
	User        string        `json:"user"`
	Disposition string        `json:"disposition"`
	After       time.Duration `json:"-"`
	AfterSecs   float64       `json:"return_after_seconds,omitempty"`
	AfterMS     int64         `json:"return_after_ms,omitempty"`
	Reason      string        `json:"reason,omitempty"`
	Note        string        `json:"note,omitempty"`
	Count       int           `json:"count"`
	Loans       []loankey.Key `json:"loans"` // in the order given
}

// CheckDisposeLoans checks a batch's list of loan keys as given, without a
// database (commands call it before they connect): at least one, at most
// MaxDisposeMany, none empty, none twice. A key is checked against the
// task's kind once the task is read (DisposeMany); two spellings of one
// integer key ("7", "07") are found there.
func CheckDisposeLoans(loans []string) error {
	switch {
	case len(loans) == 0:
		return problem.UsageAPI("no loan given: name the loans to disposition (`loanq pipeline` lists your active loans)",
			`no loan given: "loans" lists the loans to disposition (GET /api/v1/pipeline lists your active loans)`)
	case len(loans) > MaxDisposeMany:
		return problem.UsageAPI(fmt.Sprintf("%d loans: one disposition takes at most %d; split the list (e.g. xargs -n %d)", len(loans), MaxDisposeMany, MaxDisposeMany),
			fmt.Sprintf(`%d loans: "loans" takes at most %d; split the list over several calls`, len(loans), MaxDisposeMany))
	}
	seen := make(map[string]bool, len(loans))
	for _, l := range loans {
		if strings.TrimSpace(l) == "" {
			return problem.UsageAPI("an empty loan key in the list: give each loan's key as `work get` printed it",
				`an empty loan key in "loans": give each loan's key as a request's loans show it`)
		}
		if seen[l] {
			return problem.Usagef("loan %s is named twice: name each loan once", quoteIfOdd(l))
		}
		seen[l] = true
	}
	return nil
}

// quoteIfOdd is a key as a message shows it: as it is, or quoted when it
// holds spaces or nothing printable would show where it ends.
func quoteIfOdd(k string) string {
	if k == "" || strings.ContainsAny(k, " \t\"") {
		return fmt.Sprintf("%q", k)
	}
	return k
}

// DisposeMany ends the user's active assignments of several loans of one
// task with one disposition, all or nothing: one transaction whose UPDATE
// (DisposeLoans, one per run of keys under the bind limit: one for any
// list of integer keys) changes a row only where it is the user's active
// work; unless it changed every loan of the list it is rolled back, and
// the error names each loan that is not the user's active work and why,
// in the words of Dispose's (someone else's, not active, never assigned).
// The database applies the reason rule (migration 00019) and writes the
// history events (00021) for each row, as for one loan (on PostgreSQL its
// triggers run once per statement: 00023). loanArgs are the
// keys as given (command line, API), parsed per the task's key kind.
func (e *Engine) DisposeMany(ctx context.Context, taskName string, loanArgs []string, user, action string, after time.Duration, afterGiven bool, note DispositionNote) (*DisposedMany, error) {
	action, err := checkDisposeCall(taskName, user, action, after, afterGiven, note)
	if err != nil {
		return nil, err
	}
	if err := CheckDisposeLoans(loanArgs); err != nil {
		return nil, err
	}
	task, taskID, kind, loans, err := e.disposeTarget(ctx, taskName, loanArgs)
	if err != nil {
		return nil, err
	}
	// Two spellings of one key ("7" and "07" in an integer task) are one
	// loan: its row would be changed once, and the count never match.
	first := make(map[string]string, len(loans))
	for i, l := range loans {
		if other, ok := first[l]; ok {
			return nil, problem.Usagef("%s and %s name the same loan %s of task %s: name each loan once", quoteIfOdd(other), quoteIfOdd(loanArgs[i]), l, taskName)
		}
		first[l] = loanArgs[i]
	}
	p := engineio.DisposeLoansParams{Disposition: action, User: user, Reason: nullString(note.Reason), Note: nullString(note.Note)}
	if action == Return {
		p.ReturnAfterMS = sql.NullInt64{Int64: after.Milliseconds(), Valid: true}
	}
	err = e.disposeUntilDone(ctx, task, taskName, taskID, action, note.Reason, fmt.Sprintf("%d loans of task %s", len(loans), taskName),
		func(taskID int64) (bool, error) {
			p.TaskID = taskID
			// The whole transaction is the unit a deadlock victim runs again
			// (InnoDB, against a round inserting the task's work rows, as
			// for DisposeLoan): it changed nothing.
			var n int
			err := drivers.RetryDeadlockFor(ctx, e.driver, dispositionDeadlockBound, func() error {
				var err error
				n, err = e.disposeAll(ctx, p, loans)
				return err
			})
			return n == len(loans), err
		},
		// nil: every loan is active and the user's now, one assigned to
		// them again right after the UPDATE looked; it is sent again.
		func(task *Task, try int) error { return e.notDisposedMany(ctx, task, loans, user, try) })
	if err != nil {
		return nil, err
	}
	d := &DisposedMany{Task: taskName, User: user, Disposition: action, Reason: note.Reason, Note: note.Note,
		Count: len(loans), Loans: loankey.List(kind, loans)}
	if action == Return {
		d.After, d.AfterSecs, d.AfterMS = after, after.Seconds(), after.Milliseconds()
	}
	return d, nil
}

// disposeAll sends DisposeLoans over loans in one transaction, run by run,
// and commits only when every loan was changed; it returns how many were.
// p gives every value but the keys (IDs), which are each run's.
// A run is a JSON list under Oracle's bind limit (keyChunks: loanq_work's
// loan_id is text, whatever the task's key kind).
func (e *Engine) disposeAll(ctx context.Context, p engineio.DisposeLoansParams, loans []string) (int, error) {
	if len(loans) == 1 {
		// One row changes whole or not at all: the statement alone, in
		// autocommit, as Dispose sends it (BEGIN and COMMIT around it made a
		// batch of one three round trips; docs/scaling.md).
		res, err := e.sql().DisposeLoans.Exec(ctx, e.db, engineio.DisposeLoansParams{TaskID: p.TaskID, IDs: loankey.TextJSON(loans), User: p.User,
			Disposition: p.Disposition, ReturnAfterMS: p.ReturnAfterMS, Reason: p.Reason, Note: p.Note})
		if err != nil {
			return 0, err
		}
		n, err := res.RowsAffected()
		return int(n), err
	}
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("beginning the dispositions: %w", err)
	}
	defer tx.Rollback()
	n := 0
	for _, run := range keyChunks(loankey.Text, loans) {
		res, err := e.sql().DisposeLoans.Exec(ctx, tx, engineio.DisposeLoansParams{TaskID: p.TaskID, IDs: loankey.TextJSON(run), User: p.User,
			Disposition: p.Disposition, ReturnAfterMS: p.ReturnAfterMS, Reason: p.Reason, Note: p.Note})
		if err != nil {
			return 0, err
		}
		changed, err := res.RowsAffected()
		if err != nil {
			return 0, err
		}
		n += int(changed)
	}
	if n != len(loans) {
		return n, nil // rolled back (deferred): all or nothing
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	return n, nil
}

// NotDisposedError is a batch disposition refused whole because some of
// its loans are not the caller's active work in the task: nothing was
// changed. Refused lists them in the order given, each with Dispose's
// explanation for one loan (the first maxRefusalsExplained of them; the
// others with none read). A surface that must not say who holds another's
// loan (the API) uses APIText; Others says whether any is someone else's.
type NotDisposedError struct {
	Task    string
	Count   int // loans in the batch
	Refused []RefusedLoan
}

// RefusedLoan is one loan of a refused batch: Err is the explanation
// Dispose gives for it alone (a *NotAssigneeError inside a problem.Error
// when it is someone else's), nil when not read.
type RefusedLoan struct {
	Loan     string
	Assignee string // "" unless it is someone else's active work
	Err      error
}

func (e *NotDisposedError) Error() string { return e.text(false) }

// APIText is the error without the names of other loans' assignees.
func (e *NotDisposedError) APIText() string { return e.text(true) }

// Others reports whether any refused loan is someone else's active work.
func (e *NotDisposedError) Others() bool {
	for _, r := range e.Refused {
		if r.Assignee != "" {
			return true
		}
	}
	return false
}

func (e *NotDisposedError) text(api bool) string {
	var b strings.Builder
	if len(e.Refused) == 1 {
		fmt.Fprintf(&b, "nothing was dispositioned: 1 of the %d loans is not your active work in task %s: ", e.Count, e.Task)
	} else {
		fmt.Fprintf(&b, "nothing was dispositioned: %d of the %d loans are not your active work in task %s: ", len(e.Refused), e.Count, e.Task)
	}
	unread := 0
	for i, r := range e.Refused {
		if r.Err == nil {
			unread++
			continue
		}
		if i > 0 {
			b.WriteString("; ")
		}
		switch {
		case api && r.Assignee != "":
			fmt.Fprintf(&b, "loan %s is not yours: it is assigned to someone else", r.Loan)
		case api:
			b.WriteString(problem.APIText(r.Err))
		default:
			b.WriteString(r.Err.Error())
		}
	}
	if unread > 0 {
		fmt.Fprintf(&b, "; and %d more", unread)
	}
	// Where to look, unless an explanation (never assigned) already said it.
	switch {
	case strings.Contains(b.String(), "pipeline"):
	case api:
		b.WriteString(" (GET /api/v1/pipeline lists your active loans)")
	default:
		fmt.Fprintf(&b, " (`loanq pipeline --task %s` lists your active loans)", e.Task)
	}
	return b.String()
}

// notDisposedMany says why DisposeLoans did not change every loan: which
// of them are someone else's and which not active, read now. It returns
// nil when every loan is active and the user's after all (one was
// assigned to them again just after the UPDATE looked), for the caller to
// try again, at most a few times.
func (e *Engine) notDisposedMany(ctx context.Context, task *Task, loans []string, user string, try int) error {
	holder := make(map[string]string, len(loans))
	for _, run := range keyChunks(loankey.Text, loans) {
		rows, err := e.sql().ActiveAssigneesAmong.All(ctx, e.db, engineio.PoolIDsParams{TaskID: task.ID, IDs: loankey.TextJSON(run)})
		if err != nil {
			return fmt.Errorf("reading the assignments of %d loans of task %s: %w", len(loans), task.Name, err)
		}
		for _, r := range rows {
			holder[r.LoanID] = r.User
		}
	}
	nd := &NotDisposedError{Task: task.Name, Count: len(loans)}
	for _, l := range loans {
		assignee, active := holder[l]
		if active && assignee == user {
			continue
		}
		r := RefusedLoan{Loan: l}
		if active {
			r.Assignee = assignee
		}
		if len(nd.Refused) < maxRefusalsExplained {
			if active {
				r.Err = notAssignee(task.Name, l, assignee, user)
			} else if r.Err = e.notActive(ctx, task, l); problem.KindOf(r.Err) != problem.Usage {
				return r.Err // the read failed
			}
		}
		nd.Refused = append(nd.Refused, r)
	}
	if len(nd.Refused) == 0 {
		if try >= 2 {
			return problem.Usagef("loans of task %s were dispositioned by another command just now", task.Name)
		}
		return nil
	}
	return &problem.Error{Kind: problem.Usage, Err: nd, API: nd.APIText()}
}
