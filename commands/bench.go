package commands

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/bench"
	"github.com/loanq/loanq/internal/flagvalue"
	"github.com/loanq/loanq/problem"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:      "bench",
		Usage:     "measure how the database's row locks share a work table between workers (BENCHMARKS.md has the figures)",
		ArgsUsage: " ",
		Description: `Creates the bench's own item table (loanq_bench_item), fills it with --rows
items, then runs --workers workers, each on its own connection. A worker claims up to
--batch items in a transaction with the strategy's lock, holds the lock for
--work per item (a sleep standing in for real work), marks the items done and
commits, until no item is left. lease claims with a committed UPDATE and an
expiry instead, and works with no transaction open.

Reports per strategy: elapsed time against the ideal rows × work / workers,
items per worker (read from the database), lock errors (retried after a short
backoff), and duplicates — items finished more than once — which must be 0.
With a work time, items/s is capped at workers / work: the default run (10
workers, 100ms) can reach 100 items/s at most on any database, so it shows
whether a strategy lets the workers run side by side (ratio near 1) or
serialises them (ratio near the number of workers), not how fast the database
is; --work 0s or --target engine measure that.

  skip    SELECT … FOR UPDATE SKIP LOCKED: workers pass over each other's rows
  nowait  SELECT … FOR UPDATE NOWAIT: a held row is an error; back off, retry
  wait    SELECT … FOR UPDATE: everyone queues behind the first ready row
  lease   UPDATE … SET status = 'claimed' with an expiry (the only one on SQLite)
  all     every strategy this database supports, one after the other

--processes P runs the workers in P separate loanq processes instead of
goroutines. --chart draws one lane per worker and a bar per claim over time:
the light part is the wait for the claim (lock waits), the dark part the work
and commit; red ticks are lock errors, the dashed line the ideal.

--batch K above 1 finishes the K items of a claim with one statement. With
skip, --work 0s and a database that has one (PostgreSQL), the run is followed
by the raw limit: one statement claiming and finishing K items, same workers.

--target engine measures the work queue instead: --workers callers (or
--processes P processes) loop work get --count C + disposition complete
through loanq's engine on a task of --rows loans, until the task is drained
or for --duration D, with --strategy and the task's --query-delay. Before it,
the same callers run the item table's single-row claim as the raw limit, and
the result gives the ratio. Duplicates and requests left pending are read
from the database and must be 0. --dispose each (the default, so that figures
stay comparable with those made before it) disposes of each loan with its own
call; --dispose batch of all the loans of one get with one call
(disposition TASK LOAN… complete).

With the workers or callers in this process, the run also says its priority
skew: how many items were got before a higher-priority one (the queue is in
id order), by how many ranks, and how long before (priority_skew in JSON;
docs/scaling.md).

--target cli measures what scripts pay: --processes P (default 8) chains of
loanq processes, first each looping task list + task show (two calls that
take no lock), then work get --count 1 + disposition complete, each phase
for --duration (default 20s), on a task of --rows loans (default 100000).
The schema must be migrated (loanq migrate up; SQLite migrates itself), and
the bench's user must be allowed to create tables: the item table (and on
Oracle its claim procedure) exists only while the bench runs and is dropped
after it, even when the run fails or is interrupted. engine and cli create a
task of their own and delete it afterwards with its requests and work rows;
they refuse a database that holds tasks of its users (give --allow-user-tasks
to run there anyway). Run it on a database of its own: it loads the server.
See ` + "`loanq sql`" + ` for the exact statements.

Examples:
   loanq bench                                   # 10 workers × 200 items × 100ms
   loanq --db postgres://postgres@127.0.0.1:5432/bench bench --strategy all --chart run.svg
   loanq --db mysql://root@127.0.0.1:3306/bench bench --workers 32 --rows 20000 --work 0s
   loanq --db postgres://postgres@127.0.0.1:5432/bench bench --processes 5 --output json
   loanq --db postgres://postgres@127.0.0.1:5432/bench bench --workers 32 --rows 100000 --work 0s --batch 50
   loanq --db postgres://postgres@127.0.0.1:5432/bench bench --target engine --workers 32 --rows 20000 --strategy skip
   loanq --db mysql://root@127.0.0.1:3306/bench bench --target engine --workers 8 --processes 4 --duration 30s --chart engine.svg
   loanq --db postgres://postgres@127.0.0.1:5432/bench bench --target engine --workers 16 --count 50 --dispose batch
   loanq --db postgres://postgres@127.0.0.1:5432/bench bench --target cli --processes 8 --duration 20s`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "strategy", Aliases: []string{"s"}, Usage: "skip, nowait, wait, lease or all (default: the database's default, skip; lease on SQLite); engine and cli: one strategy, rows too where the build has it"},
			&cli.IntFlag{Name: "workers", Aliases: []string{"n"}, Value: bench.DefaultWorkers, Usage: "concurrent workers, each with its own connection (1-256)"},
			&cli.IntFlag{Name: "rows", Aliases: []string{"m"}, Value: bench.DefaultRows, Usage: "items to process (1-1000000)"},
			&cli.StringFlag{Name: "work", Value: bench.DefaultWork.String(), Usage: "time each item is held, e.g. 100ms (0s-10s)"},
			&cli.IntFlag{Name: "batch", Aliases: []string{"k"}, Value: bench.DefaultBatch, Usage: "items claimed per transaction (1-1000)"},
			&cli.IntFlag{Name: "processes", Aliases: []string{"p"}, Value: 1, Usage: "OS processes the workers are spread over (1-workers)"},
			&cli.StringFlag{Name: "chart", Usage: "write an SVG timeline to `FILE.svg` (its folder must exist; checked before the run)"},
			&cli.StringFlag{Name: "target", Value: "items", Usage: "items: the item table's raw claim (BENCHMARKS.md); engine: the work queue itself (work get + complete); cli: the same through loanq processes, against two lock-free calls"},
			&cli.IntFlag{Name: "count", Aliases: []string{"c"}, Value: 1, Usage: "engine: loans per work get (1-1000)"},
			&cli.StringFlag{Name: "duration", Value: "0s", Usage: "engine: stop after this long, e.g. 30s (0s: when the task is drained)"},
			&cli.StringFlag{Name: "query-delay", Value: "0s", Usage: "engine: the task's --query-delay, a criteria query made slow on purpose"},
			&cli.IntFlag{Name: "prefetch", Usage: "engine: the task's --prefetch, a candidate pool of N loans"},
			&cli.BoolFlag{Name: "no-raw", Usage: "engine: skip the raw single-row claim measured before the run"},
			&cli.StringFlag{Name: "dispose", Value: bench.DisposeEach, Usage: "engine: each (per loan, the item's update and a disposition call, as the figures before batch were made) or batch (one update of a get's items and one disposition call for its loans)"},
			&cli.BoolFlag{Name: "allow-user-tasks", Usage: "engine and cli: run on a database that holds tasks of its users (refused otherwise; the bench's own task is deleted afterwards)"},
		},
		Action: benchRun,
		Subcommands: []*cli.Command{{
			Name:   "worker",
			Hidden: true, // run by `bench --processes`, not by people
			Usage:  "internal: run a share of the bench workers for a parent `loanq bench --processes`",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "strategy", Required: true},
				&cli.IntFlag{Name: "first", Required: true},
				&cli.IntFlag{Name: "count", Required: true},
				&cli.StringFlag{Name: "work", Value: "0s"},
				&cli.IntFlag{Name: "batch", Value: 1},
			},
			Action: benchWorker,
		}, {
			Name:   "engine-worker",
			Hidden: true, // run by `bench --target engine --processes`, not by people
			Usage:  "internal: run a share of the engine bench callers for a parent `loanq bench --target engine --processes`",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "strategy", Required: true},
				&cli.IntFlag{Name: "first", Required: true},
				&cli.IntFlag{Name: "workers", Required: true},
				&cli.IntFlag{Name: "count", Value: 1},
				&cli.StringFlag{Name: "duration", Value: "0s"},
				&cli.StringFlag{Name: "work", Value: "0s"},
				&cli.BoolFlag{Name: "marks"},
				&cli.BoolFlag{Name: "batch-dispose"},
			},
			Action: benchEngineWorker,
		}},
	}
}

func benchRun(c *cli.Context) error {
	if _, err := args(c); err != nil {
		return err
	}
	work, err := flagvalue.Duration("work", c.String("work"))
	if err != nil {
		return err
	}
	if c.Int("processes") < 1 {
		return problem.Usagef("invalid --processes %d: give 1 to --workers (%d)", c.Int("processes"), c.Int("workers"))
	}
	switch strings.ToLower(c.String("target")) {
	case "items":
		for _, f := range []string{"count", "duration", "query-delay", "prefetch", "no-raw", "dispose"} {
			if c.IsSet(f) {
				return problem.Usagef("--%s goes with --target engine (the item table has no work get)", f)
			}
		}
		if c.IsSet("allow-user-tasks") {
			return problem.Usagef("--allow-user-tasks goes with --target engine or cli (the item bench creates no task)")
		}
	case "engine":
		return benchEngine(c)
	case "cli":
		return benchCLI(c)
	default:
		return problem.Usagef("unknown --target %q: use items (the item table's raw claim), engine (the work queue) or cli (loanq processes)", c.String("target"))
	}
	cfg := bench.Config{DSN: c.String("db"), MustExist: c.IsSet("db"), Strategy: c.String("strategy"), Workers: c.Int("workers"),
		Rows: c.Int("rows"), Work: work, Batch: c.Int("batch"), Processes: c.Int("processes"), Chart: c.String("chart")}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if c.String("output") != "json" {
		cfg.Notes = c.App.Writer
		if isTerminal(c.App.Writer) {
			cfg.Progress = c.App.Writer
		}
	} else {
		cfg.Notes = c.App.ErrWriter
	}
	rs, err := bench.Run(c.Context, cfg)
	if err != nil {
		return err
	}
	// One shape whatever --strategy: an array of results, one per strategy run.
	if err := emit(c, rs, func(w io.Writer) { bench.WriteText(w, rs) }); err != nil {
		return err
	}
	chartWritten(cfg.Notes, cfg.Chart)
	for _, r := range rs {
		if r.Duplicates != 0 || r.Missed != 0 {
			return &problem.Error{Kind: problem.Failure,
				Msg:  "bench found " + r.Strategy + " duplicates or missed items (see above)",
				Hint: "an item processed twice means the lock did not hold; please report it with the output of `loanq sql`"}
		}
	}
	return nil
}

func benchWorker(c *cli.Context) error {
	work, err := flagvalue.Duration("work", c.String("work"))
	if err != nil {
		return err
	}
	return bench.RunChild(c.Context, bench.ChildConfig{DSN: c.String("db"), Strategy: c.String("strategy"),
		First: c.Int("first"), Count: c.Int("count"), Work: work, Batch: c.Int("batch")}, os.Stdin, c.App.Writer)
}

// chartWritten says where the chart went (stderr under --output json).
func chartWritten(w io.Writer, path string) {
	if path == "" || w == nil {
		return
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	fmt.Fprintf(w, "wrote the chart to %s\n", path)
}

func benchEngine(c *cli.Context) error {
	for _, f := range []string{"batch"} {
		if c.IsSet(f) {
			return problem.Usagef("--%s goes with --target items; the engine's batch is --count", f)
		}
	}
	dur, err := flagvalue.Duration("duration", c.String("duration"))
	if err != nil {
		return err
	}
	delay, err := flagvalue.Duration("query-delay", c.String("query-delay"))
	if err != nil {
		return err
	}
	var work time.Duration
	if c.IsSet("work") {
		if work, err = flagvalue.Duration("work", c.String("work")); err != nil {
			return err
		}
	}
	rows := c.Int("rows")
	cfg := bench.EngineConfig{DSN: c.String("db"), MustExist: c.IsSet("db"), Strategy: strings.ToLower(c.String("strategy")), Workers: c.Int("workers"),
		Processes: c.Int("processes"), Count: c.Int("count"), Rows: rows, Duration: dur, QueryDelay: delay, Prefetch: c.Int("prefetch"), Work: work,
		NoRaw: c.Bool("no-raw"), Chart: c.String("chart"), AllowUserTasks: c.Bool("allow-user-tasks"), Dispose: strings.ToLower(c.String("dispose"))}
	if err := cfg.Validate(); err != nil {
		return err
	}
	notes := c.App.Writer
	if c.String("output") == "json" {
		notes = c.App.ErrWriter
	}
	r, err := bench.RunEngine(c.Context, cfg)
	if err != nil {
		return err
	}
	if err := emit(c, r, func(w io.Writer) { bench.WriteEngineText(w, r) }); err != nil {
		return err
	}
	chartWritten(notes, cfg.Chart)
	if r.Duplicates != 0 || r.ItemsTwice != 0 || r.Pending != 0 || r.LoansCounted != r.Loans || r.RawDuplicates != 0 {
		return &problem.Error{Kind: problem.Failure,
			Msg:  fmt.Sprintf("bench --target engine found %d duplicate assignments, %d items worked twice, %d requests left pending, %d loans counted for %d work rows", r.Duplicates, r.ItemsTwice, r.Pending, r.LoansCounted, r.Loans),
			Hint: "a loan handed out twice means the lock did not hold; please report it with the output of `loanq sql`"}
	}
	return nil
}

func benchEngineWorker(c *cli.Context) error {
	dur, err := flagvalue.Duration("duration", c.String("duration"))
	if err != nil {
		return err
	}
	work, err := flagvalue.Duration("work", c.String("work"))
	if err != nil {
		return err
	}
	return bench.RunEngineChild(c.Context, bench.EngineChildConfig{DSN: c.String("db"), Strategy: c.String("strategy"),
		First: c.Int("first"), Workers: c.Int("workers"), Count: c.Int("count"), Duration: dur, Work: work, Batch: c.Bool("batch-dispose"), Marks: c.Bool("marks")}, os.Stdin, c.App.Writer)
}

func benchCLI(c *cli.Context) error {
	for _, f := range []string{"batch", "workers", "count", "query-delay", "prefetch", "no-raw", "chart", "work", "dispose"} {
		if c.IsSet(f) {
			return problem.Usagef("--%s does not go with --target cli (its loops are --processes, each call --count 1)", f)
		}
	}
	dur := 20 * time.Second
	if c.IsSet("duration") {
		var err error
		if dur, err = flagvalue.Duration("duration", c.String("duration")); err != nil {
			return err
		}
	}
	procs := 8
	if c.IsSet("processes") {
		procs = c.Int("processes")
	}
	rows := 100_000
	if c.IsSet("rows") {
		rows = c.Int("rows")
	}
	cfg := bench.CLIConfig{DSN: c.String("db"), MustExist: c.IsSet("db"), Strategy: strings.ToLower(c.String("strategy")), Processes: procs, Rows: rows, Duration: dur,
		AllowUserTasks: c.Bool("allow-user-tasks")}
	if err := cfg.Validate(); err != nil {
		return err
	}
	r, err := bench.RunCLI(c.Context, cfg)
	if err != nil {
		return err
	}
	if err := emit(c, r, func(w io.Writer) { bench.WriteCLIText(w, r) }); err != nil {
		return err
	}
	if r.Duplicates != 0 || r.Pending != 0 {
		return &problem.Error{Kind: problem.Failure,
			Msg:  fmt.Sprintf("bench --target cli found %d duplicate assignments and %d requests left pending", r.Duplicates, r.Pending),
			Hint: "a loan handed out twice means the lock did not hold; please report it with the output of `loanq sql`"}
	}
	return nil
}
