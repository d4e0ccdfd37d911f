package dispatch

import (
	"context"
	"fmt"
	"github.com/loanq/loanq/loankey"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/problem"
)

// Dispositions the engine and supervisors record; processors use Complete,
// Return and Never (disposition.go).
const (
	// Expired: the work was active longer than the task's --max-hold and the
	// engine returned it to the queue while serving.
	Expired = "expired"
	// Reclaimed: a supervisor returned it by hand (`work reclaim`);
	// disposed_by names them.
	Reclaimed = "reclaimed"
)

// Bounds of --max-hold: shorter would take work from people who are still on
// it; a year is a typo guard.
const (
	MinMaxHold = time.Second
	MaxMaxHold = 366 * 24 * time.Hour
)

func validateMaxHold(d time.Duration) error {
	if d == 0 {
		return nil
	}
	if d < MinMaxHold || d > MaxMaxHold {
		return problem.Usagef("invalid --max-hold %s: give a duration between %s and %s (how old active work may get before it returns to the queue), or leave it out for never", d, MinMaxHold, MaxMaxHold)
	}
	return nil
}

// expire returns the task's active work older than its --max-hold to the
// queue (docs/algorithm.md, "Abandoned work: --max-hold"). The engine runs it
// as part of serving, under the task lock (inside the locked transaction, or
// while holding the lease, or inside a rows claim), before it counts per-user
// work and runs the criteria query: the expired loans are eligible again in
// that very run, and no daemon is needed. One UPDATE over an index range of
// the task's active rows by age; the database clock decides the age, and
// `disposition IS NULL` makes it lose cleanly to a disposition committed
// first.
func (e *Engine) expire(ctx context.Context, q drivers.Querier, task *Task) error {
	if task.MaxHold <= 0 {
		return nil
	}
	if _, err := e.sql().WorkExpire.Exec(ctx, q, engineio.WorkExpireParams{TaskID: task.ID, MaxHoldMS: task.MaxHold.Milliseconds()}); err != nil {
		return fmt.Errorf("returning work of task %s held longer than its max hold %s: %w", task.Name, task.MaxHold, err)
	}
	return nil
}

// ReclaimItem is one active assignment `work reclaim` returns (or, with
// --dry-run, would return).
type ReclaimItem struct {
	workID     int64
	LoanID     loankey.Key `json:"loan_id"`
	User       string      `json:"user"`
	AssignedAt time.Time   `json:"assigned_at"`
	AgeMS      int64       `json:"age_ms"`
}

// Reclaim is `work reclaim`: a supervisor returns the task's active work, of
// one user or all (user ""), at least olderThan old (database clock), to the
// queue. Each assignment ends as 'reclaimed' with disposed_by = supervisor;
// one that its holder disposed of meanwhile is left out. dryRun lists what
// would be returned and changes nothing.
func (e *Engine) Reclaim(ctx context.Context, taskName, supervisor, user string, olderThan time.Duration, dryRun bool) ([]ReclaimItem, error) {
	if err := validateUser(supervisor); err != nil {
		return nil, err
	}
	if user != "" {
		if err := validateUser(user); err != nil {
			return nil, problem.Paramf("--of", "of", "invalid %s %q: give the name of the user whose work to return", user)
		}
	}
	if olderThan < 0 {
		return nil, problem.Paramf("--older-than", "older_than", "invalid %s %s: give 0s or a positive duration", olderThan)
	}
	task, err := e.Task(ctx, taskName)
	if err != nil {
		return nil, err
	}
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("beginning the reclaim: %w", err)
	}
	defer tx.Rollback()
	rows, err := e.sql().WorkOlder.All(ctx, tx, engineio.WorkOlderParams{TaskID: task.ID, User: user, AgeMS: olderThan.Milliseconds()})
	if err != nil {
		return nil, fmt.Errorf("reading the active work of task %s: %w", task.Name, err)
	}
	out := []ReclaimItem{}
	for _, r := range rows {
		out = append(out, ReclaimItem{workID: r.ID, LoanID: task.key(r.LoanID), User: r.User, AssignedAt: r.AssignedAt.T, AgeMS: r.AgeS * 1000})
	}
	if dryRun {
		return out, nil
	}
	kept := out[:0]
	for _, it := range out {
		res, err := e.sql().WorkReclaim.Exec(ctx, tx, engineio.WorkReclaimParams{Supervisor: supervisor, ID: it.workID})
		if err != nil {
			return nil, fmt.Errorf("reclaiming loan %s from %s: %w", it.LoanID, it.User, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			kept = append(kept, it)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("committing the reclaim of task %s: %w", task.Name, err)
	}
	return kept, nil
}
