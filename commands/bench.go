package commands

import (
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/bench"
	"github.com/loanq/loanq/problem"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:      "bench",
		Usage:     "measure how the database's row locks share a work table between workers (seed 001's experiment)",
		ArgsUsage: " ",
		Description: `Resets and fills loanq's own item table (loanq_bench_item) with --rows items,
then runs --workers workers, each on its own connection. A worker claims up to
--batch items in a transaction with the strategy's lock, holds the lock for
--work per item (a sleep standing in for real work), marks the items done and
commits, until no item is left. lease claims with a committed UPDATE and an
expiry instead, and works with no transaction open.

Reports per strategy: elapsed time against the ideal rows × work / workers,
items per worker (read from the database), lock errors (retried after a short
backoff), and duplicates — items finished more than once — which must be 0.

  skip    SELECT … FOR UPDATE SKIP LOCKED: workers pass over each other's rows
  nowait  SELECT … FOR UPDATE NOWAIT: a held row is an error; back off, retry
  wait    SELECT … FOR UPDATE: everyone queues behind the first ready row
  lease   UPDATE … SET status = 'claimed' with an expiry (the only one on SQLite)
  all     every strategy this database supports, one after the other

--processes P runs the workers in P separate loanq processes instead of
goroutines. --chart draws one lane per worker and a bar per claim over time.
The schema must be migrated (loanq migrate up; SQLite migrates itself).
Run it on a database of its own: it only touches loanq_bench_item, but it
loads the server. See ` + "`loanq sql`" + ` for the exact statements.

Examples:
   loanq bench                                   # 10 workers × 200 items × 100ms
   loanq --db postgres://postgres@127.0.0.1:5432/bench bench --strategy all --chart run.svg
   loanq --db mysql://root@127.0.0.1:3306/bench bench --workers 32 --rows 20000 --work 0s
   loanq --db postgres://postgres@127.0.0.1:5432/bench bench --processes 5 --output json`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "strategy", Aliases: []string{"s"}, Usage: "skip, nowait, wait, lease or all (default: the database's default, skip; lease on SQLite)"},
			&cli.IntFlag{Name: "workers", Aliases: []string{"n"}, Value: bench.DefaultWorkers, Usage: "concurrent workers, each with its own connection (1-256)"},
			&cli.IntFlag{Name: "rows", Aliases: []string{"m"}, Value: bench.DefaultRows, Usage: "items to process (1-1000000)"},
			&cli.StringFlag{Name: "work", Value: bench.DefaultWork.String(), Usage: "time each item is held, e.g. 100ms (0s-10s)"},
			&cli.IntFlag{Name: "batch", Aliases: []string{"k"}, Value: bench.DefaultBatch, Usage: "items claimed per transaction (1-1000)"},
			&cli.IntFlag{Name: "processes", Aliases: []string{"p"}, Value: 1, Usage: "OS processes the workers are spread over (1-workers)"},
			&cli.StringFlag{Name: "chart", Usage: "write an SVG timeline to `FILE.svg`"},
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
		}},
	}
}

func benchRun(c *cli.Context) error {
	if _, err := args(c); err != nil {
		return err
	}
	work, err := parseDuration("work", c.String("work"))
	if err != nil {
		return err
	}
	if c.Int("processes") < 1 {
		return problem.Usagef("invalid --processes %d: give 1 to --workers (%d)", c.Int("processes"), c.Int("workers"))
	}
	if err := mustExist(c); err != nil {
		return err
	}
	cfg := bench.Config{DSN: c.String("db"), Strategy: c.String("strategy"), Workers: c.Int("workers"),
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
	var doc any = rs
	if len(rs) == 1 && cfg.Strategy != "all" {
		doc = rs[0]
	}
	if err := emit(c, doc, func(w io.Writer) { bench.WriteText(w, rs) }); err != nil {
		return err
	}
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
	work, err := parseDuration("work", c.String("work"))
	if err != nil {
		return err
	}
	return bench.RunChild(c.Context, bench.ChildConfig{DSN: c.String("db"), Strategy: c.String("strategy"),
		First: c.Int("first"), Count: c.Int("count"), Work: work, Batch: c.Int("batch")}, os.Stdin, c.App.Writer)
}
