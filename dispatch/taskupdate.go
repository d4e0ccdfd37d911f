package dispatch

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/problem"
)

// TaskChange is the input of UpdateTask: nil fields keep their value.
// HoldLimit 0 means the derived default, MaxHold 0 never, MaxActive 0 no cap.
type TaskChange struct {
	Source, Key, Where, Order *string
	MaxActive                 *int
	Lock                      *drivers.Strategy
	QueryDelay, LeaseTTL      *time.Duration
	HoldLimit, MaxHold        *time.Duration
	// Prefetch 0 turns the pool off; PrefetchTTL and PrefetchLow 0 mean
	// their defaults.
	Prefetch, PrefetchLow *int
	PrefetchTTL           *time.Duration
	// UpdatedBy is who makes the change (recorded on the task; not a change
	// by itself).
	UpdatedBy string
	// AllowWideLocks: as TaskSpec's (not a change by itself).
	AllowWideLocks bool
	// Priority, Show, Link: as TaskSpec's; an empty Show or Link clears it.
	Priority *int
	Show     *[]string
	Link     *string
	// Governance: who may work the task, its four-eyes rule (governance.go).
	Governance GovernanceChange
}

func (c TaskChange) empty() bool {
	return c.Source == nil && c.Key == nil && c.Where == nil && c.Order == nil && c.MaxActive == nil &&
		c.Lock == nil && c.QueryDelay == nil && c.LeaseTTL == nil && c.HoldLimit == nil && c.MaxHold == nil &&
		c.Prefetch == nil && c.PrefetchLow == nil && c.PrefetchTTL == nil &&
		c.Priority == nil && c.Show == nil && c.Link == nil &&
		c.Governance.empty()
}

// Check checks each change on its own, without a database (commands call it
// before they connect): what depends on the task's other settings (a
// --prefetch-low against the pool's size, a --hold-limit against the query
// delay) or on the database is checked by UpdateTask on the whole
// definition.
func (c TaskChange) Check() error {
	if c.empty() {
		return problem.Usagef("nothing to change: give at least one of the options of task create (e.g. --where, --order, --max-active, --max-hold)")
	}
	if c.Where != nil && strings.TrimSpace(*c.Where) == "" {
		return problem.Usagef("invalid --where \"\": give the SQL condition that selects the task's loans")
	}
	var checks []error
	if c.Source != nil {
		checks = append(checks, checkSource(*c.Source))
	}
	if c.Key != nil {
		checks = append(checks, checkKey(*c.Key))
	}
	if c.MaxActive != nil {
		checks = append(checks, checkMaxActive(*c.MaxActive))
	}
	if c.QueryDelay != nil {
		checks = append(checks, checkQueryDelay(*c.QueryDelay))
	}
	if c.LeaseTTL != nil {
		checks = append(checks, checkLeaseTTL(*c.LeaseTTL))
	}
	if c.HoldLimit != nil {
		checks = append(checks, validateHoldLimit(*c.HoldLimit, 0)) // against the query delay: UpdateTask
	}
	if c.MaxHold != nil {
		checks = append(checks, validateMaxHold(*c.MaxHold))
	}
	if c.Prefetch != nil {
		checks = append(checks, CheckPrefetchSize(*c.Prefetch))
	}
	if c.PrefetchLow != nil && *c.PrefetchLow < 0 {
		checks = append(checks, problem.Usagef("invalid --prefetch-low %d: give a low mark of 0 or more, below --prefetch", *c.PrefetchLow))
	}
	if c.PrefetchTTL != nil && *c.PrefetchTTL != 0 {
		checks = append(checks, checkPrefetchTTL(*c.PrefetchTTL))
	}
	if c.Priority != nil {
		checks = append(checks, checkPriority(*c.Priority)) // --link against --show: UpdateTask
	}
	checks = append(checks, c.Governance.Check())
	for _, err := range checks {
		if err != nil {
			return err // the first, in the order of task create's flags
		}
	}
	return nil
}

// UpdateTask is `task update`: the task's definition with the changes
// applied is validated as at create, its criteria are run against the
// database (and checked lockable row by row for --lock rows) before anything
// is stored, then stored in one statement. Active work, requests and history
// are kept: they reference the task by id.
func (a *Admin) UpdateTask(ctx context.Context, name string, c TaskChange) (*Task, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	t, err := a.Task(ctx, name)
	if err != nil {
		return nil, err
	}
	s := TaskSpec{Name: t.Name, Source: t.Source, Key: t.Key, Where: t.Where, Order: t.Order, MaxActive: t.MaxActive,
		Lock: t.Lock, QueryDelay: t.QueryDelay, LeaseTTL: t.LeaseTTL, HoldLimit: t.HoldLimit, MaxHold: t.MaxHold, CreatedBy: t.CreatedBy,
		Prefetch: t.Prefetch, PrefetchTTL: t.PrefetchTTL, PrefetchLow: t.PrefetchLow,
		Priority: t.Priority, Show: t.Show, Link: t.Link}
	c.applyDisplay(&s) // details.go
	if c.Prefetch != nil {
		s.Prefetch = *c.Prefetch
		if s.Prefetch != t.Prefetch && c.PrefetchLow == nil {
			s.PrefetchLow = 0 // the default for the new size
		}
	}
	if c.PrefetchLow != nil {
		s.PrefetchLow = *c.PrefetchLow
	}
	if c.PrefetchTTL != nil {
		s.PrefetchTTL = *c.PrefetchTTL
	}
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&s.Source, c.Source)
	set(&s.Key, c.Key)
	set(&s.Where, c.Where)
	set(&s.Order, c.Order)
	if c.MaxActive != nil {
		s.MaxActive = *c.MaxActive
	}
	if c.Lock != nil {
		s.Lock = *c.Lock
	}
	for _, p := range []struct {
		dst *time.Duration
		v   *time.Duration
	}{{&s.QueryDelay, c.QueryDelay}, {&s.LeaseTTL, c.LeaseTTL}, {&s.HoldLimit, c.HoldLimit}, {&s.MaxHold, c.MaxHold}} {
		if p.v != nil {
			*p.dst = *p.v
		}
	}
	if c.LeaseTTL != nil && *c.LeaseTTL == 0 {
		return nil, problem.Usagef("invalid --lease-ttl 0s: give a duration between 1s and 24h")
	}
	if err := a.validateSpec(&s); err != nil {
		return nil, err
	}
	want := &Task{ID: t.ID, Name: s.Name, Source: s.Source, Key: s.Key, Where: s.Where, Order: s.Order,
		MaxActive: s.MaxActive, Lock: s.Lock, QueryDelay: s.QueryDelay, LeaseTTL: s.LeaseTTL, HoldLimit: s.HoldLimit, MaxHold: s.MaxHold,
		Prefetch: s.Prefetch, PrefetchTTL: s.PrefetchTTL, PrefetchLow: s.PrefetchLow,
		Priority: s.Priority, Show: s.Show, Link: s.Link}
	if err := a.checkCriteria(ctx, want); err != nil {
		return nil, err
	}
	if err := a.checkDetails(ctx, want); err != nil { // details.go
		return nil, err
	}
	verdict := ""
	if s.Lock == drivers.Rows {
		if verdict, err = a.checkLockable(ctx, want, c.AllowWideLocks); err != nil {
			return nil, err
		}
	}
	// A task deleted meanwhile makes taskByID below answer "unknown task".
	// (RowsAffected is no witness: MySQL counts only rows whose values
	// changed.)
	// The definition and its pool in one transaction; a pool of another
	// size or none starts afresh (its candidates were found for the old
	// definition).
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("updating task %s: %w", t.Name, err)
	}
	defer tx.Rollback()
	_, err = a.sql().TaskUpdate.Exec(ctx, tx, engineio.TaskUpdateParams{ID: t.ID,
		Source: s.Source, Key: s.Key, Criteria: s.Where, Order: s.Order, MaxActive: positive(int64(s.MaxActive)),
		LockStrategy: string(s.Lock), QueryDelayMS: s.QueryDelay.Milliseconds(), LeaseTTLMS: s.LeaseTTL.Milliseconds(),
		HoldLimitMS: positive(s.HoldLimit.Milliseconds()), MaxHoldMS: positive(s.MaxHold.Milliseconds()),
		UpdatedBy: c.UpdatedBy, KeyKind: want.KeyKind.String()})
	if err != nil {
		return nil, fmt.Errorf("updating task %s: %w", t.Name, err)
	}
	size, ttl, low := prefetchValues(s.Prefetch, s.PrefetchTTL, s.PrefetchLow)
	if _, err := a.sql().TaskSetPrefetch.Exec(ctx, tx, engineio.TaskPrefetchParams{ID: t.ID, Prefetch: size, TTLMS: ttl, Low: low}); err != nil {
		return nil, fmt.Errorf("updating the candidate pool of task %s: %w", t.Name, err)
	}
	if _, err := a.sql().PoolClear.Exec(ctx, tx, engineio.TaskParams{TaskID: t.ID}); err != nil {
		return nil, fmt.Errorf("emptying the candidate pool of task %s: %w", t.Name, err)
	}
	if err := a.storeDisplay(ctx, tx, t.ID, s.Priority, s.Show, s.Link); err != nil { // details.go
		return nil, fmt.Errorf("updating task %s: %w", t.Name, err)
	}
	if err := a.applyGovernance(ctx, tx, t.ID, t.Name, c.Governance); err != nil { // governance.go
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("updating task %s: %w", t.Name, err)
	}
	if err := a.keepVerdict(ctx, t.ID, verdict); err != nil { // rows.go
		return nil, err
	}
	return a.taskByID(ctx, t.ID)
}
