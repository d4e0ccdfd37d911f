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
	"errors"
	"fmt"
	"github.com/loanq/loanq/loankey"
	"sort"
	"sync"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
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
	// The page and /api/dashboard show the busiest tasks and processors
	// only (serve --max-tasks): how many there are and how many were left
	// out. The totals above and /metrics count them all.
	TasksTotal   int `json:"tasks_total"`
	TasksOmitted int `json:"tasks_omitted"`
	UsersTotal   int `json:"users_total"`
	UsersOmitted int `json:"users_omitted"`

	byID map[int64]*TaskFigure
}

// Bounded returns the snapshot with at most n tasks and n processors (n 0:
// all), the busiest ones, in their usual order (tasks by name, processors
// by their oldest item); the totals still count everything. A copy: the
// cached snapshot is shared.
func (s *Snapshot) Bounded(n int) *Snapshot {
	out := *s
	out.TasksTotal, out.UsersTotal = len(s.Tasks), len(s.Users)
	out.TasksOmitted, out.UsersOmitted = 0, 0
	if n <= 0 {
		return &out
	}
	if len(s.Tasks) > n {
		out.Tasks = busiest(s.Tasks, n, taskBusier)
		out.TasksOmitted = len(s.Tasks) - n
	}
	if len(s.Users) > n {
		out.Users = busiest(s.Users, n, userBusier)
		out.UsersOmitted = len(s.Users) - n
	}
	return &out
}

// busiest keeps the n busiest of list (busier(a, b): a goes first), in
// list's order.
func busiest[T any](list []T, n int, busier func(a, b T) bool) []T {
	idx := make([]int, len(list))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool { return busier(list[idx[i]], list[idx[j]]) })
	idx = idx[:n]
	sort.Ints(idx)
	out := make([]T, n)
	for i, k := range idx {
		out[i] = list[k]
	}
	return out
}

// taskBusier ranks tasks for the page: work held past the limit, waiting
// requests, active work, work done today, then the most recent criteria
// run; a task that never ran and has no work comes last.
func taskBusier(a, b *TaskFigure) bool {
	if a.OverHold != b.OverHold {
		return a.OverHold > b.OverHold
	}
	if a.Pending != b.Pending {
		return a.Pending > b.Pending
	}
	if a.Active != b.Active {
		return a.Active > b.Active
	}
	if x, y := sumKinds(a.DoneToday), sumKinds(b.DoneToday); x != y {
		return x > y
	}
	switch {
	case a.LastRunAgeMS == nil || b.LastRunAgeMS == nil:
		return a.LastRunAgeMS != nil && b.LastRunAgeMS == nil
	case *a.LastRunAgeMS != *b.LastRunAgeMS:
		return *a.LastRunAgeMS < *b.LastRunAgeMS
	}
	return false
}

// userBusier ranks processors likewise: past the limit, active, done today.
func userBusier(a, b *UserFigure) bool {
	if a.OverHold != b.OverHold {
		return a.OverHold > b.OverHold
	}
	if a.Active != b.Active {
		return a.Active > b.Active
	}
	return a.DoneToday > b.DoneToday
}

func sumKinds(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
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
	ID        int64  `json:"-"`
	Name      string `json:"name"`
	Lock      string `json:"lock"`
	MaxActive int    `json:"max_active"`
	// Allow: who may work the task (user names, @groups; empty: everyone);
	// NotWorkedIn: the tasks its four-eyes rule names (docs/governance.md).
	Allow       []string `json:"allow"`
	NotWorkedIn []string `json:"not_worked_in"`
	// MaxHoldMS is the task's --max-hold; null: active work never expires.
	MaxHoldMS       *int64 `json:"max_hold_ms"`
	EligibleLastRun *int   `json:"eligible_at_last_run"` // rows_found of the latest run; null before any
	LastRunAgeMS    *int64 `json:"last_run_age_ms"`
	// BacklogLoans is the loans waiting (serve's periodic count,
	// --backlog-every), BacklogAgeMS its age; null before a count or after
	// a failed one.
	BacklogLoans     *int64         `json:"backlog_loans"`
	BacklogAgeMS     *int64         `json:"backlog_age_ms"`
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
	DurationBuckets  []int64        `json:"-"`           // runs per bucket of runDurationBucketsMS (+Inf last), not cumulative
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
	Admin  *dispatch.Admin
	// TTL is how long a snapshot is served before the next refresh.
	TTL time.Duration
	// Hold is the age past which active work is highlighted (0: never).
	Hold time.Duration
	// Log, when set, receives a refresh's failure (the driver's text, which
	// may name the host and user: for the operator's log, never a page) and
	// the recovery after it; the same failure at most once a minute.
	Log func(string)

	mu        sync.Mutex
	last      *Snapshot // the latest figures read; kept when a refresh fails
	err       error     // the latest refresh's failure, nil after a success
	at        time.Time // when the latest refresh ended, successful or not
	okAt      time.Time // when the latest successful refresh ended
	took      time.Duration
	refreshes int
	flight    *flight // the refresh under way, nil when none
	logged    string
	loggedAt  time.Time

	// Read and written only by the refresh under way (one at a time).
	// The dispositions below floor: fixed history, counted once per floor.
	floor   int64
	floorAt time.Time
	below   map[doneKey]int
	// The criteria-query runs below runFloor, likewise.
	runFloor int64
	runBelow map[runKey]runSums

	// backlogs are the latest backlog counts by task id (CountBacklogs),
	// under mu.
	backlogs   map[int64]*dispatch.Backlog
	backlogErr map[int64]string // the latest failure logged, per task
}

// flight is one refresh under way; done is closed when it ends.
type flight struct {
	done  chan struct{}
	since time.Time
}

type runKey struct{ task, bucket int64 }

type runSums struct{ runs, durationMS, served, assigned int64 }

// floorEvery is how often the floor id is raised (one read of the whole
// work history); floorSlack ids below it are still counted at every refresh,
// so a row whose insert committed after a higher id's is not lost.
const floorEvery = time.Hour

var floorSlack int64 = 1000 // a variable for the tests, which set it to 0

// refreshTimeout bounds one refresh: past it the statements are cancelled
// and the refresh counts as failed.
const refreshTimeout = 30 * time.Second

type doneKey struct {
	task       int64
	user, kind string
}

// RecoveredMsg is what Log receives when a refresh succeeds after a failure.
const RecoveredMsg = "refresh: the database answers again"

// Refreshes is how many times the figures were read from the database.
func (s *Source) Refreshes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refreshes
}

// ErrSlow is Get's answer when the refresh it waited for had not ended when
// the caller's context did: the figures returned, if any, are older.
var ErrSlow = errors.New("the database has not answered yet")

// Get returns the cached snapshot, refreshing it when older than TTL.
// Callers arriving during a refresh wait for it and share its result: one
// refresh at a time, on one connection, whatever the number of viewers.
// The refresh runs on its own context (bounded by refreshTimeout), so a
// viewer who leaves does not cancel it for the others; a caller whose ctx
// ends first gets the last figures and ErrSlow.
func (s *Source) Get(ctx context.Context) (*Snapshot, error) {
	return s.get(ctx, s.TTL)
}

func (s *Source) get(ctx context.Context, maxAge time.Duration) (*Snapshot, error) {
	s.mu.Lock()
	if !s.at.IsZero() && time.Since(s.at) < maxAge {
		defer s.mu.Unlock()
		return s.last, s.err
	}
	f := s.start()
	s.mu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.last, ErrSlow
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, s.err
}

// start returns the refresh under way, starting one if there is none.
// s.mu is held.
func (s *Source) start() *flight {
	if s.flight != nil {
		return s.flight
	}
	f := &flight{done: make(chan struct{}), since: time.Now()}
	s.flight = f
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), refreshTimeout)
		snap, err := s.refresh(ctx)
		cancel()
		s.mu.Lock()
		defer s.mu.Unlock()
		now := time.Now()
		s.refreshes++
		s.at, s.took = now, now.Sub(f.since)
		s.flight = nil
		close(f.done)
		if err != nil {
			// Keep serving the last good figures alongside the error.
			s.err = err
			s.log(err.Error(), now)
			return
		}
		if s.err != nil || s.logged != "" {
			s.log("", now)
		}
		s.last, s.err, s.okAt = snap, nil, now
	}()
	return f
}

// log reports a failure (msg) or the recovery after one (msg ""): each
// change at once, the same failure again after a minute. s.mu is held.
func (s *Source) log(msg string, now time.Time) {
	if s.Log == nil || (msg == s.logged && now.Sub(s.loggedAt) < time.Minute) {
		return
	}
	if msg == "" {
		s.Log(RecoveredMsg)
	} else {
		s.Log("refresh failed: " + msg)
	}
	s.logged, s.loggedAt = msg, now
}

// Health is the state of the figures, for /healthz: read without touching
// the database.
type Health struct {
	// At is when the latest refresh ended (zero before the first), OK
	// whether it read the database, Took how long it took.
	At   time.Time
	OK   bool
	Took time.Duration
	// LastOK is when the latest successful refresh ended (zero: none yet).
	LastOK time.Time
	// RefreshingFor is how long the refresh under way has run (0: none).
	RefreshingFor time.Duration
}

// Health returns the state of the latest refresh. When the figures are
// older than maxAge it starts a refresh (unless one is under way: never
// more than one) and waits for it until ctx ends; it never reads the
// database itself.
func (s *Source) Health(ctx context.Context, maxAge time.Duration) Health {
	s.get(ctx, maxAge)
	s.mu.Lock()
	defer s.mu.Unlock()
	h := Health{At: s.at, OK: !s.at.IsZero() && s.err == nil, Took: s.took, LastOK: s.okAt}
	if s.flight != nil {
		h.RefreshingFor = time.Since(s.flight.since)
	}
	return h
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

// refresh reads every figure from the database, one reader per figure, and
// times the whole (Snapshot.Refresh: queries, time, time per statement).
func (s *Source) refresh(ctx context.Context) (*Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	r := &refreshing{s: s, st: s.sql(), q: &queryCounter{db: s.DB, steps: map[string]int64{}},
		snap:  &Snapshot{Database: s.Driver.Name(), HoldMS: s.Hold.Milliseconds(), byID: map[int64]*TaskFigure{}},
		users: map[string]*UserFigure{}}
	// One reader per figure, in this order: the tasks first (every other
	// figure is filed under its task), the floors before the history they
	// split.
	for _, read := range []func(context.Context) error{
		r.tasks, r.pending, r.active, r.dispositions, r.runHistogram, r.recentRuns,
	} {
		if err := read(ctx); err != nil {
			return nil, err
		}
	}
	snap := r.totals()
	took := time.Since(start)
	snap.Refresh = Cost{Queries: r.q.n, DurationMS: took.Milliseconds(), DurationUS: took.Microseconds(), StepsUS: r.q.steps}
	snap.RefreshedAt = time.Now().UTC()
	return snap, nil
}

// refreshing is one refresh under way: the snapshot its readers fill.
type refreshing struct {
	s     *Source
	st    *statements
	q     *queryCounter
	snap  *Snapshot
	users map[string]*UserFigure
}

// user returns the figure of a user, made on first use.
func (r *refreshing) user(name string) *UserFigure {
	u := r.users[name]
	if u == nil {
		u = &UserFigure{User: name, ActiveByTask: map[string]int{}}
		r.users[name] = u
	}
	return u
}

// tasks reads the task list: one figure per task.
func (r *refreshing) tasks(ctx context.Context) error {
	r.q.n++
	var tasks []*dispatch.Task
	err := r.q.step("TaskList", func() (err error) {
		tasks, err = r.s.Admin.Tasks(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("reading the tasks: %w", err)
	}
	for _, t := range tasks {
		f := &TaskFigure{ID: t.ID, Name: t.Name, Lock: string(t.Lock), MaxActive: t.MaxActive,
			Allow: []string{}, NotWorkedIn: []string{},
			MaxHoldMS: maxHoldMS(t.MaxHold),
			DoneToday: zeroKinds(), DoneTotal: zeroKinds(),
			DurationBuckets: make([]int64, len(runDurationBucketsMS)+1), RecentRuns: []Run{}}
		if t.Restricted || t.FourEyes { // one read more, only for such a task
			g, err := r.s.Admin.TaskGovernance(ctx, t)
			if err != nil {
				return err
			}
			if g.Allow != nil {
				f.Allow = g.Allow
			}
			if g.NotWorkedIn != nil {
				f.NotWorkedIn = g.NotWorkedIn
			}
		}
		r.snap.Tasks = append(r.snap.Tasks, f)
		r.snap.byID[t.ID] = f
	}
	return nil
}

// pending reads the pending requests per task and the oldest one's age.
func (r *refreshing) pending(ctx context.Context) error {
	err := r.q.step("DashPending", func() error {
		return each(ctx, r.q, &r.st.DashPending, engineio.NoParams{}, func(row pendingRow) error {
			if f := r.snap.byID[row.TaskID]; f != nil {
				f.Pending, f.OldestPendingMS = row.Pending, row.OldestS.Int64*1000
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("reading pending requests: %w", err)
	}
	return nil
}

// active reads the active work per task and user, and what is held past
// the hold limit.
func (r *refreshing) active(ctx context.Context) error {
	hold := int64(r.s.Hold / time.Second)
	if hold <= 0 {
		hold = 1 << 50 // no limit: nothing is that old
	}
	err := r.q.step("DashActive", func() error {
		return each(ctx, r.q, &r.st.DashActive, activeParams{HoldSeconds: hold}, func(row activeRow) error {
			id, name, n, age, over := row.TaskID, row.User, row.Active, row.OldestS, row.Held
			f := r.snap.byID[id]
			if f == nil {
				return nil
			}
			ms := age.Int64 * 1000
			f.Active += n
			f.OverHold += over
			f.OldestActiveMS = max(f.OldestActiveMS, ms)
			u := r.user(name)
			u.Active += n
			u.OverHold += over
			u.OldestActiveMS = max(u.OldestActiveMS, ms)
			u.ActiveByTask[f.Name] += n
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("reading active work: %w", err)
	}
	return nil
}

// dispositions reads the dispositions, in all and today: the fixed part
// below the floor id, then a primary-key range from the floor up.
func (r *refreshing) dispositions(ctx context.Context) error {
	if err := r.s.raiseFloor(ctx, r.q); err != nil {
		return fmt.Errorf("reading the work history: %w", err)
	}
	for k, n := range r.s.below {
		if f := r.snap.byID[k.task]; f != nil {
			f.DoneTotal[k.kind] += n
		}
	}
	err := r.q.step("DashDone", func() error {
		return each(ctx, r.q, &r.st.DashDone, floorParams{Floor: r.s.floor}, func(row doneRow) error {
			name, kind, total, today := row.User, row.Disposition, row.N, row.Today
			f := r.snap.byID[row.TaskID]
			if f == nil {
				return nil
			}
			f.DoneTotal[kind] += total
			f.DoneToday[kind] += today
			if today > 0 {
				r.user(name).DoneToday += today
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("reading dispositions: %w", err)
	}
	return nil
}

// runHistogram reads the criteria-query runs: totals and the duration
// histogram, the fixed part below the floor plus a primary-key range from it.
func (r *refreshing) runHistogram(ctx context.Context) error {
	sums := map[runKey]runSums{}
	for k, v := range r.s.runBelow {
		sums[k] = v
	}
	err := r.q.step("DashRunHistogram", func() error {
		return scanRuns(ctx, r.q, &r.st.DashRunHistogram, r.s.runFloor, sums)
	})
	if err != nil {
		return fmt.Errorf("reading the criteria-query log: %w", err)
	}
	for k, v := range sums {
		f := r.snap.byID[k.task]
		if f == nil || k.bucket < 0 || int(k.bucket) >= len(f.DurationBuckets) {
			continue
		}
		f.DurationBuckets[k.bucket] += v.runs
		f.Runs += v.runs
		f.RunDurationMS += v.durationMS
		f.RequestsServed += v.served
		f.LoansAssigned += v.assigned
	}
	return nil
}

// recentRuns reads the latest runs of each task that has any, through the
// (task_id, id) index.
func (r *refreshing) recentRuns(ctx context.Context) error {
	for _, f := range r.snap.Tasks {
		if f.Runs == 0 {
			continue
		}
		err := r.q.step("DashRuns", func() error {
			return each(ctx, r.q, &r.st.DashRuns, taskLimitParams{TaskID: f.ID, Limit: recentRuns}, func(row runRow) error {
				f.RecentRuns = append(f.RecentRuns, Run{ID: row.ID, AgeMS: row.AgeS * 1000, DurationMS: row.DurationMS,
					RowsFound: row.RowsFound, RequestsServed: row.RequestsServed, LoansAssigned: row.LoansAssigned})
				return nil
			})
		})
		if err != nil {
			return fmt.Errorf("reading the runs of task %s: %w", f.Name, err)
		}
		if len(f.RecentRuns) > 0 {
			last := f.RecentRuns[0]
			f.EligibleLastRun, f.LastRunAgeMS = &last.RowsFound, &last.AgeMS
		}
	}
	return nil
}

// totals derives what the readers' figures add up to, and orders the users
// (longest-held work first).
func (r *refreshing) totals() *Snapshot {
	snap := r.snap
	now := time.Now()
	for _, f := range snap.Tasks {
		if b := r.s.backlog(f.ID, now); b != nil {
			age := now.Sub(b.CountedAt).Milliseconds()
			f.BacklogLoans, f.BacklogAgeMS = &b.Loans, &age
		}
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
	for _, u := range r.users {
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
	return snap
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
	st := s.sql()
	var floors floorRow
	err := q.step("DashDoneFloor", func() error {
		q.n++
		var err error
		floors, err = st.DashDoneFloor.One(ctx, s.DB, engineio.NoParams{})
		return err
	})
	if err != nil {
		return err
	}
	floor := floors.MaxID.Int64 + 1
	for _, v := range []sql.NullInt64{floors.ActiveFloor, floors.TodayFloor} {
		if v.Valid && v.Int64 < floor {
			floor = v.Int64
		}
	}
	floor = max(floor-floorSlack, 0)
	below := map[doneKey]int{}
	err = q.step("DashDoneBefore", func() error {
		return each(ctx, q, &st.DashDoneBefore, floorParams{Floor: floor}, func(row doneBeforeRow) error {
			below[doneKey{task: row.TaskID, user: row.User, kind: row.Disposition}] += row.N
			return nil
		})
	})
	if err != nil {
		return err
	}
	var maxRun maxIDRow
	err = q.step("DashRunMaxID", func() error {
		q.n++
		var err error
		maxRun, err = st.DashRunMaxID.One(ctx, s.DB, engineio.NoParams{})
		return err
	})
	if err != nil {
		return err
	}
	runFloor := max(maxRun.MaxID.Int64+1-floorSlack, 0)
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
func scanRuns(ctx context.Context, q *queryCounter, stmt *drivers.Query[floorParams, histogramRow], floor int64, sums map[runKey]runSums) error {
	return each(ctx, q, stmt, floorParams{Floor: floor}, func(r histogramRow) error {
		k := runKey{task: r.TaskID, bucket: r.Bucket}
		v := sums[k]
		v.runs += r.Runs
		v.durationMS += int64(r.TotalMS.Float64)
		v.served += int64(r.Served.Float64)
		v.assigned += int64(r.Assigned.Float64)
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
func each[P, R any](ctx context.Context, q *queryCounter, stmt *drivers.Query[P, R], p P, fn func(R) error) error {
	q.n++
	return stmt.Each(ctx, q.db, p, fn)
}

// TaskDetail is the /tasks/NAME page's data.
type TaskDetail struct {
	Task         *dispatch.Task
	Figure       *TaskFigure
	Runs         []dispatch.QueryRun
	Dispositions []Disposition
	Hold         time.Duration
	// Reasons: the task's reason codes (docs/reasons.md).
	Reasons dispatch.Reasons
}

// Disposition is one ended assignment.
type Disposition struct {
	Loan   loankey.Key
	User   string
	Kind   string
	AgeMS  int64
	HeldMS int64
	// Reason and Note: the disposition's (docs/reasons.md); "" when none.
	Reason, Note string
}

// Task reads one task's page: its definition, latest runs and dispositions.
// It is not cached: one page view, four indexed reads.
func (s *Source) Task(ctx context.Context, name string) (*TaskDetail, error) {
	// Found in the list rather than by the CLI's lookup, which refuses names
	// the CLI would not create: a task row written otherwise still shows.
	tasks, err := s.Admin.Tasks(ctx)
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
	if d.Reasons, err = s.Admin.TaskReasons(ctx, t); err != nil {
		return nil, err
	}
	if d.Runs, err = s.Admin.Runs(ctx, t); err != nil {
		return nil, fmt.Errorf("reading the runs of task %s: %w", name, err)
	}
	q := &queryCounter{db: s.DB}
	err = each(ctx, q, &s.sql().DashDispositions, taskLimitParams{TaskID: t.ID, Limit: 15}, func(r dispositionRow) error {
		d.Dispositions = append(d.Dispositions, Disposition{Loan: loankey.New(t.KeyKind, r.LoanID), User: r.User,
			Kind: r.Disposition, AgeMS: r.AgeS.Int64 * 1000, HeldMS: r.HeldS.Int64 * 1000,
			Reason: r.Reason.String, Note: r.Note.String})
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

// maxHoldMS is a task's --max-hold as the dashboard shows it (nil: never).
func maxHoldMS(d time.Duration) *int64 {
	if d <= 0 {
		return nil
	}
	ms := d.Milliseconds()
	return &ms
}
