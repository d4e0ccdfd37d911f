// Package bench is loanq's locking lab (figures in BENCHMARKS.md): it runs the
// experiment of a table used as a work queue — N workers draining a table of M
// items, each item held for D of simulated work — with each lock strategy, on
// any supported database, and reports the time against the ideal M × D / N,
// the share of each worker, the lock errors, and the duplicates found in the
// database.
//
// Strategies, on the item table loanq_bench_item, which the bench creates
// before a run and drops after it (tables.go; no migration creates it):
//
//   - skip: claim with SELECT … FOR UPDATE SKIP LOCKED in a transaction, work
//     while holding the row locks, mark done, commit. Workers pass over each
//     other's rows: the lanes run in parallel.
//   - nowait: the same with FOR UPDATE NOWAIT: a worker that meets a held row
//     gets an error at once, backs off briefly and asks again.
//   - wait: plain FOR UPDATE, no SKIP LOCKED: every worker queues behind
//     the holder of the first ready row, so the work is serialised.
//   - lease: an UPDATE marks items claimed by the worker with an expiry and is
//     committed at once; the work runs with no transaction open and the item
//     is finished by a fenced UPDATE (owner, still claimed, lease unexpired).
//     Items whose lease ran out go back to ready. The only strategy on SQLite.
//
// Every statement comes from the bench's own catalogue (sql.go, dialects.go;
// `loanq sql` prints them after the engine's); the claim is claimItems
// (claim.go).
package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/dsn"
	"github.com/loanq/loanq/problem"
	"github.com/loanq/loanq/schema"
)

// Limits of the flags; outside them the run is refused as bad input.
const (
	MaxWorkers = 256
	MaxRows    = 1_000_000
	MaxWork    = 10 * time.Second
	MaxBatch   = 1000
)

// Defaults: the reference run of BENCHMARKS.md (10 workers, 200 items,
// 100 ms of work each).
const (
	DefaultWorkers = 10
	DefaultRows    = 200
	DefaultWork    = 100 * time.Millisecond
	DefaultBatch   = 1
)

// fillChunk is how many items one Fill call inserts (MySQL's default
// cte_max_recursion_depth is 1000).
const fillChunk = 1000

// Config is one `loanq bench` invocation.
type Config struct {
	DSN string
	// MustExist refuses a file database that does not exist (the user named
	// it; see schema.Options).
	MustExist bool
	Strategy  string // skip, nowait, wait, lease, all, or "" for the database's default
	Workers   int
	Rows      int
	Work      time.Duration
	Batch     int
	Processes int    // 0 or 1: goroutines in this process
	Chart     string // SVG file to write, "" for none

	// Progress receives a live \r line; set it only for a terminal.
	Progress io.Writer
	// Notes receives remarks such as the strategies a database lacks.
	Notes io.Writer
	// Command re-executes loanq for --processes: the program and the arguments
	// that come before the hidden worker subcommand's own. Default: this
	// executable with "bench worker".
	Command []string
	// Env is added to the children's environment.
	Env []string

	// inspect, when set (by tests, export_test.go), is called after each
	// strategy's run and audit, while its items are still in the table.
	inspect func(strategy string)
}

// Validate checks the flags; errors are bad input (exit 2).
func (c *Config) Validate() error {
	if err := checkSizes(c.Workers, c.Rows); err != nil {
		return err
	}
	if c.Work < 0 || c.Work > MaxWork {
		return problem.Usagef("invalid --work %s: give 0s to %s, e.g. 100ms", c.Work, MaxWork)
	}
	if c.Batch < 1 || c.Batch > MaxBatch {
		return problem.Usagef("invalid --batch %d: give 1 to %d", c.Batch, MaxBatch)
	}
	if c.Processes < 0 || c.Processes > c.Workers {
		return problem.Usagef("invalid --processes %d: give 1 to --workers (%d)", c.Processes, c.Workers)
	}
	if err := checkChartPath(c.Chart); err != nil {
		return err
	}
	if c.Strategy != "all" && c.Strategy != "" {
		if _, err := drivers.ParseStrategy(c.Strategy); err != nil {
			return problem.Usagef("unknown --strategy %q: use skip, nowait, wait, lease or all", c.Strategy)
		}
	}
	return nil
}

// checkSizes checks --workers and --rows against their limits.
func checkSizes(workers, rows int) error {
	if workers < 1 || workers > MaxWorkers {
		return problem.Usagef("invalid --workers %d: give 1 to %d", workers, MaxWorkers)
	}
	if rows < 1 || rows > MaxRows {
		return problem.Usagef("invalid --rows %d: give 1 to %d", rows, MaxRows)
	}
	return nil
}

// strategies resolves --strategy against what the database supports.
func (c *Config) strategies(d drivers.Driver) ([]drivers.Strategy, error) {
	if c.Strategy == "all" {
		var out, missing []string
		var sts []drivers.Strategy
		for _, s := range drivers.AllStrategies {
			if drivers.Supports(d, s) {
				sts = append(sts, s)
				out = append(out, string(s))
			} else {
				missing = append(missing, string(s))
			}
		}
		if len(missing) > 0 && c.Notes != nil {
			fmt.Fprintf(c.Notes, "note: %s supports only %s; skipping %s\n", d.Name(), strings.Join(out, ", "), strings.Join(missing, ", "))
		}
		return sts, nil
	}
	s, err := oneStrategy(d, c.Strategy)
	if err != nil {
		return nil, err
	}
	return []drivers.Strategy{s}, nil
}

// Result is one strategy's run. Its JSON is the contract of
// `loanq bench --output json` (issue 4); fields may be added.
type Result struct {
	Target     string  `json:"target"` // "items": the item table (`loanq bench --help` says how a run works)
	Database   string  `json:"database"`
	Dialect    string  `json:"dialect"`
	Strategy   string  `json:"strategy"`
	Workers    int     `json:"workers"`
	Rows       int     `json:"rows"`
	WorkMS     float64 `json:"work_ms"`
	Batch      int     `json:"batch"`
	Processes  int     `json:"processes"`
	ElapsedMS  int64   `json:"elapsed_ms"`
	IdealMS    int64   `json:"ideal_ms"`
	Ratio      float64 `json:"ratio"` // elapsed / ideal; 0 when the ideal is 0
	PerSecond  float64 `json:"items_per_second"`
	Duplicates int64   `json:"duplicates"`
	Missed     int64   `json:"missed"`      // items never finished
	LockErrors int64   `json:"lock_errors"` // nowait/lock-busy errors, each retried
	Deadlocks  int64   `json:"deadlocks"`   // deadlock victims, each retried
	MaxClaim   int     `json:"max_claim"`   // most items any one claim returned (at most --batch)
	// LockedPerClaim is how many items one claim of --batch locks, measured
	// before the run (locks.go); -1 where the database has no row locks.
	LockedPerClaim int    `json:"rows_locked_per_claim"`
	Retries        int64  `json:"retries"`    // empty claims retried while items were left (lease races)
	LeaseLost      int64  `json:"lease_lost"` // leased items whose fenced finish found the lease gone
	Server         string `json:"server"`     // product and version, as the server reports it
	// RawBatchPerS is one statement claiming and finishing --batch items
	// (ClaimDone) with the same workers, measured right after a skip run
	// with --batch above 1 and no work time; 0 when not measured.
	RawBatchPerS  float64 `json:"raw_batch_items_per_s"`
	RawBatchRatio float64 `json:"raw_batch_ratio"` // items_per_second / raw_batch_items_per_s
	// PrioritySkew: how far the order the workers got their items in
	// strays from the id order (skew.go); only for workers in one process.
	PrioritySkew *PrioritySkew  `json:"priority_skew,omitempty"`
	PerWorker    []WorkerResult `json:"per_worker"`

	marks    map[int][]Mark    // by worker, for the chart
	errorsAt map[int][]float64 // by worker: when its lock errors happened, ms
}

// WorkerResult is one worker's share.
type WorkerResult struct {
	Worker     int    `json:"worker"`
	Processed  int64  `json:"processed"` // items finished by this worker, read from the database
	ElapsedMS  int64  `json:"elapsed_ms"`
	LockErrors int64  `json:"lock_errors"`
	Deadlocks  int64  `json:"deadlocks"`
	Retries    int64  `json:"retries"`
	LeaseLost  int64  `json:"lease_lost"`
	Claims     int64  `json:"claims"` // committed claims (transactions for row locks)
	Marks      []Mark `json:"marks,omitempty"`
	// ErrorsAtMS is when each lock error happened (for the chart).
	ErrorsAtMS []float64 `json:"lock_errors_at_ms,omitempty"`
}

// Mark is one committed claim: its items, when the claim was sent, when its
// rows came back (the lock wait ends) and when its commit ended, in ms from
// the start of the run. For the engine it is one work get: asked, answered,
// its loans completed.
type Mark struct {
	Items     []int64 `json:"items"`
	StartMS   float64 `json:"start_ms"`
	ClaimedMS float64 `json:"claimed_ms"`
	EndMS     float64 `json:"end_ms"`
}

// Run runs every strategy Config asks for and returns one result each. The
// item table exists for the run only.
func Run(ctx context.Context, cfg Config) (out []*Result, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Processes == 0 {
		cfg.Processes = 1
	}
	ss, err := openSession(ctx, cfg.DSN, cfg.MustExist)
	if err != nil {
		return nil, err
	}
	defer ss.close(ctx, &err)
	d := ss.d
	sts, err := cfg.strategies(d)
	if err != nil {
		return nil, err
	}
	server, err := ss.start(ctx)
	if err != nil {
		return nil, err
	}
	for _, s := range sts {
		r, err := runOne(ctx, &cfg, d, ss.db, ss.c, ss.target, s)
		if err != nil {
			return out, fmt.Errorf("bench %s on %s: %w", s, d.Name(), err)
		}
		r.Server = server
		out = append(out, r)
	}
	if cfg.Chart != "" {
		if err := writeChart(cfg.Chart, itemPanels(out)); err != nil {
			return out, err
		}
	}
	return out, nil
}

func runOne(ctx context.Context, cfg *Config, d drivers.Driver, db *sql.DB, c *Catalogue, target dsn.DSN, s drivers.Strategy) (*Result, error) {
	if err := fill(ctx, db, c, cfg.Rows); err != nil {
		return nil, err
	}
	r := &Result{Target: "items", Database: target.Redacted(), Dialect: d.Name(), Strategy: string(s), Workers: cfg.Workers,
		Rows: cfg.Rows, WorkMS: float64(cfg.Work) / float64(time.Millisecond), Batch: cfg.Batch, Processes: cfg.Processes}
	ideal := time.Duration(cfg.Rows) * cfg.Work / time.Duration(cfg.Workers)
	r.IdealMS = ideal.Milliseconds()
	var err error
	if r.LockedPerClaim, err = locksPerClaim(ctx, d, db, c, s, cfg.Batch); err != nil { // locks.go
		return nil, err
	}

	stopProgress := startProgress(ctx, cfg, db, c, s)
	var workers []WorkerResult
	var elapsed time.Duration
	if cfg.Processes > 1 {
		workers, elapsed, err = runProcesses(ctx, cfg, s)
	} else {
		workers, elapsed, err = runLocal(ctx, cfg.DSN, s, 1, cfg.Workers, cfg.Work, cfg.Batch, nil)
	}
	stopProgress()
	if err != nil {
		return nil, err
	}
	r.ElapsedMS = elapsed.Milliseconds()
	if ideal > 0 {
		r.Ratio = round3(float64(elapsed) / float64(ideal))
	}
	if elapsed > 0 {
		r.PerSecond = round3(float64(cfg.Rows) / elapsed.Seconds())
	}
	if err := audit(ctx, db, c, r, workers); err != nil {
		return nil, err
	}
	if cfg.Processes <= 1 {
		r.PrioritySkew = prioritySkew(r.marks)
	}
	if cfg.inspect != nil {
		cfg.inspect(string(s))
	}
	if s == drivers.Skip && cfg.Batch > 1 && cfg.Work == 0 && !c.ClaimDone.Empty() {
		if err := rawBatch(ctx, cfg, db, c, r); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// rawBatch measures ClaimDone: each worker repeats the one statement
// in autocommit until it finds nothing left, then the table is audited.
func rawBatch(ctx context.Context, cfg *Config, db *sql.DB, c *Catalogue, r *Result) error {
	if err := fill(ctx, db, c, cfg.Rows); err != nil {
		return err
	}
	db.SetMaxOpenConns(cfg.Workers + 1)
	conns := make([]*sql.Conn, cfg.Workers)
	for i := range conns {
		c, err := db.Conn(ctx)
		if err != nil {
			return fmt.Errorf("raw batch claim: %w", err)
		}
		defer c.Close()
		conns[i] = c
	}
	start := time.Now()
	errs := make([]error, cfg.Workers)
	var wg sync.WaitGroup
	for i, conn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				res, err := c.ClaimDone.Exec(ctx, conn, claimDoneParams{Owner: Owner(i + 1), Limit: cfg.Batch})
				if err != nil {
					errs[i] = fmt.Errorf("raw batch claim: %w", err)
					return
				}
				if n, _ := res.RowsAffected(); n == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	sum, err := c.Summary.One(ctx, db, engineio.NoParams{})
	if err != nil {
		return fmt.Errorf("auditing the raw batch claim: %w", err)
	}
	dups, missed := sum.Duplicates, sum.Missed
	if dups != 0 || missed != 0 {
		return fmt.Errorf("raw batch claim: %d items finished twice, %d never", dups, missed)
	}
	r.RawBatchPerS = round3(float64(cfg.Rows) / elapsed.Seconds())
	if r.RawBatchPerS > 0 {
		r.RawBatchRatio = round3(r.PerSecond / r.RawBatchPerS)
	}
	return nil
}

// open opens the DSN and checks that its schema is current; the embedded
// SQLite default migrates itself, as every other command does.
func open(ctx context.Context, raw string, mustExist bool) (drivers.Driver, *sql.DB, dsn.DSN, error) {
	db, err := schema.Open(ctx, raw, schema.Options{MustExist: mustExist, Migrate: schema.IfSelfMigrating, Check: true})
	if err != nil {
		return nil, nil, dsn.DSN{}, err
	}
	return db.Driver, db.DB, db.DSN, nil
}

// oneStrategy resolves a single --strategy; "" is the database's default.
func oneStrategy(d drivers.Driver, name string) (drivers.Strategy, error) {
	if name == "" {
		return d.Capabilities().Strategies[0], nil
	}
	s, err := drivers.ParseStrategy(name)
	if err != nil {
		return "", err
	}
	if !drivers.Supports(d, s) {
		return "", problem.Usagef("%s does not support strategy %s: use one of %v", d.Name(), s, d.Capabilities().Strategies)
	}
	return s, nil
}

// serverVersion names the server a run went to, as the server reports it
// (Statements.ServerVersion), so results say MariaDB, not mysql.
func serverVersion(ctx context.Context, db *sql.DB, c *Catalogue) (string, error) {
	v, err := c.ServerVersion.One(ctx, db, engineio.NoParams{})
	if err != nil {
		return "", fmt.Errorf("reading the server version: %w", err)
	}
	return strings.TrimSpace(v.Version), nil
}

func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

// fill resets the item table and inserts ids 1..rows as ready, in one
// transaction so a run never starts on a half-filled table.
func fill(ctx context.Context, db *sql.DB, c *Catalogue, rows int) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("resetting the bench table: %w", err)
	}
	defer tx.Rollback()
	if _, err := c.Reset.Exec(ctx, tx, engineio.NoParams{}); err != nil {
		return fmt.Errorf("resetting the bench table: %w", err)
	}
	for first := 1; first <= rows; first += fillChunk {
		n := min(fillChunk, rows-first+1)
		if _, err := c.Fill.Exec(ctx, tx, fillParams{First: int64(first), Count: int64(n)}); err != nil {
			return fmt.Errorf("filling the bench table (ids %d-%d): %w", first, first+n-1, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("filling the bench table: %w", err)
	}
	if _, err := c.Analyze.Exec(ctx, db, engineio.NoParams{}); err != nil {
		return fmt.Errorf("gathering the statistics of the bench table: %w", err)
	}
	return nil
}

// audit reads the outcome from the database, not from the workers' word:
// who finished how many items, duplicates (processed > 1) and items missed.
func audit(ctx context.Context, db *sql.DB, c *Catalogue, r *Result, workers []WorkerResult) error {
	sum, err := c.Summary.One(ctx, db, engineio.NoParams{})
	if err != nil {
		return fmt.Errorf("auditing the bench table: %w", err)
	}
	r.Duplicates, r.Missed = sum.Duplicates, sum.Missed
	byOwner := map[string]int64{}
	owners, err := c.ByOwner.All(ctx, db, engineio.NoParams{})
	if err != nil {
		return fmt.Errorf("counting items per worker: %w", err)
	}
	for _, o := range owners {
		byOwner[o.Owner.String] = o.N
	}
	r.marks = map[int][]Mark{}
	r.errorsAt = map[int][]float64{}
	for _, w := range workers {
		w.Processed = byOwner[Owner(w.Worker)]
		r.LockErrors += w.LockErrors
		r.Deadlocks += w.Deadlocks
		r.Retries += w.Retries
		r.LeaseLost += w.LeaseLost
		r.marks[w.Worker] = w.Marks
		r.errorsAt[w.Worker] = w.ErrorsAtMS
		for _, m := range w.Marks {
			r.MaxClaim = max(r.MaxClaim, len(m.Items))
		}
		w.Marks, w.ErrorsAtMS = nil, nil // the chart has them; the JSON stays readable
		r.PerWorker = append(r.PerWorker, w)
	}
	return nil
}

// Owner is the name a worker writes into loanq_bench_item.owner.
func Owner(worker int) string { return fmt.Sprintf("worker-%03d", worker) }

// startProgress prints a live line (items done, elapsed) until stopped. It
// reads the count from the database so that it also follows child processes.
func startProgress(ctx context.Context, cfg *Config, db *sql.DB, c *Catalogue, s drivers.Strategy) func() {
	if cfg.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(stopped)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				fmt.Fprintf(cfg.Progress, "\r%60s\r", "")
				return
			case <-ctx.Done():
				return
			case <-t.C:
				left, err := c.Ready.One(ctx, db, engineio.NoParams{})
				if err != nil {
					continue
				}
				ready := left.N
				fmt.Fprintf(cfg.Progress, "\r%s: %d of %d items taken, %.1fs ", s, int64(cfg.Rows)-ready, cfg.Rows, time.Since(start).Seconds())
			}
		}
	}()
	return func() { close(done); <-stopped }
}
