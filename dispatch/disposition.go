package dispatch

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/loanq/loanq/problem"
)

// Dispositions (SPEC §4).
const (
	Complete = "complete" // done; assignable again while it still matches
	Return   = "return"   // back to the queue once --after has passed
	Never    = "never"    // never assigned again for this task
)

// Disposed is the outcome of a disposition.
type Disposed struct {
	Task        string        `json:"task"`
	LoanID      int64         `json:"loan_id"`
	User        string        `json:"user"`
	Disposition string        `json:"disposition"`
	After       time.Duration `json:"-"`
	AfterSecs   float64       `json:"return_after_seconds,omitempty"`
}

// ParseAction checks a disposition name.
func ParseAction(s string) (string, error) {
	switch strings.ToLower(s) {
	case Complete, Return, Never:
		return strings.ToLower(s), nil
	}
	return "", problem.Usagef("unknown disposition %q: use complete, return or never", s)
}

// Dispose ends the user's active assignment of a loan in a task. Only the
// assignee may do it; the row keeps who, when and what as history.
func (e *Engine) Dispose(ctx context.Context, taskName string, loan int64, user, action string, after time.Duration, afterGiven bool) (*Disposed, error) {
	action, err := ParseAction(action)
	if err != nil {
		return nil, err
	}
	if err := validateUser(user); err != nil {
		return nil, err
	}
	if afterGiven && action != Return {
		return nil, problem.Usagef("--after only goes with return (a %s disposition has no return time)", action)
	}
	if after < 0 || after > MaxReturnWait {
		return nil, problem.Usagef("invalid --after %s: give a duration from 0s to 72h (e.g. 0s, 90m, 4h)", after)
	}
	task, err := e.Task(ctx, taskName)
	if err != nil {
		return nil, err
	}
	var workID int64
	var assignee string
	err = e.DB.QueryRowContext(ctx, e.sql().ActiveWork, task.ID, loan).Scan(&workID, &assignee)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, e.notActive(ctx, task, loan)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the assignment of loan %d: %w", loan, err)
	}
	if assignee != user {
		return nil, problem.Usagef("loan %d in task %s is assigned to %s, not to %s: only the assignee can disposition it", loan, task.Name, assignee, user)
	}
	var afterMS any
	if action == Return {
		afterMS = after.Milliseconds()
	}
	res, err := e.DB.ExecContext(ctx, e.sql().Dispose, action, afterMS, workID, user)
	if err != nil {
		return nil, fmt.Errorf("recording disposition %s of loan %d: %w", action, loan, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return nil, problem.Usagef("loan %d in task %s was dispositioned by another command just now", loan, task.Name)
	}
	d := &Disposed{Task: task.Name, LoanID: loan, User: user, Disposition: action}
	if action == Return {
		d.After, d.AfterSecs = after, after.Seconds()
	}
	return d, nil
}

func (e *Engine) notActive(ctx context.Context, task *Task, loan int64) error {
	var disp sql.NullString
	var who string
	err := e.DB.QueryRowContext(ctx, e.sql().LastWork, task.ID, loan).Scan(&disp, &who)
	if errors.Is(err, sql.ErrNoRows) {
		return problem.Usagef("loan %d has never been assigned in task %s: `loanq pipeline` lists your active loans", loan, task.Name)
	}
	if err != nil {
		return fmt.Errorf("reading the history of loan %d: %w", loan, err)
	}
	return problem.Usagef("loan %d in task %s is not active: its last assignment (to %s) was already dispositioned %s", loan, task.Name, who, disp.String)
}

// PipelineItem is one active assignment.
type PipelineItem struct {
	Task       string    `json:"task"`
	LoanID     int64     `json:"loan_id"`
	AssignedAt time.Time `json:"assigned_at"`
	AgeSeconds int64     `json:"age_seconds"`
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
	rows, err := e.DB.QueryContext(ctx, e.sql().Pipeline, user, taskName, taskName)
	if err != nil {
		return nil, fmt.Errorf("reading the pipeline of %s: %w", user, err)
	}
	defer rows.Close()
	out := []PipelineItem{}
	for rows.Next() {
		var it PipelineItem
		var at nullTime
		if err := rows.Scan(&it.Task, &it.LoanID, &at, &it.AgeSeconds); err != nil {
			return nil, fmt.Errorf("reading the pipeline of %s: %w", user, err)
		}
		it.AssignedAt = at.T
		out = append(out, it)
	}
	return out, rows.Err()
}
