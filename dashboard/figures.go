// Package dashboard is `loanq serve`: a read-only dashboard page, Prometheus
// metrics and a health check over loanq's own tables (docs/dashboard.md).
//
// Every figure comes from one refresh: a fixed set of read-only statements
// (the Dash… statements of drivers.Statements),
// cached for a short interval so that any number of browsers and scrapers
// cost the database one refresh per interval. No task's criteria query is
// ever run here.
package dashboard

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/problem"
)

// Dispositions are the disposition kinds (docs/algorithm.md), in display order.
var Dispositions = []string{"complete", "return", "never"}

// recentRuns is how many criteria-query runs per task the chart shows.
const recentRuns = 40

// Snapshot is one refresh's figures. Durations and ages are integer
// milliseconds (whole seconds from the database clock, times 1000).
type Snapshot struct {
	Database     string        `json:"database"` // the dialect, never the DSN
	HoldMS       int64         `json:"hold_ms"`  // 0: no hold highlighting
	Tasks        []*TaskFigure `json:"tasks"`
	Users        []*UserFigure `json:"users"`
	Refresh      Cost          `json:"refresh"`
	RefreshedAt  time.Time     `json:"refreshed_at"` // this node's clock: when the figures were read
	TotalPending int           `json:"total_pending"`
	TotalActive  int           `json:"total_active"`
	TotalOver    int           `json:"total_over_hold"`
	TotalToday   int           `json:"total_done_today"`

	byID map[int64]*TaskFigure
}

// Cost is what one refresh cost the database.
type Cost struct {
	Queries    int   `json:"queries"`
	DurationMS int64 `json:"duration_ms"`
	DurationUS int64 `json:"duration_us"`
	// StepsUS is the time of each statement (the latest runs: all tasks
	// together), in microseconds, named after its drivers.Statements field.
	StepsUS map[string]int64 `json:"steps_us"`
}

// TaskFigure is one task's line of the dashboard.
type TaskFigure struct {
	ID               int64          `json:"-"`
	Name             string         `json:"name"`
	Lock             string         `json:"lock"`
	MaxActive        int            `json:"max_active"`
	EligibleLastRun  *int           `json:"eligible_at_last_run"` // rows_found of the latest run; null before any
	LastRunAgeMS     *int64         `json:"last_run_age_ms"`
	Pending          int            `json:"pending"`
	OldestPendingMS  int64          `json:"oldest_pending_ms"`
	Active           int            `json:"active"`
	OldestActiveMS   int64          `json:"oldest_active_ms"`
	OverHold         int            `json:"over_hold"`
	DoneToday        map[string]int `json:"done_today"`
	DoneTotal        map[string]int `json:"done_total"`
	Runs             int64          `json:"runs"`
	RunDurationMS    int64          `json:"run_duration_total_ms"`
	RequestsServed   int64          `json:"requests_served"`
	LoansAssigned    int64          `json:"loans_assigned"`
	RequestsPerRun   float64        `json:"requests_per_run"`
	RecentRuns       []Run          `json:"recent_runs"` // newest first
	DurationBuckets  []int64        `json:"-"`           // runs per bucket of drivers.RunDurationBucketsMS (+Inf last), not cumulative
	DurationBucketsC []uint64       `json:"-"`
}

// Run is one criteria-query run as the chart shows it.
type Run struct {
	ID             int64 `json:"id"`
	AgeMS          int64 `json:"age_ms"`
	DurationMS     int64 `json:"duration_ms"`
	RowsFound      int   `json:"rows_found"`
	RequestsServed int   `json:"requests_served"`
	LoansAssigned  int   `json:"loans_assigned"`
}

// UserFigure is one processor's line of the per-user table.
type UserFigure struct {
	User           string         `json:"user"`
	Active         int            `json:"active"`
	OldestActiveMS int64          `json:"oldest_active_ms"`
	OverHold       int            `json:"over_hold"`
	DoneToday      int            `json:"done_today"`
	ActiveByTask   map[string]int `json:"active_by_task"`
}

// Source reads and caches the figures of one database.
type Source struct {
	DB     *sql.DB
	Driver drivers.Driver
	Engine *dispatch.Engine
	// TTL is how long a snapshot is served before the next refresh.
	TTL time.Duration
	// Hold is the age past which active work is highlighted (0: never).
	Hold time.Duration

	mu        sync.Mutex
	last      *Snapshot
	err       error
	at        time.Time
	refreshes int

	// The dispositions below floor: fixed history, counted once per floor.
	floor   int64
	floorAt time.Time
	below   map[doneKey]int
	// The criteria-query runs below runFloor, likewise.
	runFloor int64
	runBelow map[runKey]runSums
}

type runKey struct{ task, bucket int64 }

type runSums struct{ runs, durationMS, served, assigned int64 }

// floorEvery is how often the floor id is raised (one read of the whole
// work history); floorSlack ids below it are still counted at every refresh,
// so a row whose insert committed after a higher id's is not lost.
const floorEvery = time.Hour

var floorSlack int64 = 1000 // a variable for the tests, which set it to 0

type doneKey struct {
	task       int64
	user, kind string
}

// Refreshes is how many times the figures were read from the database.
func (s *Source) Refreshes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refreshes
}

// Get returns the cached snapshot, refreshing it when older than TTL. Callers
// arriving during a refresh wait for it and share its result.
func (s *Source) Get(ctx context.Context) (*Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.at.IsZero() && time.Since(s.at) < s.TTL {
		return s.last, s.err
	}
	snap, err := s.refresh(ctx)
	s.refreshes++
	s.at = time.Now()
	if err != nil {
		// Keep serving the last good figures alongside the error.
		s.err = err
		return s.last, err
	}
	s.last, s.err = snap, nil
	return snap, nil
}

// queryCounter counts the statements one refresh sends.
type queryCounter struct {
	db    *sql.DB
	n     int
	steps map[string]int64
}

// step times one part of a refresh.
func (q *queryCounter) step(name string, fn func() error) error {
	start := time.Now()
	err := fn()
	if q.steps != nil {
		q.steps[name] += time.Since(start).Microseconds()
	}
	return err
}

func (s *Source) refresh(ctx context.Context) (*Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	st := s.Driver.Statements()
	q := &queryCounter{db: s.DB, steps: map[string]int64{}}
	snap := &Snapshot{Database: s.Driver.Name(), HoldMS: s.Hold.Milliseconds(), byID: map[int64]*TaskFigure{}}

	q.n++
	var tasks []*dispatch.Task
	err := q.step("TaskList", func() (err error) {
		tasks, err = s.Engine.Tasks(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the tasks: %w", err)
	}
	for _, t := range tasks {
		f := &TaskFigure{ID: t.ID, Name: t.Name, Lock: string(t.Lock), MaxActive: t.MaxActive,
			DoneToday: zeroKinds(), DoneTotal: zeroKinds(),
			DurationBuckets: make([]int64, len(drivers.RunDurationBucketsMS)+1), RecentRuns: []Run{}}
		snap.Tasks = append(snap.Tasks, f)
		snap.byID[t.ID] = f
	}
	users := map[string]*UserFigure{}
	user := func(name string) *UserFigure {
		u := users[name]
		if u == nil {
			u = &UserFigure{User: name, ActiveByTask: map[string]int{}}
			users[name] = u
		}
		return u
	}

	// Pending requests.
	err = q.step("DashPending", func() error {
		return each(ctx, q, &st.DashPending, drivers.NoParams{}, func(r *sql.Rows) error {
			var id int64
			var n int
			var age sql.NullInt64
			if err := r.Scan(&id, &n, &age); err != nil {
				return err
			}
			if f := snap.byID[id]; f != nil {
				f.Pending, f.OldestPendingMS = n, age.Int64*1000
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("reading pending requests: %w", err)
	}

	// Active work per task and user.
	hold := int64(s.Hold / time.Second)
	if hold <= 0 {
		hold = 1 << 50 // no limit: nothing is that old
	}
	err = q.step("DashActive", func() error {
		return each(ctx, q, &st.DashActive, drivers.DashActiveParams{HoldSeconds: hold}, func(r *sql.Rows) error {
			var id int64
			var name string
			var n, over int
			var age sql.NullInt64
			if err := r.Scan(&id, &name, &n, &age, &over); err != nil {
				return err
			}
			f := snap.byID[id]
			if f == nil {
				return nil
			}
			ms := age.Int64 * 1000
			f.Active += n
			f.OverHold += over
			f.OldestActiveMS = max(f.OldestActiveMS, ms)
			u := user(name)
			u.Active += n
			u.OverHold += over
			u.OldestActiveMS = max(u.OldestActiveMS, ms)
			u.ActiveByTask[f.Name] += n
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("reading active work: %w", err)
	}

	// Dispositions, in all and today: the fixed part below the floor id,
	// then a primary-key range from the floor up.
	if err := s.raiseFloor(ctx, q); err != nil {
		return nil, fmt.Errorf("reading the work history: %w", err)
	}
	for k, n := range s.below {
		if f := snap.byID[k.task]; f != nil {
			f.DoneTotal[k.kind] += n
		}
	}
	err = q.step("DashDone", func() error {
		return each(ctx, q, &st.DashDone, drivers.FloorParams{Floor: s.floor}, func(r *sql.Rows) error {
			var id int64
			var name, kind string
			var total, today int
			if err := r.Scan(&id, &name, &kind, &total, &today); err != nil {
				return err
			}
			f := snap.byID[id]
			if f == nil {
				return nil
			}
			f.DoneTotal[kind] += total
			f.DoneToday[kind] += today
			if today > 0 {
				user(name).DoneToday += today
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("reading dispositions: %w", err)
	}

	// Criteria-query runs: totals and the duration histogram, the fixed
	// part below the floor plus a primary-key range from it.
	sums := map[runKey]runSums{}
	for k, v := range s.runBelow {
		sums[k] = v
	}
	err = q.step("DashRunHistogram", func() error {
		return scanRuns(ctx, q, &st.DashRunHistogram, s.runFloor, sums)
	})
	if err != nil {
		return nil, fmt.Errorf("reading the criteria-query log: %w", err)
	}
	for k, v := range sums {
		f := snap.byID[k.task]
		if f == nil || k.bucket < 0 || int(k.bucket) >= len(f.DurationBuckets) {
			continue
		}
		f.DurationBuckets[k.bucket] += v.runs
		f.Runs += v.runs
		f.RunDurationMS += v.durationMS
		f.RequestsServed += v.served
		f.LoansAssigned += v.assigned
	}

	// The latest runs of each task, through the (task_id, id) index.
	for _, f := range snap.Tasks {
		if f.Runs == 0 {
			continue
		}
		err = q.step("DashRuns", func() error {
			return each(ctx, q, &st.DashRuns, drivers.TaskLimitParams{TaskID: f.ID, Limit: recentRuns}, func(r *sql.Rows) error {
				var x Run
				if err := r.Scan(&x.ID, &x.AgeMS, &x.DurationMS, &x.RowsFound, &x.RequestsServed, &x.LoansAssigned); err != nil {
					return err
				}
				x.AgeMS *= 1000
				f.RecentRuns = append(f.RecentRuns, x)
				return nil
			})
		})
		if err != nil {
			return nil, fmt.Errorf("reading the runs of task %s: %w", f.Name, err)
		}
		if len(f.RecentRuns) > 0 {
			last := f.RecentRuns[0]
			f.EligibleLastRun, f.LastRunAgeMS = &last.RowsFound, &last.AgeMS
		}
	}

	for _, f := range snap.Tasks {
		if f.Runs > 0 {
			f.RequestsPerRun = float64(f.RequestsServed) / float64(f.Runs)
		}
		var cum uint64
		f.DurationBucketsC = make([]uint64, len(f.DurationBuckets))
		for i, n := range f.DurationBuckets {
			cum += uint64(n)
			f.DurationBucketsC[i] = cum
		}
		snap.TotalPending += f.Pending
		snap.TotalActive += f.Active
		snap.TotalOver += f.OverHold
		for _, n := range f.DoneToday {
			snap.TotalToday += n
		}
	}
	for _, u := range users {
		snap.Users = append(snap.Users, u)
	}
	sort.Slice(snap.Users, func(i, j int) bool {
		a, b := snap.Users[i], snap.Users[j]
		if a.OldestActiveMS != b.OldestActiveMS {
			return a.OldestActiveMS > b.OldestActiveMS
		}
		return a.User < b.User
	})
	if snap.Tasks == nil {
		snap.Tasks = []*TaskFigure{}
	}
	if snap.Users == nil {
		snap.Users = []*UserFigure{}
	}
	took := time.Since(start)
	snap.Refresh = Cost{Queries: q.n, DurationMS: took.Milliseconds(), DurationUS: took.Microseconds(), StepsUS: q.steps}
	snap.RefreshedAt = time.Now().UTC()
	return snap, nil
}

// raiseFloor reads a new floor id and the dispositions below it, at the
// first refresh and then once per floorEvery. Below the floor every row had
// ended before today when it was read (the lowest active id and the lowest
// id ended today are above it), and an ended row never changes, so those
// counts stay right however long the floor is kept; only the range the
// refreshes read grows.
func (s *Source) raiseFloor(ctx context.Context, q *queryCounter) error {
	if s.below != nil && time.Since(s.floorAt) < floorEvery {
		return nil
	}
	st := s.Driver.Statements()
	var active, today, maxID sql.NullInt64
	err := q.step("DashDoneFloor", func() error {
		q.n++
		return st.DashDoneFloor.QueryRow(ctx, s.DB, drivers.NoParams{}).Scan(&active, &today, &maxID)
	})
	if err != nil {
		return err
	}
	floor := maxID.Int64 + 1
	for _, v := range []sql.NullInt64{active, today} {
		if v.Valid && v.Int64 < floor {
			floor = v.Int64
		}
	}
	floor = max(floor-floorSlack, 0)
	below := map[doneKey]int{}
	err = q.step("DashDoneBefore", func() error {
		return each(ctx, q, &st.DashDoneBefore, drivers.FloorParams{Floor: floor}, func(r *sql.Rows) error {
			var k doneKey
			var n int
			if err := r.Scan(&k.task, &k.user, &k.kind, &n); err != nil {
				return err
			}
			below[k] += n
			return nil
		})
	})
	if err != nil {
		return err
	}
	var maxRun sql.NullInt64
	err = q.step("DashRunMaxID", func() error {
		q.n++
		return st.DashRunMaxID.QueryRow(ctx, s.DB, drivers.NoParams{}).Scan(&maxRun)
	})
	if err != nil {
		return err
	}
	runFloor := max(maxRun.Int64+1-floorSlack, 0)
	runBelow := map[runKey]runSums{}
	err = q.step("DashRunHistogramBelow", func() error {
		return scanRuns(ctx, q, &st.DashRunHistogramBelow, runFloor, runBelow)
	})
	if err != nil {
		return err
	}
	s.floor, s.below, s.floorAt = floor, below, time.Now()
	s.runFloor, s.runBelow = runFloor, runBelow
	return nil
}

// scanRuns adds the rows of a run histogram statement to sums.
func scanRuns(ctx context.Context, q *queryCounter, stmt *drivers.Stmt[drivers.FloorParams], floor int64, sums map[runKey]runSums) error {
	return each(ctx, q, stmt, drivers.FloorParams{Floor: floor}, func(r *sql.Rows) error {
		var k runKey
		var runs int64
		var dur, served, assigned sql.NullFloat64
		if err := r.Scan(&k.task, &k.bucket, &runs, &dur, &served, &assigned); err != nil {
			return err
		}
		v := sums[k]
		v.runs += runs
		v.durationMS += int64(dur.Float64)
		v.served += int64(served.Float64)
		v.assigned += int64(assigned.Float64)
		sums[k] = v
		return nil
	})
}

func zeroKinds() map[string]int {
	m := map[string]int{}
	for _, k := range Dispositions {
		m[k] = 0
	}
	return m
}

// each runs a read-only statement, counted in q, and calls fn for every row.
func each[P any](ctx context.Context, q *queryCounter, stmt *drivers.Stmt[P], p P, fn func(*sql.Rows) error) error {
	q.n++
	rows, err := stmt.Query(ctx, q.db, p)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Ping answers whether the database answers, for /healthz. It reads the
// database clock, bypassing the cache.
func (s *Source) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var v any
	return s.Driver.Statements().Now.QueryRow(ctx, s.DB, drivers.NoParams{}).Scan(&v)
}

// TaskDetail is the /tasks/NAME page's data.
type TaskDetail struct {
	Task         *dispatch.Task
	Figure       *TaskFigure
	Runs         []dispatch.QueryRun
	Dispositions []Disposition
	Hold         time.Duration
}

// Disposition is one ended assignment.
type Disposition struct {
	Loan   int64
	User   string
	Kind   string
	AgeMS  int64
	HeldMS int64
}

// Task reads one task's page: its definition, latest runs and dispositions.
// It is not cached: one page view, four indexed reads.
func (s *Source) Task(ctx context.Context, name string) (*TaskDetail, error) {
	// Found in the list rather than by the CLI's lookup, which refuses names
	// the CLI would not create: a task row written otherwise still shows.
	tasks, err := s.Engine.Tasks(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the tasks: %w", err)
	}
	var t *dispatch.Task
	for _, x := range tasks {
		if x.Name == name {
			t = x
		}
	}
	if t == nil {
		return nil, problem.Usagef("unknown task %q", name)
	}
	d := &TaskDetail{Task: t, Hold: s.Hold}
	if d.Runs, err = s.Engine.Runs(ctx, t); err != nil {
		return nil, fmt.Errorf("reading the runs of task %s: %w", name, err)
	}
	q := &queryCounter{db: s.DB}
	err = each(ctx, q, &s.Driver.Statements().DashDispositions, drivers.TaskLimitParams{TaskID: t.ID, Limit: 15}, func(r *sql.Rows) error {
		var x Disposition
		var age, held sql.NullInt64
		if err := r.Scan(&x.Loan, &x.User, &x.Kind, &age, &held); err != nil {
			return err
		}
		x.AgeMS, x.HeldMS = age.Int64*1000, held.Int64*1000
		d.Dispositions = append(d.Dispositions, x)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the dispositions of task %s: %w", name, err)
	}
	snap, err := s.Get(ctx)
	if snap != nil {
		d.Figure = snap.byID[t.ID]
	}
	if d.Figure == nil && err == nil {
		d.Figure = &TaskFigure{Name: t.Name, DoneToday: zeroKinds(), DoneTotal: zeroKinds()}
	}
	return d, nil
}
