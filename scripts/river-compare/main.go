// Command river-compare measures River (github.com/riverqueue/river, a
// SKIP LOCKED job queue for PostgreSQL) on a database of its own, so that
// loanq's engine bench can be put beside it on the same server in the same
// run (scripts/river-compare/run; docs/river.md says what the two measure).
//
// It runs River's migrations on an existing empty database, inserts --jobs
// jobs of a no-op kind (InsertMany in batches, as River's own bench does),
// then starts one client with River's own bench settings (FetchCooldown 2 ms,
// FetchPollInterval 20 ms, MaxWorkers 2,000 on the default queue) and times
// it from Start until the database shows every job completed. It prints one
// JSON object on stdout; progress goes to stderr.
//
// It is a module of its own (its go.mod) so that River never enters loanq's
// go.mod, and `go test ./...` / `go vet ./...` of the repository skip it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// noopArgs is the job: River's bench inserts a job carrying its number, and
// so does this one (the args are stored as JSON in river_job.args).
type noopArgs struct {
	Num int `json:"num"`
}

func (noopArgs) Kind() string { return "river_compare_noop" }

type settings struct {
	River             string `json:"river"`
	MaxWorkers        int    `json:"max_workers"`
	FetchCooldownMS   int64  `json:"fetch_cooldown_ms"`
	FetchPollMS       int64  `json:"fetch_poll_interval_ms"`
	InsertBatch       int    `json:"insert_batch"`
	InsertFast        bool   `json:"insert_fast"`
	PoolMaxConns      int32  `json:"pool_max_conns"`
	GoMaxProcs        int    `json:"gomaxprocs"`
	CompletionPolling string `json:"completion"`
}

type result struct {
	Jobs          int      `json:"jobs"`
	Seconds       float64  `json:"seconds"`
	JobsPerS      float64  `json:"jobs_per_s"`
	LastEventS    float64  `json:"last_event_s"` // the last completion event River's subscription gave, from Start
	Events        int64    `json:"events"`       // completion events received (River drops some when its channel is full)
	Worked        int64    `json:"worked"`       // Work calls (a job may be worked before its completion is written)
	InsertSeconds float64  `json:"insert_seconds"`
	NotCompleted  int64    `json:"not_completed"` // jobs in another state at the end: must be 0
	Server        string   `json:"server"`
	Settings      settings `json:"settings"`
}

func main() {
	if err := run(); err != nil {
		var u usageError
		if errors.As(err, &u) {
			fmt.Fprintln(os.Stderr, "river-compare:", err)
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "river-compare:", err)
		os.Exit(1)
	}
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func run() error {
	fs := flag.NewFlagSet("river-compare", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: river-compare --db DSN [--jobs N] [--max-workers W] [...]

Runs River's migrations on DSN (an existing, empty PostgreSQL database),
inserts N no-op jobs, then works them with one River client and prints
{jobs, seconds, jobs_per_s, settings, ...} as JSON. The time runs from the
client's Start until the database shows every job completed.

Example:
  river-compare --db postgres://postgres@127.0.0.1:5432/river_cmp_1?sslmode=disable --jobs 200000

Flags:
`)
		fs.PrintDefaults()
	}
	dsn := fs.String("db", "", "PostgreSQL DSN of an existing, empty database (required)")
	jobs := fs.Int("jobs", 200000, "jobs to insert, then work")
	maxWorkers := fs.Int("max-workers", 2000, "MaxWorkers of the default queue (River's bench: 2,000)")
	cooldown := fs.Duration("fetch-cooldown", 2*time.Millisecond, "FetchCooldown (River's bench: 2ms)")
	poll := fs.Duration("fetch-poll-interval", 20*time.Millisecond, "FetchPollInterval (River's bench: 20ms)")
	batch := fs.Int("insert-batch", 5000, "jobs per InsertMany (River's bench: 5,000)")
	fast := fs.Bool("insert-fast", false, "insert with InsertManyFast (COPY) instead of InsertMany (not timed either way)")
	maxConns := fs.Int("max-conns", 0, "the pgx pool's MaxConns (0: pgx's default, max(4, CPUs))")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long in all")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usageError{err.Error()}
	}
	switch {
	case *dsn == "":
		return usageError{"--db is required: the DSN of an existing, empty PostgreSQL database (see --help)"}
	case fs.NArg() > 0:
		return usageError{fmt.Sprintf("unexpected argument %q (see --help)", fs.Arg(0))}
	case *jobs < 1:
		return usageError{fmt.Sprintf("--jobs %d: give at least 1", *jobs)}
	case *maxWorkers < 1 || *maxWorkers > 10000:
		return usageError{fmt.Sprintf("--max-workers %d: give 1 to 10000 (River's limit)", *maxWorkers)}
	case *batch < 1:
		return usageError{fmt.Sprintf("--insert-batch %d: give at least 1", *batch)}
	}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, *timeout)
	defer cancelT()

	cfg, err := pgxpool.ParseConfig(*dsn)
	if err != nil {
		return usageError{fmt.Sprintf("--db: %v", err)}
	}
	if *maxConns > 0 {
		cfg.MaxConns = int32(*maxConns)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()

	var server string
	if err := pool.QueryRow(ctx, "SHOW server_version").Scan(&server); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	// An empty database only: the count of completed jobs is the measure,
	// and jobs left by another run would be worked (and counted) too.
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass('river_job') IS NOT NULL").Scan(&exists); err != nil {
		return fmt.Errorf("check the database: %w", err)
	}
	if exists {
		var n int64
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM river_job").Scan(&n); err != nil {
			return fmt.Errorf("check the database: %w", err)
		}
		if n > 0 {
			return usageError{fmt.Sprintf("the database already holds %d River jobs: give a fresh, empty database", n)}
		}
	}

	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}

	var worked atomic.Int64
	workers := river.NewWorkers()
	river.AddWorker(workers, &countingWorker{worked: &worked})
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	client, err := river.NewClient(driver, &river.Config{
		FetchCooldown:     *cooldown,
		FetchPollInterval: *poll,
		Logger:            logger,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: *maxWorkers}},
		Workers:           workers,
	})
	if err != nil {
		return usageError{fmt.Sprintf("River's client: %v", err)}
	}

	insStart := time.Now()
	params := make([]river.InsertManyParams, 0, *batch)
	for n := 0; n < *jobs; {
		params = params[:0]
		for ; len(params) < *batch && n < *jobs; n++ {
			params = append(params, river.InsertManyParams{Args: noopArgs{Num: n + 1}})
		}
		if *fast {
			_, err = client.InsertManyFast(ctx, params)
		} else {
			_, err = client.InsertMany(ctx, params)
		}
		if err != nil {
			return fmt.Errorf("insert jobs: %w", err)
		}
	}
	insertS := time.Since(insStart).Seconds()
	fmt.Fprintf(os.Stderr, "river-compare: inserted %d jobs in %.1f s; working them with MaxWorkers %d\n", *jobs, insertS, *maxWorkers)

	// River's bench counts completion events; they come once the completer
	// has written a batch of completions. The measure here is the database
	// itself (state = 'completed'), read when the events say all are done
	// and every 500 ms besides (events are dropped when the channel is full).
	events, unsubscribe := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: min(*jobs, 1_000_000),
		Kinds:    []river.EventKind{river.EventKindJobCompleted},
	})
	defer unsubscribe()

	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return fmt.Errorf("start the client: %w", err)
	}
	var nEvents int64
	var lastEvent time.Time
	completed := func() (int64, error) {
		var n int64
		err := pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&n)
		return n, err
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var end time.Time
	for end.IsZero() {
		check := false
		select {
		case <-ctx.Done():
			stopClient(client)
			return fmt.Errorf("stopped before the jobs were done (%d completion events of %d): %w", nEvents, *jobs, ctx.Err())
		case ev := <-events:
			if ev == nil {
				events = nil // closed: the ticker goes on
				continue
			}
			nEvents++
			lastEvent = time.Now()
			check = nEvents >= int64(*jobs)
		case <-tick.C:
			check = true
		}
		if !check {
			continue
		}
		n, err := completed()
		if err != nil {
			stopClient(client)
			return fmt.Errorf("count completed jobs: %w", err)
		}
		if n >= int64(*jobs) {
			end = time.Now()
		} else if nEvents >= int64(*jobs) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	secs := end.Sub(start).Seconds()
	stopClient(client)

	var notDone int64
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM river_job WHERE state <> 'completed'").Scan(&notDone); err != nil {
		return fmt.Errorf("count jobs left: %w", err)
	}
	r := result{
		Jobs: *jobs, Seconds: round(secs, 3), JobsPerS: round(float64(*jobs)/secs, 1),
		Events: nEvents, Worked: worked.Load(), InsertSeconds: round(insertS, 3), NotCompleted: notDone, Server: server,
		Settings: settings{River: riverVersion(), MaxWorkers: *maxWorkers, FetchCooldownMS: cooldown.Milliseconds(),
			FetchPollMS: poll.Milliseconds(), InsertBatch: *batch, InsertFast: *fast, PoolMaxConns: cfg.MaxConns,
			GoMaxProcs: runtime.GOMAXPROCS(0), CompletionPolling: "count(*) of state = 'completed' in river_job"},
	}
	if !lastEvent.IsZero() {
		r.LastEventS = round(lastEvent.Sub(start).Seconds(), 3)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return err
	}
	if notDone != 0 {
		return fmt.Errorf("%d jobs were not completed", notDone)
	}
	return nil
}

// countingWorker does nothing but count its calls (one atomic add).
type countingWorker struct {
	river.WorkerDefaults[noopArgs]
	worked *atomic.Int64
}

func (w *countingWorker) Work(context.Context, *river.Job[noopArgs]) error {
	w.worked.Add(1)
	return nil
}

// stopClient stops River's client, waiting up to 10 s for its completer to
// write what it holds.
func stopClient(c *river.Client[pgx.Tx]) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Stop(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "river-compare: stopping River's client:", err)
	}
}

func riverVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/riverqueue/river" {
				return d.Version
			}
		}
	}
	return "unknown"
}

func round(f float64, places int) float64 {
	p := 1.0
	for range places {
		p *= 10
	}
	return float64(int64(f*p+0.5)) / p
}
