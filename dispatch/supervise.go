package dispatch

import (
	"database/sql"

	"context"
	"fmt"
	"sort"
	"time"

	"github.com/loanq/loanq/drivers"
)

// The supervisor view: everyone's active work (`loanq work list`) and the
// state of each task (`loanq task stats`). Read-only; ages and windows come
// from the database clock, never from the caller's.

// StatsWindow is how far back task stats count dispositions and runs.
const StatsWindow = 24 * time.Hour

// ActiveItem is one active assignment of anyone.
type ActiveItem struct {
	Task       string      `json:"task"`
	LoanID     drivers.Key `json:"loan_id"`
	User       string      `json:"user"`
	AssignedAt time.Time   `json:"assigned_at"`
	AgeMS      int64       `json:"age_ms"`
}

// WorkFilter narrows WorkList; zero values mean "any".
type WorkFilter struct {
	Task      string
	User      string
	OlderThan time.Duration
}

// dbNow reads the database clock.
func (e *Engine) dbNow(ctx context.Context) (time.Time, error) {
	var v any
	if err := e.sql().Now.QueryRow(ctx, e.DB, drivers.NoParams{}).Scan(&v); err != nil {
		return time.Time{}, fmt.Errorf("reading the database clock: %w", err)
	}
	return asTime(v)
}

// WorkList returns everyone's active work, oldest first. The filters are
// applied here, not in SQL: active work is what people hold right now (small),
// and one portable statement serves every dialect.
func (e *Engine) WorkList(ctx context.Context, f WorkFilter) ([]ActiveItem, error) {
	if f.Task != "" {
		if _, err := e.Task(ctx, f.Task); err != nil {
			return nil, err
		}
	}
	if f.User != "" {
		if err := validateUser(f.User); err != nil {
			return nil, err
		}
	}
	rows, err := e.sql().ActiveWorkAll.Query(ctx, e.DB, drivers.NoParams{})
	if err != nil {
		return nil, fmt.Errorf("reading active work: %w", err)
	}
	defer rows.Close()
	out := []ActiveItem{}
	for rows.Next() {
		var it ActiveItem
		var at nullTime
		var loan, kind string
		if err := rows.Scan(&it.Task, &loan, &it.User, &at, &kind); err != nil {
			return nil, fmt.Errorf("reading active work: %w", err)
		}
		it.AssignedAt, it.LoanID = at.T, drivers.NewKey(drivers.ParseKeyKind(kind), loan)
		if (f.Task == "" || it.Task == f.Task) && (f.User == "" || it.User == f.User) {
			out = append(out, it)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading active work: %w", err)
	}
	// The clock is read after the rows, so no age is negative.
	now, err := e.dbNow(ctx)
	if err != nil {
		return nil, err
	}
	kept := out[:0]
	for _, it := range out {
		it.AgeMS = max(now.Sub(it.AssignedAt).Milliseconds(), 0)
		if time.Duration(it.AgeMS)*time.Millisecond >= f.OlderThan {
			kept = append(kept, it)
		}
	}
	return kept, nil
}

// UserCount is one user's active work in a task.
type UserCount struct {
	User  string `json:"user"`
	Count int64  `json:"count"`
}

// RunStats summarises a task's criteria-query runs in the window.
type RunStats struct {
	Count int `json:"count"`
	// P50MS and P95MS are nearest-rank percentiles of the runs' durations.
	P50MS int64 `json:"p50_ms"`
	P95MS int64 `json:"p95_ms"`
	// RequestsPerRun is the mean number of requests one run served
	// (coalescing: above 1 means callers shared criteria queries).
	RequestsPerRun float64 `json:"requests_per_run"`
}

// TaskStats is the state of one task.
type TaskStats struct {
	Task            string           `json:"task"`
	PendingRequests int64            `json:"pending_requests"`
	ActiveTotal     int64            `json:"active_total"`
	ActiveByUser    []UserCount      `json:"active_by_user"`
	Dispositions    map[string]int64 `json:"dispositions"`
	Runs            RunStats         `json:"runs"`
	// Pool is the task's candidate pool (absent for a task without one).
	Pool *PoolStatus `json:"pool,omitempty"`
	// Backlog is the loans waiting for the task, counted by AddBacklogs (nil
	// when not counted, or when the count failed: BacklogError says why).
	Backlog      *Backlog `json:"backlog"`
	BacklogError string   `json:"backlog_error,omitempty"`

	// task is the task as Stats read it: AddBacklogs counts for it without
	// looking it up by name again (a stored name loanq would refuse as
	// input, planted by hand, is still reported, not an error).
	task *Task
}

// AddBacklogs counts the backlog of each task of stats, one statement per
// task (docs/scaling.md: its cost). A count that fails (an account that may
// not read the source, a count past BacklogTimeout) leaves that task's
// backlog unknown, with the reason, instead of failing the others.
func (e *Engine) AddBacklogs(ctx context.Context, stats []*TaskStats) error {
	for _, s := range stats {
		t := s.task
		if t == nil {
			var err error
			if t, err = e.Task(ctx, s.Task); err != nil {
				return err
			}
		}
		b, err := e.CountBacklog(ctx, t)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			s.BacklogError = err.Error()
			continue
		}
		s.Backlog = b
	}
	return nil
}

// Stats returns the stats of every task (taskName "") or of one, by name.
// Dispositions and runs count over the last StatsWindow.
func (e *Engine) Stats(ctx context.Context, taskName string) ([]*TaskStats, error) {
	var tasks []*Task
	if taskName != "" {
		t, err := e.Task(ctx, taskName)
		if err != nil {
			return nil, err
		}
		tasks = []*Task{t}
	} else {
		var err error
		if tasks, err = e.Tasks(ctx); err != nil {
			return nil, err
		}
	}
	byName := map[string]*TaskStats{}
	out := make([]*TaskStats, 0, len(tasks))
	for _, t := range tasks {
		s := &TaskStats{Task: t.Name, task: t, ActiveByUser: []UserCount{},
			Dispositions: map[string]int64{Complete: 0, Return: 0, Never: 0, Expired: 0, Reclaimed: 0}}
		byName[t.Name] = s
		out = append(out, s)
		p, err := e.Pool(ctx, t)
		if err != nil {
			return nil, err
		}
		s.Pool = p
	}
	window := StatsWindow.Milliseconds()
	if err := e.scanStats("pending requests", func() (*sql.Rows, error) {
		return e.sql().StatsPending.Query(ctx, e.DB, drivers.NoParams{})
	}, func(scan func(...any) error) error {
		var name string
		var n int64
		if err := scan(&name, &n); err != nil {
			return err
		}
		if s := byName[name]; s != nil {
			s.PendingRequests = n
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if err := e.scanStats("active work", func() (*sql.Rows, error) {
		return e.sql().StatsActiveByUser.Query(ctx, e.DB, drivers.NoParams{})
	}, func(scan func(...any) error) error {
		var name, user string
		var n int64
		if err := scan(&name, &user, &n); err != nil {
			return err
		}
		if s := byName[name]; s != nil {
			s.ActiveByUser = append(s.ActiveByUser, UserCount{User: user, Count: n})
			s.ActiveTotal += n
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if err := e.scanStats("dispositions", func() (*sql.Rows, error) {
		return e.sql().StatsDispositions.Query(ctx, e.DB, drivers.WindowParams{WindowMS: window})
	}, func(scan func(...any) error) error {
		var name, kind string
		var n int64
		if err := scan(&name, &kind, &n); err != nil {
			return err
		}
		if s := byName[name]; s != nil {
			s.Dispositions[kind] = n
		}
		return nil
	}); err != nil {
		return nil, err
	}
	durations := map[string][]int64{}
	served := map[string]int64{}
	if err := e.scanStats("criteria-query runs", func() (*sql.Rows, error) {
		return e.sql().StatsRuns.Query(ctx, e.DB, drivers.WindowParams{WindowMS: window})
	}, func(scan func(...any) error) error {
		var name string
		var ms, reqs int64
		if err := scan(&name, &ms, &reqs); err != nil {
			return err
		}
		durations[name] = append(durations[name], ms)
		served[name] += reqs
		return nil
	}); err != nil {
		return nil, err
	}
	for name, s := range byName {
		sort.Slice(s.ActiveByUser, func(i, j int) bool { return s.ActiveByUser[i].User < s.ActiveByUser[j].User })
		d := durations[name]
		if len(d) == 0 {
			continue
		}
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		s.Runs = RunStats{Count: len(d), P50MS: percentile(d, 50), P95MS: percentile(d, 95),
			RequestsPerRun: float64(served[name]) / float64(len(d))}
	}
	return out, nil
}

// percentile is the nearest-rank percentile p of sorted values.
func percentile(sorted []int64, p int) int64 {
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 · n), 1-based
	if rank < 1 {
		rank = 1
	}
	return sorted[rank-1]
}

// scanStats runs one statement (query) and hands each row to row.
func (e *Engine) scanStats(what string, query func() (*sql.Rows, error), row func(scan func(...any) error) error) error {
	rows, err := query()
	if err != nil {
		return fmt.Errorf("task stats, %s: %w", what, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := row(rows.Scan); err != nil {
			return fmt.Errorf("task stats, %s: %w", what, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("task stats, %s: %w", what, err)
	}
	return nil
}
