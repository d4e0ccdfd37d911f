package dispatch

import (
	"fmt"
	"time"

	"github.com/loanq/loanq/internal/flagvalue"
	"github.com/loanq/loanq/problem"
)

// The rules of a disposition that every surface applies, the command line
// (`loanq disposition`) and the HTTP API (POST …/disposition) alike:
// written once here, each surface keeping its own name for the return time
// in what it prints.

// ParseReturnAfter reads a return's time until the loan is back in the
// queue: a duration from 0s to MaxReturnWait.
func ParseReturnAfter(s string) (time.Duration, error) {
	return flagvalue.ReturnAfter(s, MaxReturnWait)
}

// CheckReturnTime refuses a return that does not say when the loan comes
// back (given: whether a return time was given at all). A default would
// hide a forgotten time: 0s would hand the loan straight back, a long one
// would park it. param is the return time as the caller's surface names it
// ("--after" on the command line, `"after"` in the API's body).
func CheckReturnTime(action string, given bool, param string) error {
	if action == Return && !given {
		return problem.Usagef("return needs %s: how long until the loan is back in the queue (0s to 72h)", param)
	}
	return nil
}

// NotAssigneeError is a disposition refused because the loan is actively
// assigned to another user: only the assignee may dispose of a loan
// (Dispose ends an assignment only if it is the caller's). Dispose returns
// it inside a problem.Usage error, whose text is this one, naming the
// assignee, as the command line prints it; a surface whose callers should
// not learn who holds another's loan (the API) finds it with errors.As and
// says it in its own words.
type NotAssigneeError struct {
	Task, Loan, Assignee, User string
}

func (e *NotAssigneeError) Error() string {
	return fmt.Sprintf("loan %s in task %s is assigned to %s, not to %s: only the assignee can disposition it", e.Loan, e.Task, e.Assignee, e.User)
}

// notAssignee is the error of Dispose for another user's loan: bad input
// (exit 2), carrying the NotAssigneeError.
func notAssignee(task, loan, assignee, user string) error {
	return &problem.Error{Kind: problem.Usage, Err: &NotAssigneeError{Task: task, Loan: loan, Assignee: assignee, User: user}}
}
