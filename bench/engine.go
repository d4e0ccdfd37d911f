package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/loanq/loanq/loankey"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/internal/pause"
	"github.com/loanq/loanq/problem"
	"github.com/loanq/loanq/schema"
)

// The engine benchmark (`loanq bench --target engine`) measures the work
// queue itself rather than the item table's raw claim: N callers, each
// looping `work get --count C` + `disposition complete` through package
// dispatch — exactly what the CLI runs — on a task over M generated loans.
//
// The loans are the rows of the item table (loanq_bench_item, created for
// the run and dropped after it): the task's criteria is status = 'ready' in
// id order, and a caller "works" on a loan by marking its item done (Done,
// which counts processed) before it
// completes the assignment, so a completed loan no longer matches and is never
// handed out again. A loan handed to two callers therefore shows up twice in
// the database — as two work rows of the task and as an item processed twice —
// and the audit reads both from there, not from the callers' word.
//
// The run leaves nothing behind: its task is deleted with its requests, work
// rows and query runs, and the item table is dropped, even when the run
// fails or is interrupted. A database that holds tasks of its users is
// refused unless AllowUserTasks is set (`--allow-user-tasks`).

// The ways a caller of the engine bench disposes of a get's loans
// (--dispose): per loan, the item's update (the work) and one Dispose call;
// or, as a script draining the task would, one update of all the get's
// items and one DisposeMany.
const (
	DisposeEach  = "each"
	DisposeBatch = "batch"
)

// EngineTask is the task the engine benchmark creates for its run (and
// deletes after it).
const EngineTask = "loanq-bench-engine"

// engineRawRows caps the item-table run that measures the raw single-row
// claim: long enough for a stable rate, short enough to precede every run.
const engineRawRows = 20_000

// MaxEngineDuration bounds --duration.
const MaxEngineDuration = 24 * time.Hour

// EngineConfig is one `loanq bench --target engine` invocation.
type EngineConfig struct {
	DSN string
	// MustExist refuses a file database that does not exist (the user named
	// it; see schema.Options).
	MustExist  bool
	Strategy   string // one strategy; "" for the database's default
	Workers    int
	Processes  int // 0 or 1: goroutines in this process
	Count      int // loans per work get
	Rows       int // loans on the task
	Duration   time.Duration
	QueryDelay time.Duration
	Prefetch   int           // the task's candidate pool (0: none)
	Work       time.Duration // simulated work per loan, 0 for none
	NoRaw      bool          // skip the raw single-row claim measurement
	Chart      string
	// AllowUserTasks runs on a database that holds tasks of its users
	// (refused otherwise: the run loads the server).
	AllowUserTasks bool
	// Dispose is how a caller disposes of the loans of one get:
	// DisposeEach (one call per loan, as the figures before it were made;
	// "" is it) or DisposeBatch (one update of the get's items and one
	// Engine.DisposeMany for all).
	Dispose string

	// inspect, when set (by tests, export_test.go), is called after the
	// audit, before the task and the item table are removed.
	inspect func()

	// Command and Env as in Config.
	Command []string
	Env     []string
}

// Validate checks the flags; errors are bad input (exit 2).
func (c *EngineConfig) Validate() error {
	if err := checkSizes(c.Workers, c.Rows); err != nil {
		return err
	}
	if c.Count < 1 || c.Count > dispatch.MaxCount {
		return problem.Usagef("invalid --count %d: give 1 to %d loans per work get", c.Count, dispatch.MaxCount)
	}
	if c.Dispose != "" && c.Dispose != DisposeEach && c.Dispose != DisposeBatch {
		return problem.Usagef("invalid --dispose %q: use each (one disposition per loan) or batch (one for a get's loans)", c.Dispose)
	}
	if c.Processes < 0 || c.Processes > c.Workers {
		return problem.Usagef("invalid --processes %d: give 1 to --workers (%d)", c.Processes, c.Workers)
	}
	if c.Duration < 0 || c.Duration > MaxEngineDuration {
		return problem.Usagef("invalid --duration %s: give 0s (until the task is drained) to %s", c.Duration, MaxEngineDuration)
	}
	if err := dispatch.CheckPrefetchSize(c.Prefetch); err != nil {
		return err
	}
	if c.QueryDelay < 0 || c.QueryDelay > dispatch.MaxQueryDelay {
		return problem.Usagef("invalid --query-delay %s: give 0s to %s", c.QueryDelay, dispatch.MaxQueryDelay)
	}
	if c.Work < 0 || c.Work > MaxWork {
		return problem.Usagef("invalid --work %s: give 0s to %s, e.g. 10ms", c.Work, MaxWork)
	}
	if err := checkChartPath(c.Chart); err != nil {
		return err
	}
	return checkOneStrategy("engine", c.Strategy)
}

// checkOneStrategy checks a --strategy for a target that runs one at a time.
func checkOneStrategy(target, name string) error {
	if name == "all" {
		return problem.Usagef("--target %s runs one strategy at a time: give --strategy skip, nowait, wait, lease or rows", target)
	}
	if name != "" {
		if _, err := drivers.ParseStrategy(name); err != nil {
			if name == "rows" {
				return problem.Usagef("--strategy rows is not available in this build of loanq: use skip, nowait, wait or lease")
			}
			return problem.Usagef("unknown --strategy %q: use skip, nowait, wait, lease or rows", name)
		}
	}
	return nil
}

// EngineResult is the JSON document of `loanq bench --target engine`. The
// first thirteen fields are the contract of the issue that asked for it, in
// that order; the rest were added after them.
type EngineResult struct {
	Target       string  `json:"target"`
	Database     string  `json:"database"`
	Strategy     string  `json:"strategy"`
	Workers      int     `json:"workers"`
	Count        int     `json:"count"`
	Loans        int64   `json:"loans"` // work rows of the task in the database
	ElapsedMS    int64   `json:"elapsed_ms"`
	LoansPerS    float64 `json:"loans_per_s"`
	GetP50MS     int64   `json:"get_p50_ms"`
	GetP99MS     int64   `json:"get_p99_ms"`
	CriteriaRuns int64   `json:"criteria_runs"`
	Requests     int64   `json:"requests"`
	Duplicates   int64   `json:"duplicates"` // loans assigned more than once, read from the database

	Server         string  `json:"server"`
	Dialect        string  `json:"dialect"`
	Processes      int     `json:"processes"`
	Rows           int     `json:"rows"`
	DurationMS     int64   `json:"duration_ms"` // 0: until the task was drained
	QueryDelayMS   int64   `json:"query_delay_ms"`
	Prefetch       int     `json:"prefetch"`
	WorkMS         int64   `json:"work_ms"`
	LoansCounted   int64   `json:"loans_counted"`    // loans the callers say they got; must equal loans
	ItemsTwice     int64   `json:"items_twice"`      // items worked on more than once; must be 0
	Pending        int64   `json:"pending"`          // requests still pending after the run (lost); must be 0
	Busy           int64   `json:"busy"`             // times a work get passed its timeout still pending (it then waits on)
	GetMeanMS      float64 `json:"get_mean_ms"`      // mean work get time, ms
	GetMaxMS       int64   `json:"get_max_ms"`       // slowest work get
	RunsPerRequest float64 `json:"runs_per_request"` // criteria runs / requests: coalescing
	RawStrategy    string  `json:"raw_strategy"`     // item-table claim measured as the raw limit ("" with --no-raw)
	RawItems       int     `json:"raw_items"`
	RawElapsedMS   int64   `json:"raw_elapsed_ms"`
	RawItemsPerS   float64 `json:"raw_items_per_s"`
	RawDuplicates  int64   `json:"raw_duplicates"`
	Ratio          float64 `json:"ratio"` // loans_per_s / raw_items_per_s; 0 without the raw run

	// Dispose: each, one disposition call per loan; batch, one per get.
	Dispose string `json:"dispose"`

	// AssignedOutOfOrder counts the work rows, read from the database in
	// the order they were inserted, whose loan ranks above a loan assigned
	// before it. Under a task lock the rounds run one at a time, each
	// handing out the top of what is left in order: 0 (docs/scaling.md,
	// "Priority skew"). rows claims side by side and a candidate pool's
	// claims run beside the rounds: counted, not bound. (On Oracle RAC
	// identity values are not in insertion order: not a measure there.)
	AssignedOutOfOrder int64 `json:"assigned_out_of_order"`

	// PrioritySkew: how far the order the callers got their loans in
	// strays from the task's order (skew.go), and the same for the raw
	// claim; only for callers in one process.
	PrioritySkew    *PrioritySkew `json:"priority_skew,omitempty"`
	RawPrioritySkew *PrioritySkew `json:"raw_priority_skew,omitempty"`

	PerWorker []EngineWorker `json:"per_worker"`

	marks map[int][]Mark
}

// EngineWorker is one caller's share.
type EngineWorker struct {
	Worker    int   `json:"worker"`
	Loans     int64 `json:"loans"`    // loans it was given and completed
	Requests  int64 `json:"requests"` // work gets answered
	Busy      int64 `json:"busy"`     // times its work get passed its timeout still pending
	ElapsedMS int64 `json:"elapsed_ms"`
}

// engineWorkerReport is what a caller reports to its process (and a child
// process to its parent): its share plus every work get's time and, for the
// chart, its requests.
type engineWorkerReport struct {
	EngineWorker
	GetMicros []int64 `json:"get_us"`
	Marks     []Mark  `json:"marks,omitempty"`
}

// getTimeout bounds one wait of a work get in the benchmark. A get that
// passes it is counted busy and waits on for the same request.
const getTimeout = time.Minute

// maxWaits is how many getTimeouts a request may stay pending before the
// benchmark stops and reports a stalled queue instead of waiting forever.
const maxWaits = 3

// RunEngine runs the engine benchmark: the raw single-row claim on the item
// table first (the limit), then the callers through package dispatch.
func RunEngine(ctx context.Context, cfg EngineConfig) (_ *EngineResult, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Processes == 0 {
		cfg.Processes = 1
	}
	if cfg.Dispose == "" {
		cfg.Dispose = DisposeEach
	}
	ss, err := openSession(ctx, cfg.DSN, cfg.MustExist)
	if err != nil {
		return nil, err
	}
	defer ss.close(ctx, &err)
	d, db, c, e := ss.d, ss.db, ss.c, ss.e
	s, err := oneStrategy(d, cfg.Strategy)
	if err != nil {
		return nil, err
	}
	if err := refuseUserTasks(ctx, e, cfg.AllowUserTasks); err != nil {
		return nil, err
	}
	r := &EngineResult{Target: "engine", Database: ss.target.Redacted(), Strategy: string(s), Workers: cfg.Workers,
		Count: cfg.Count, Dialect: d.Name(), Processes: cfg.Processes, Rows: cfg.Rows,
		DurationMS: cfg.Duration.Milliseconds(), QueryDelayMS: cfg.QueryDelay.Milliseconds(), Prefetch: cfg.Prefetch, WorkMS: cfg.Work.Milliseconds(),
		Dispose: cfg.Dispose}
	if r.Server, err = ss.start(ctx); err != nil {
		return nil, err
	}

	if !cfg.NoRaw {
		if err := engineRaw(ctx, &cfg, d, db, c, r); err != nil {
			return nil, err
		}
	}

	// The task over a fresh item table.
	if err := fill(ctx, db, c, cfg.Rows); err != nil {
		return nil, err
	}
	if err := ss.task(ctx, dispatch.TaskSpec{Name: EngineTask, Where: "status = 'ready'", Lock: s, QueryDelay: cfg.QueryDelay, Prefetch: cfg.Prefetch}); err != nil {
		return nil, err
	}

	var reps []engineWorkerReport
	var elapsed time.Duration
	if cfg.Processes > 1 {
		reps, elapsed, err = runEngineProcesses(ctx, &cfg, s)
	} else {
		reps, elapsed, err = runEngineLocal(ctx, engineShare{DSN: cfg.DSN, Strategy: s, First: 1, N: cfg.Workers,
			Count: cfg.Count, Duration: cfg.Duration, Work: cfg.Work, Batch: cfg.Dispose == DisposeBatch, Marks: true}, nil)
	}
	if err != nil {
		return nil, err
	}
	r.ElapsedMS = elapsed.Milliseconds()
	if err := auditEngine(ctx, d, db, c, e, r, reps); err != nil {
		return nil, err
	}
	if cfg.Processes <= 1 {
		r.PrioritySkew = prioritySkew(r.marks)
	}
	if cfg.inspect != nil {
		cfg.inspect()
	}
	if elapsed > 0 {
		r.LoansPerS = round3(float64(r.Loans) / elapsed.Seconds())
	}
	if r.RawItemsPerS > 0 {
		r.Ratio = round3(r.LoansPerS / r.RawItemsPerS)
	}
	if cfg.Chart != "" {
		if err := writeChart(cfg.Chart, []panel{enginePanel(r)}); err != nil {
			return r, err
		}
	}
	return r, nil
}

// engineRaw measures the item table's single-row claim with the same number
// of workers (skip where the database has row locks, its default elsewhere),
// with no work time: the most loans/s any queue on this server can reach.
func engineRaw(ctx context.Context, cfg *EngineConfig, d drivers.Driver, db *sql.DB, c *Catalogue, r *EngineResult) error {
	raw := d.Capabilities().Strategies[0]
	if drivers.Supports(d, drivers.Skip) {
		raw = drivers.Skip
	}
	n := min(cfg.Rows, engineRawRows)
	if err := fill(ctx, db, c, n); err != nil {
		return err
	}
	icfg := Config{DSN: cfg.DSN, Workers: cfg.Workers, Rows: n, Batch: 1, Processes: cfg.Processes, Command: nil, Env: cfg.Env}
	var workers []WorkerResult
	var elapsed time.Duration
	var err error
	if cfg.Processes > 1 {
		workers, elapsed, err = runProcesses(ctx, &icfg, raw)
	} else {
		workers, elapsed, err = runLocal(ctx, cfg.DSN, raw, 1, cfg.Workers, 0, 1, nil)
	}
	if err != nil {
		return fmt.Errorf("raw %s claim on the item table: %w", raw, err)
	}
	ir := &Result{}
	if err := audit(ctx, db, c, ir, workers); err != nil {
		return err
	}
	r.RawStrategy = string(raw)
	r.RawItems = n
	r.RawElapsedMS = elapsed.Milliseconds()
	r.RawDuplicates = ir.Duplicates
	if cfg.Processes <= 1 {
		r.RawPrioritySkew = prioritySkew(ir.marks)
	}
	if elapsed > 0 {
		r.RawItemsPerS = round3(float64(n) / elapsed.Seconds())
	}
	return nil
}

// engineShare is the callers one process runs.
type engineShare struct {
	DSN      string
	Strategy drivers.Strategy
	First, N int
	Count    int
	Duration time.Duration
	Work     time.Duration
	Batch    bool // dispose of a get's loans in one call (DisposeMany)
	Marks    bool
}

// runEngineLocal runs callers First … First+N-1 as goroutines, each with an
// engine of its own (its own lease holder id) on a shared pool with a
// connection per caller. ready is the child-process handshake, as in runLocal.
func runEngineLocal(ctx context.Context, sh engineShare, ready func() error) ([]engineWorkerReport, time.Duration, error) {
	// A caller holds at most two connections at once (a waiter may read its
	// request while its lock transaction is open); the pool never makes a
	// caller wait for another's connection.
	opened, err := schema.Open(ctx, sh.DSN, schema.Options{Conns: 2*sh.N + 2})
	if err != nil {
		return nil, 0, err
	}
	defer opened.Close()
	d, db := opened.Driver, opened.DB
	c, err := For(d)
	if err != nil {
		return nil, 0, err
	}
	if ready != nil {
		if err := ready(); err != nil {
			return nil, 0, err
		}
	}
	start := time.Now()
	var deadline time.Time
	if sh.Duration > 0 {
		deadline = start.Add(sh.Duration)
	}
	reps := make([]engineWorkerReport, sh.N)
	errs := make([]error, sh.N)
	var wg sync.WaitGroup
	for i := range reps {
		w := &engineCaller{e: dispatch.New(db, d), d: d, db: db, c: c, sh: sh, id: sh.First + i, start: start}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.run(ctx, deadline)
			w.rep.ElapsedMS = time.Since(start).Milliseconds()
			reps[i] = w.rep
		}()
	}
	wg.Wait()
	return reps, time.Since(start), errors.Join(errs...)
}

type engineCaller struct {
	e     *dispatch.Engine
	d     drivers.Driver
	db    *sql.DB
	c     *Catalogue
	sh    engineShare
	id    int
	start time.Time
	rep   engineWorkerReport
}

func (w *engineCaller) user() string { return fmt.Sprintf("bench-%03d", w.id) }

// run loops work get + complete until the deadline or an empty answer (the
// task is drained: every loan is done or held by another caller who will
// complete it).
func (w *engineCaller) run(ctx context.Context, deadline time.Time) error {
	w.rep.Worker = w.id
	user, owner := w.user(), Owner(w.id)
	for deadline.IsZero() || time.Now().Before(deadline) {
		t0 := time.Now()
		opt := dispatch.GetOptions{Lock: w.sh.Strategy, Timeout: getTimeout}
		req, err := w.e.Get(ctx, EngineTask, user, w.sh.Count, opt)
		for waits := 1; err != nil && problem.KindOf(err) == problem.Busy && req != nil; waits++ {
			// Still pending after getTimeout: keep waiting for the same
			// request (as `work status --wait` would), so the loans it is
			// given later are worked on and counted, not left active.
			w.rep.Busy++
			if waits > maxWaits {
				return fmt.Errorf("caller %d: request %d still pending after %s: nobody served it (a stalled queue; see loanq_work_request)",
					w.id, req.ID, time.Duration(waits)*getTimeout)
			}
			req, err = w.e.Status(ctx, req.ID, true, opt)
		}
		took := time.Since(t0)
		if err != nil {
			return fmt.Errorf("caller %d: work get: %w", w.id, err)
		}
		w.rep.Requests++
		w.rep.GetMicros = append(w.rep.GetMicros, took.Microseconds())
		mark := Mark{Items: loankey.Int64s(req.Loans), StartMS: ms(t0.Sub(w.start)), ClaimedMS: ms(t0.Add(took).Sub(w.start))}
		if len(req.Loans) == 0 {
			w.addMark(mark)
			return nil
		}
		if err := pause.For(ctx, w.sh.Work*time.Duration(len(req.Loans))); err != nil {
			return err
		}
		if w.sh.Batch {
			// A script draining the task works on the batch as it got it:
			// one UPDATE marks every item done (the work), one DisposeMany
			// completes them.
			ids := loankey.Int64s(req.Loans)
			if err := w.workMany(ctx, ids, owner); err != nil {
				return fmt.Errorf("caller %d: working on %d loans: %w", w.id, len(ids), err)
			}
			keys := loankey.Texts(req.Loans)
			if _, err := w.e.DisposeMany(ctx, EngineTask, keys, user, dispatch.Complete, 0, false, dispatch.DispositionNote{}); err != nil {
				return fmt.Errorf("caller %d: completing %d loans: %w", w.id, len(keys), err)
			}
			w.rep.Loans += int64(len(keys))
			w.addMark(mark)
			continue
		}
		for _, loan := range req.Loans {
			// The work: the loan stops matching the criteria (and an item
			// handed out twice is counted twice).
			if err := w.work(ctx, loan.Int64(), owner); err != nil {
				return fmt.Errorf("caller %d: working on loan %s: %w", w.id, loan, err)
			}
			if _, err := w.e.Dispose(ctx, EngineTask, loan.String(), user, dispatch.Complete, 0, false); err != nil {
				return fmt.Errorf("caller %d: completing loan %s: %w", w.id, loan, err)
			}
			w.rep.Loans++
		}
		w.addMark(mark)
	}
	return nil
}

// work marks the loan's item done. On MariaDB a rows claim locks the ready
// item's status-index entry and then waits for its row, which this update
// holds while it moves that entry: InnoDB ends one of the two as a deadlock
// victim, as it would an application's own update of a loan. The victim's
// statement is rolled back whole, so it is run again, as an application
// would.
func (w *engineCaller) work(ctx context.Context, loan int64, owner string) error {
	return drivers.RetryDeadlock(ctx, w.d, 6, func() error {
		_, err := w.c.Done.Exec(ctx, w.db, itemParams{ID: loan, Owner: owner})
		return err
	})
}

// workMany is work for a get's loans at once (--dispose batch), in one
// statement (DoneMany), run again if it is a deadlock victim as work is.
func (w *engineCaller) workMany(ctx context.Context, ids []int64, owner string) error {
	return drivers.RetryDeadlock(ctx, w.d, 6, func() error {
		_, err := w.c.DoneMany.Exec(ctx, w.db, itemsParams{IDs: idList(ids), Owner: owner})
		return err
	})
}

// addMark records a request for the chart and the priority skew (callers
// in one process record them all; a child process only for a chart).
func (w *engineCaller) addMark(m Mark) {
	if w.sh.Marks {
		m.EndMS = ms(time.Since(w.start))
		w.rep.Marks = append(w.rep.Marks, m)
	}
}

// auditEngine reads the outcome from the database: work rows and duplicate
// assignments of the task, items worked on twice, requests and those still
// pending, criteria-query runs. Latencies come from the callers.
func auditEngine(ctx context.Context, d drivers.Driver, db *sql.DB, c *Catalogue, e *dispatch.Engine, r *EngineResult, reps []engineWorkerReport) error {
	task, err := e.Task(ctx, EngineTask)
	if err != nil {
		return err
	}
	st := dispatch.ReportSQL(d)
	dups, err := st.WorkDuplicates.One(ctx, db, engineio.TaskParams{TaskID: task.ID})
	if err != nil {
		return fmt.Errorf("auditing the bench task's work: %w", err)
	}
	r.Loans, r.Duplicates = dups.N, dups.Duplicates
	if r.AssignedOutOfOrder, err = assignedOutOfOrder(ctx, db, st, task.ID); err != nil {
		return err
	}
	if r.CriteriaRuns, r.Requests, r.Pending, err = taskCounts(ctx, db, st, task.ID); err != nil {
		return err
	}
	sum, err := c.Summary.One(ctx, db, engineio.NoParams{})
	if err != nil {
		return fmt.Errorf("auditing the bench table: %w", err)
	}
	r.ItemsTwice = sum.Duplicates
	if r.Requests > 0 {
		r.RunsPerRequest = round3(float64(r.CriteriaRuns) / float64(r.Requests))
	}
	var lat []int64
	r.marks = map[int][]Mark{}
	for _, w := range reps {
		r.LoansCounted += w.Loans
		r.Busy += w.Busy
		lat = append(lat, w.GetMicros...)
		r.marks[w.Worker] = w.Marks
		r.PerWorker = append(r.PerWorker, w.EngineWorker)
	}
	slices.SortFunc(r.PerWorker, func(a, b EngineWorker) int { return a.Worker - b.Worker })
	slices.Sort(lat)
	if len(lat) > 0 {
		var sum int64
		for _, l := range lat {
			sum += l
		}
		r.GetMeanMS = round3(float64(sum) / float64(len(lat)) / 1000)
		r.GetP50MS = percentile(lat, 0.50) / 1000
		r.GetP99MS = percentile(lat, 0.99) / 1000
		r.GetMaxMS = lat[len(lat)-1] / 1000
	}
	return nil
}

// assignedOutOfOrder reads a task's loans in the order their work rows were
// inserted and counts those that rank above (here: a lower id than) a loan
// assigned before them.
func assignedOutOfOrder(ctx context.Context, db *sql.DB, st *dispatch.ReportStatements, taskID int64) (int64, error) {
	rows, err := st.WorkInOrder.All(ctx, db, engineio.TaskParams{TaskID: taskID})
	if err != nil {
		return 0, fmt.Errorf("reading the bench task's work in order: %w", err)
	}
	var n, highest int64
	for _, row := range rows {
		loan, err := strconv.ParseInt(row.Loan, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("the bench task's loan %q is not an item id: %w", row.Loan, err)
		}
		if loan < highest {
			n++
		}
		highest = max(highest, loan)
	}
	return n, nil
}

// percentile is the nearest-rank percentile of sorted values.
func percentile(sorted []int64, p float64) int64 {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// replaceTask deletes the bench task a killed run may have left, with its
// history, and creates it afresh over the item table.
func replaceTask(ctx context.Context, e *dispatch.Admin, spec dispatch.TaskSpec) error {
	if _, err := e.DeleteTask(ctx, spec.Name, true); err != nil && problem.KindOf(err) != problem.Usage {
		return fmt.Errorf("removing the previous bench task: %w", err)
	}
	spec.Source, spec.Key, spec.Order, spec.CreatedBy = "loanq_bench_item", "id", "id", "loanq-bench"
	if _, _, err := e.CreateTask(ctx, spec); err != nil {
		return fmt.Errorf("creating the bench task: %w", err)
	}
	return nil
}

// taskCounts reads a task's criteria-query runs, requests and requests still
// pending from the database.
func taskCounts(ctx context.Context, db *sql.DB, st *dispatch.ReportStatements, taskID int64) (runs, requests, pending int64, err error) {
	totals, err := st.QueryRunTotals.One(ctx, db, engineio.TaskParams{TaskID: taskID})
	if err != nil {
		return 0, 0, 0, fmt.Errorf("counting criteria runs: %w", err)
	}
	byUser, err := st.RequestsByUser.All(ctx, db, engineio.TaskParams{TaskID: taskID})
	if err != nil {
		return 0, 0, 0, fmt.Errorf("counting requests: %w", err)
	}
	for _, u := range byUser {
		requests += u.N
		if u.Status == dispatch.StatusPending {
			pending += u.N
		}
	}
	return totals.Runs, requests, pending, nil
}
