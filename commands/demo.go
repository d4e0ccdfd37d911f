package commands

import (
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/demo"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/dsn"
	"github.com/loanq/loanq/internal/flagvalue"
	"github.com/loanq/loanq/problem"
)

func demoCommand() *cli.Command {
	common := []cli.Flag{
		&cli.IntFlag{Name: "loans", Value: demo.DefaultLoans, Usage: "how many sample loans to create"},
		&cli.Uint64Flag{Name: "seed", Value: demo.DefaultSeed, Usage: "seed of the sample data: the same seed gives the same loans"},
		&cli.StringFlag{Name: "query-delay", Value: demo.DefaultQueryDelay.String(), Usage: "how long task verify-bank's criteria query takes under the lock (stands in for a heavy query)"},
	}
	return &cli.Command{
		Name:  "demo",
		Usage: "watch several simulated processors share work queues on sample data, then check the invariant",
		Description: `Creates a sample application table "loan" with a few thousand loans and three
tasks over it (verify-bank, big-loans, call-borrower), then runs simulated
processors at once, each with its own database connection: they get work
(answered busy while another caller holds the task lock, then rechecked),
work briefly and disposition it (mostly complete, some return, a few never).
The summary is read from the database: requests, busy answers, criteria-query
runs against requests served (coalescing), loans per processor, dispositions,
and the audit of the invariant: no loan active twice in a task.

Running it again resets its own data (the loan table and the demo's tasks,
never other tasks). On a --db other than the SQLite default it also applies
loanq's schema if needed. Exit codes: 0 PASS, 1 the invariant or the audit
failed, 2 bad input (e.g. a "loan" table that is not the demo's).

Examples:
   loanq demo
   loanq demo --processors 10 --duration 15s
   loanq --db postgres://postgres@127.0.0.1:5432/demo --output json demo`,
		Flags: append([]cli.Flag{
			&cli.IntFlag{Name: "processors", Aliases: []string{"p"}, Value: demo.DefaultProcessors, Usage: "how many simulated processors run at once"},
			&cli.StringFlag{Name: "duration", Value: demo.DefaultDuration.String(), Usage: "how long the processors ask for work"},
		}, common...),
		Action: demoRun,
		Subcommands: []*cli.Command{
			{
				Name:      "seed",
				Usage:     "create only the sample loans and tasks, to try the commands by hand",
				ArgsUsage: " ",
				Description: `Creates (or resets) the sample table "loan" and the demo's tasks, runs no
processors, and prints commands to try next.

Examples:
   loanq demo seed
   loanq demo seed --loans 500`,
				Flags:  common,
				Action: demoSeed,
			},
		},
	}
}

func demoConfig(c *cli.Context) (demo.Config, error) {
	// Zero means "the default" to the demo package; on the command line it is a mistake.
	for _, f := range []string{"loans", "processors"} {
		if c.IsSet(f) && c.Int(f) == 0 {
			return demo.Config{}, problem.Usagef("invalid --%s 0: give a positive number", f)
		}
	}
	cfg := demo.Config{DSN: c.String("db"), Loans: c.Int("loans"), Seed: c.Uint64("seed")}
	var err error
	if cfg.QueryDelay, err = flagvalue.Duration("query-delay", c.String("query-delay")); err != nil {
		return cfg, err
	}
	if c.String("output") != "json" {
		cfg.Log = c.App.Writer
	}
	return cfg, nil
}

func demoRun(c *cli.Context) error {
	if _, err := args(c); err != nil {
		return err
	}
	cfg, err := demoConfig(c)
	if err != nil {
		return err
	}
	cfg.Processors = c.Int("processors")
	if cfg.Duration, err = flagvalue.Duration("duration", c.String("duration")); err != nil {
		return err
	}
	if cfg.Duration <= 0 {
		return problem.Usagef("invalid --duration %s: give between 1s and 10m", cfg.Duration)
	}
	if cfg.Log != nil && isTerminal(c.App.Writer) {
		cfg.Progress = c.App.Writer
	}
	s, err := demo.Run(c.Context, cfg)
	if err != nil {
		return err
	}
	if err := emit(c, s, func(w io.Writer) {
		s.WriteText(w)
		if s.Passed {
			fmt.Fprintf(w, "\nThe data stays in the database; try:\n")
			tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
			fmt.Fprintf(tw, "   loanq%s --user %s pipeline\t# what %s still holds\n", dbFlag(c), s.ByProcessor[0].User, s.ByProcessor[0].User)
			fmt.Fprintf(tw, "   loanq%s task show verify-bank\t# its latest criteria-query runs\n", dbFlag(c))
			tw.Flush()
		}
	}); err != nil {
		return err
	}
	if !s.Passed {
		return &problem.Error{Kind: problem.Failure,
			Msg:  fmt.Sprintf("demo failed: invariant %s, audit clean %t, %d processor error(s)", s.Invariant, s.AuditClean, len(s.Errors)),
			Hint: "the summary above says what was found; please report it with the output of `loanq sql`"}
	}
	return nil
}

func demoSeed(c *cli.Context) error {
	if _, err := args(c); err != nil {
		return err
	}
	cfg, err := demoConfig(c)
	if err != nil {
		return err
	}
	s, err := demo.Seed(c.Context, cfg)
	if err != nil {
		return err
	}
	db := dbFlag(c)
	return emit(c, s, func(w io.Writer) {
		fmt.Fprintf(w, "\nSample data ready on %s. Try:\n", s.Database)
		for _, line := range []string{
			"loanq" + db + " task list",
			"loanq" + db + " --user ana work get verify-bank --count 3",
			"loanq" + db + " --user ben work get verify-bank --count 3 --no-wait   # exit 75 if the lock is held",
			"loanq" + db + " --user ana pipeline",
			"loanq" + db + " --user ana disposition verify-bank LOAN complete",
			"loanq" + db + " --user ana disposition verify-bank LOAN return --after 1h",
			"loanq" + db + " task show verify-bank",
		} {
			fmt.Fprintf(w, "   %s\n", line)
		}
	})
}

// dbFlag repeats --db in suggested commands unless it is the default or
// the environment already gives it (LOANQ_DB, or DATABASE_URL without
// LOANQ_DB): a suggested command typed in the same shell then reaches the
// same database without --db, and without a password to type again (a
// printed DSN shows it as ***).
func dbFlag(c *cli.Context) string {
	raw := c.String("db")
	_, target, err := drivers.ParseDSN(raw)
	if err != nil || target.Redacted() == dsn.Default || raw == envDSN() {
		return ""
	}
	return " --db '" + target.Redacted() + "'"
}

// envDSN is the DSN the environment gives --db, read as urfave/cli reads
// the flag's EnvVars (app.go): the first variable that is set, "" if none.
func envDSN() string {
	for _, name := range []string{"LOANQ_DB", "DATABASE_URL"} {
		if v, ok := os.LookupEnv(name); ok {
			return v
		}
	}
	return ""
}

// isTerminal reports whether w is a terminal, so that the \r progress line
// never ends up in a file or a pipe.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
