package dispatch

import (
	"context"
	"fmt"
	"github.com/loanq/loanq/loankey"
	"sort"
	"time"

	"github.com/loanq/loanq/drivers/engineio"
)

// The supervisor view: everyone's active work (`loanq work list`) and the
// state of each task (`loanq task stats`). Read-only; ages and windows come
// from the database clock, never from the caller's.

// StatsWindow is how far back task stats count dispositions and runs.
const StatsWindow = 24 * time.Hour

// ActiveItem is one active assignment of anyone.
type ActiveItem struct {
	Task       string      `json:"task"`
	LoanID     loankey.Key `json:"loan_id"`
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
func (a *Admin) dbNow(ctx context.Context) (time.Time, error) {
	r, err := a.sql().Now.One(ctx, a.db, engineio.NoParams{})
	if err != nil {
		return time.Time{}, fmt.Errorf("reading the database clock: %w", err)
	}
	return r.Now.T, nil
}

// WorkList returns everyone's active work, oldest first. The filters are
// applied here, not in SQL: active work is what people hold right now (small),
// and one portable statement serves every dialect.
func (a *Admin) WorkList(ctx context.Context, f WorkFilter) ([]ActiveItem, error) {
	if f.Task != "" {
		if _, err := a.Task(ctx, f.Task); err != nil {
			return nil, err
		}
	}
	if f.User != "" {
		if err := validateUser(f.User); err != nil {
			return nil, err
		}
	}
	rows, err := a.superviseSQL().ActiveWorkAll.All(ctx, a.db, engineio.NoParams{})
	if err != nil {
		return nil, fmt.Errorf("reading active work: %w", err)
	}
	out := []ActiveItem{}
	for _, r := range rows {
		if (f.Task == "" || r.Task == f.Task) && (f.User == "" || r.User == f.User) {
			out = append(out, ActiveItem{Task: r.Task, User: r.User, AssignedAt: r.AssignedAt.T,
				LoanID: loankey.New(loankey.ParseKind(r.KeyKind), r.LoanID)})
		}
	}
	// The clock is read after the rows, so no age is negative.
	now, err := a.dbNow(ctx)
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
func (a *Admin) AddBacklogs(ctx context.Context, stats []*TaskStats) error {
	for _, s := range stats {
		t := s.task
		if t == nil {
			var err error
			if t, err = a.Task(ctx, s.Task); err != nil {
				return err
			}
		}
		b, err := a.CountBacklog(ctx, t)
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
func (a *Admin) Stats(ctx context.Context, taskName string) ([]*TaskStats, error) {
	var tasks []*Task
	if taskName != "" {
		t, err := a.Task(ctx, taskName)
		if err != nil {
			return nil, err
		}
		tasks = []*Task{t}
	} else {
		var err error
		if tasks, err = a.Tasks(ctx); err != nil {
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
		p, err := a.Pool(ctx, t)
		if err != nil {
			return nil, err
		}
		s.Pool = p
	}
	window := StatsWindow.Milliseconds()
	pending, err := a.superviseSQL().StatsPending.All(ctx, a.db, engineio.NoParams{})
	if err != nil {
		return nil, fmt.Errorf("task stats, pending requests: %w", err)
	}
	for _, r := range pending {
		if s := byName[r.Task]; s != nil {
			s.PendingRequests = r.N
		}
	}
	active, err := a.superviseSQL().StatsActiveByUser.All(ctx, a.db, engineio.NoParams{})
	if err != nil {
		return nil, fmt.Errorf("task stats, active work: %w", err)
	}
	for _, r := range active {
		if s := byName[r.Task]; s != nil {
			s.ActiveByUser = append(s.ActiveByUser, UserCount{User: r.User, Count: r.N})
			s.ActiveTotal += r.N
		}
	}
	disps, err := a.superviseSQL().StatsDispositions.All(ctx, a.db, windowParams{WindowMS: window})
	if err != nil {
		return nil, fmt.Errorf("task stats, dispositions: %w", err)
	}
	for _, r := range disps {
		if s := byName[r.Task]; s != nil {
			s.Dispositions[r.Disposition] = r.N
		}
	}
	durations := map[string][]int64{}
	served := map[string]int64{}
	runs, err := a.superviseSQL().StatsRuns.All(ctx, a.db, windowParams{WindowMS: window})
	if err != nil {
		return nil, fmt.Errorf("task stats, criteria-query runs: %w", err)
	}
	for _, r := range runs {
		durations[r.Task] = append(durations[r.Task], r.DurationMS)
		served[r.Task] += r.RequestsServed
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
