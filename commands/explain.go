package commands

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/textsafe"
	"github.com/loanq/loanq/problem"
)

func explainCommand() *cli.Command {
	return &cli.Command{
		Name:      "explain",
		Usage:     "show what one get of a task sends, how the database plans it, and how many rows one claim locks",
		ArgsUsage: "TASK",
		Description: `For DBAs validating locking behaviour: the statements the task's lock
strategy sends for one get (the task lock, the criteria or claim query, with
their binds), the database's plan for the query that reads the source
(EXPLAIN; the index used and whether the rows are sorted), and a probe: one
claim of --count rows inside a transaction that is rolled back, while a
second session counts how many of the task's eligible rows it can still
lock with SKIP LOCKED (rows locked = eligible - still lockable; on MySQL 8
also performance_schema.data_locks, gap and next-key locks included).

The verdict says whether concurrent callers share the work ("ok: a claim of
5 locks 5 rows") or skip each other ("warning: a claim of 5 locks 600 rows
(the order needs a sort)"), with an index that would serve the order — a
suggestion derived from --where and --order, to check before creating it.

Nothing is changed: both transactions roll back. Callers claiming at the
same moment are counted too: run it when the task is quiet. SQLite has no
row locks: explain shows the plan (EXPLAIN QUERY PLAN) only.

Examples:
   loanq explain verify-bank
   loanq explain verify-bank --count 20
   loanq --output json explain verify-bank`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "count", Value: 5, Usage: "rows one probed claim asks for (a get's --count)"},
		},
		Action: explainAction,
	}
}

func explainAction(c *cli.Context) error {
	a, err := args(c, "TASK")
	if err != nil {
		return err
	}
	if err := dispatch.ValidateTaskName(a[0]); err != nil {
		return err
	}
	if n := c.Int("count"); n < 1 || n > dispatch.MaxCount {
		return problem.Usagef("invalid --count %d: give between 1 and %d", n, dispatch.MaxCount)
	}
	e, err := open(c)
	if err != nil {
		return err
	}
	defer e.Close()
	x, err := e.ExplainFor(c.Context, a[0], c.Int("count"), e.user) // a four-eyes rule as this user's get applies it
	if err != nil {
		return err
	}
	return emit(c, x, func(w io.Writer) { writeExplain(w, x) })
}

func writeExplain(w io.Writer, x *dispatch.Explanation) {
	fmt.Fprintf(w, "task %s on %s, lock %s, one get of %d\n", textsafe.Escape(x.Task), x.Database, x.Strategy, x.Count)
	for i, s := range x.Statements {
		binds := make([]string, len(s.Binds))
		for j, b := range s.Binds {
			binds[j] = fmt.Sprint(b)
		}
		fmt.Fprintf(w, "\n%d. %s\n   binds: %s\n", i+1, s.Purpose, strings.Join(binds, ", "))
		for _, l := range strings.Split(s.SQL, "\n") {
			fmt.Fprintf(w, "   | %s\n", textsafe.Escape(l))
		}
		if s.Plan != nil {
			fmt.Fprintf(w, "   plan:\n")
			for _, l := range s.Plan {
				fmt.Fprintf(w, "   > %s\n", textsafe.Escape(l))
			}
			idx := s.Index
			if idx == "" {
				idx = "none (the table itself)"
			}
			sorted := "no"
			if s.Sort {
				sorted = "yes: no index serves the order"
			}
			fmt.Fprintf(w, "   index used: %s; sort: %s\n", textsafe.Escape(idx), sorted)
		}
	}
	p := x.Probe
	fmt.Fprintf(w, "\nprobe: one claim of %d in a transaction rolled back\n", x.Count)
	if p.Measured {
		fmt.Fprintf(w, "  claimed %d; eligible %d; a second session could still lock %d; rows locked by the claim %d\n",
			p.Claimed, p.Eligible, p.StillLockable, p.RowsLocked)
		if p.RecordsLockedMeasured {
			fmt.Fprintf(w, "  InnoDB: the claim's transaction holds %d record locks (INNODB_TRX.trx_rows_locked; about 2 per row read through a secondary index)\n", p.RecordsLocked)
			if dispatch.PassedOverLocked(p) {
				fmt.Fprintf(w, "  the claim also keeps locked rows it passed over (loans in work, rows its WHERE turned away) until it commits: updates of them wait for it (docs/mysql.md)\n")
			}
		}
		switch {
		case p.DataLocksReadable:
			fmt.Fprintf(w, "  performance_schema.data_locks of the claim (%d):\n", len(p.DataLocks))
			for _, l := range p.DataLocks {
				fmt.Fprintf(w, "    %s\n", textsafe.Escape(l))
			}
		case x.Database == "mysql":
			fmt.Fprintf(w, "  performance_schema.data_locks: not readable here (MariaDB has none; MySQL 8 needs SELECT on performance_schema)\n")
		}
	} else {
		fmt.Fprintf(w, "  claimed %d; not measured\n", p.Claimed)
	}
	if p.Note != "" && p.Measured {
		fmt.Fprintf(w, "  note: %s\n", strings.TrimSpace(p.Note))
	}
	fmt.Fprintf(w, "\n%s\n", textsafe.Escape(x.Message))
}
