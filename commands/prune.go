package commands

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/problem"
)

func pruneCommand() *cli.Command {
	return &cli.Command{
		Name:      "prune",
		Usage:     "remove old history: closed requests, criteria-query runs and ended work older than --older-than (default 90d)",
		ArgsUsage: " ",
		Description: `Removes, in short batches, the history older than --older-than (by the
database clock): closed work requests together with their work rows (and
the rows' events, which ` + "`loanq history`" + ` exports), and criteria-query runs. It keeps everything that still decides something:
pending requests, active work, 'never' dispositions, returns whose time is
still ahead (and the other loans of their requests), each task's 40 latest
criteria-query runs, and everything of the last 24 hours (today's dashboard
figures, task stats). Safe while processors work: each batch is its own short
transaction on rows no processor waits for. Prints what it removed per
table; --dry-run counts only. Needs DELETE on loanq's history tables (the
admin role of ` + "`loanq grants`" + `). See docs/retention.md.

On a schedule, one node of a farm at a time (cron, every night at 03:15):
   15 3 * * *  loanq lock run prune -- loanq prune

Exit codes: 0 done (also when nothing was old enough), 2 bad input, 1 other failure.

Examples:
   loanq prune --dry-run
   loanq prune --older-than 180d
   loanq prune --task verify-bank --older-than 30d --batch 200
   loanq --output json prune
   loanq lock run prune -- loanq prune`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "older-than", Value: "90d", Usage: "remove history older than this: days (90d) or a duration (720h); at least 24h"},
			&cli.StringFlag{Name: "task", Usage: "only this task's history (default: every task)"},
			&cli.BoolFlag{Name: "dry-run", Usage: "count what would be removed; change nothing"},
			&cli.IntFlag{Name: "batch", Value: dispatch.DefaultPruneBatch, Usage: fmt.Sprintf("requests (with their work rows) or runs per transaction, 1-%d", dispatch.MaxPruneBatch)},
		},
		Action: prune,
	}
}

func prune(c *cli.Context) error {
	if c.NArg() > 0 {
		return problem.Usagef("`loanq prune` takes no arguments (got %q); name a task with --task", c.Args().First())
	}
	age, err := parseAge("older-than", c.String("older-than"))
	if err != nil {
		return err
	}
	o := dispatch.PruneOptions{OlderThan: age, Task: c.String("task"), DryRun: c.Bool("dry-run"), Batch: c.Int("batch")}
	if err := dispatch.ValidatePrune(o); err != nil {
		return err
	}
	e, err := open(c)
	if err != nil {
		return err
	}
	defer e.Close()
	res, err := e.admin.Prune(c.Context, o)
	if err != nil {
		return err
	}
	return emit(c, res, func(w io.Writer) {
		verb := "removed"
		if res.DryRun {
			verb = "would remove (dry run, nothing changed)"
		}
		scope := "every task"
		if res.Task != "" {
			scope = "task " + res.Task
		}
		fmt.Fprintf(w, "history older than %s of %s: %s\n", dispatch.FormatAge(age), scope, verb)
		for _, t := range []struct {
			name string
			n    int64
		}{{"loanq_work_request", res.Removed.Requests}, {"loanq_work", res.Removed.Work}, {"loanq_history", res.Removed.History}, {"loanq_query_run", res.Removed.QueryRuns}} {
			fmt.Fprintf(w, "  %-20s %10d rows\n", t.name, t.n)
		}
		fmt.Fprintf(w, "%d batch(es) of at most %d in %v", res.Batches, res.Batch, time.Duration(res.DurationMS)*time.Millisecond)
		if !res.DryRun && res.Batches > 0 {
			fmt.Fprintf(w, "; longest batch %v", time.Duration(res.LongestBatchMS)*time.Millisecond)
		}
		fmt.Fprintln(w)
	})
}

// parseAge reads an age flag: whole days ("90d"), as retention is usually
// said, or a Go duration ("720h", "36h30m").
func parseAge(flag, s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if days, ok := strings.CutSuffix(t, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > 100*365 {
			return 0, problem.Usagef("invalid --%s %q: give whole days such as 90d, or a duration such as 720h", flag, s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, problem.Usagef("invalid --%s %q: give whole days such as 90d, or a duration such as 720h", flag, s)
	}
	return d, nil
}
