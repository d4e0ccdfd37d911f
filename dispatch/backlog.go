package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
)

// Backlog is the number of loans waiting for a task: the rows its criteria
// match that are eligible for it (not active in the task, never
// dispositioned never, no return pending), counted by one statement. The
// criteria query's "loans found" is bounded by its row limit; this is not.
type Backlog struct {
	Loans int64 `json:"loans"`
	// CountedAt is when the count ended (this process's clock, UTC).
	CountedAt time.Time `json:"counted_at"`
	// AgeS is how old the count was when it was shown (0: counted now).
	AgeS int64 `json:"age_s"`
	// DurationMS is how long the count took: its cost to the database.
	DurationMS int64 `json:"duration_ms"`
}

// BacklogTimeout bounds one count: the statement reads every eligible row,
// and a count that runs longer is abandoned (its figure shown as unknown)
// rather than holding a connection for as long as the table takes.
var BacklogTimeout = 30 * time.Second

// CountBacklog counts the loans waiting for task now. An account that may not
// read the task's source (the dashboard role reads loanq's tables only) gets
// the database's refusal as an error: callers show the figure as unknown.
func (a *Admin) CountBacklog(ctx context.Context, task *Task) (*Backlog, error) {
	ctx, cancel := context.WithTimeout(ctx, BacklogTimeout)
	defer cancel()
	start := time.Now()
	var n int64
	if err := drivers.BacklogCount(a.driver.Dialect(), task.criteria()).QueryRow(ctx, a.db, engineio.TaskParams{TaskID: task.ID}).Scan(&n); err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("counting the backlog of task %s: stopped after %s (a count reads every eligible row)", task.Name, BacklogTimeout)
		}
		return nil, fmt.Errorf("counting the backlog of task %s: %w", task.Name, err)
	}
	end := time.Now()
	return &Backlog{Loans: n, CountedAt: end.UTC(), DurationMS: end.Sub(start).Milliseconds()}, nil
}

// Aged returns a copy of b with AgeS measured at now (nil stays nil).
func (b *Backlog) Aged(now time.Time) *Backlog {
	if b == nil {
		return nil
	}
	c := *b
	c.AgeS = int64(now.Sub(b.CountedAt) / time.Second)
	return &c
}
