package commands

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/textsafe"
	"github.com/loanq/loanq/problem"
)

func taskStatsCommand() *cli.Command {
	return &cli.Command{
		Name:      "stats",
		Usage:     "per task: loans waiting, pending requests, active work per user, dispositions and criteria-query runs of the last 24 h",
		ArgsUsage: "[TASK]",
		Description: `For every task, or only TASK: pending requests; active work per user;
dispositions made in the last 24 h by kind; criteria-query runs of the last
24 h with their p50/p95 duration (nearest rank) and the mean number of
requests one run served (above 1: callers shared a query). The window is
measured with the database clock.

The backlog (loans waiting) is counted now, one COUNT per task over its
criteria with the engine's eligibility rules: it reads every eligible row,
so on large tables it costs what a criteria query without a limit costs
(docs/scaling.md). An account that may not read the source shows it as
unknown, with the reason.

Examples:
   loanq task stats
   loanq --output json task stats verify-bank`,
		Action: taskStats,
	}
}

func taskStats(c *cli.Context) error {
	if c.NArg() > 1 {
		return problem.Usagef("`loanq task stats` takes at most one argument, TASK (got %d)", c.NArg())
	}
	name := c.Args().First()
	if c.NArg() == 1 {
		if err := dispatch.ValidateTaskName(name); err != nil {
			return err
		}
	}
	e, err := open(c)
	if err != nil {
		return err
	}
	defer e.Close()
	stats, err := e.admin.Stats(c.Context, name)
	if err != nil {
		return err
	}
	if err := e.admin.AddBacklogs(c.Context, stats); err != nil {
		return err
	}
	return emit(c, map[string]any{"window_ms": dispatch.StatsWindow.Milliseconds(), "tasks": stats}, func(w io.Writer) {
		if len(stats) == 0 {
			fmt.Fprintln(w, "no tasks yet: create one with `loanq task create NAME --where SQL`")
			return
		}
		for i, s := range stats {
			if i > 0 {
				fmt.Fprintln(w)
			}
			fmt.Fprintf(w, "%s\n", textsafe.Escape(s.Task))
			fmt.Fprintf(w, "  backlog           %s\n", backlogText(s.Backlog, s.BacklogError))
			fmt.Fprintf(w, "  pending requests  %d\n", s.PendingRequests)
			users := make([]string, len(s.ActiveByUser))
			for j, u := range s.ActiveByUser {
				users[j] = fmt.Sprintf("%s %d", textsafe.Escape(u.User), u.Count)
			}
			fmt.Fprintf(w, "  active work       %d%s\n", s.ActiveTotal, bracket(strings.Join(users, ", ")))
			fmt.Fprintf(w, "  last 24 h         complete %d, return %d, never %d\n",
				s.Dispositions[dispatch.Complete], s.Dispositions[dispatch.Return], s.Dispositions[dispatch.Never])
			if s.Pool != nil {
				age := "-"
				if s.Pool.AgeS != nil {
					age = (time.Duration(*s.Pool.AgeS) * time.Second).String()
				}
				fmt.Fprintf(w, "  candidate pool    %d fresh (oldest %s), %d gets served from it, %d refills\n", s.Pool.Size, age, s.Pool.Hits, s.Pool.Refills)
			}
			if s.Runs.Count == 0 {
				fmt.Fprintf(w, "  criteria runs     none in the last 24 h\n")
				continue
			}
			fmt.Fprintf(w, "  criteria runs     %d, p50 %dms, p95 %dms, %.2f requests per run\n",
				s.Runs.Count, s.Runs.P50MS, s.Runs.P95MS, s.Runs.RequestsPerRun)
		}
	})
}

func bracket(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// backlogText is a backlog figure as task show and task stats print it.
func backlogText(b *dispatch.Backlog, failed string) string {
	if b == nil {
		return "unknown: " + textsafe.Escape(failed)
	}
	when := "counted now"
	if b.AgeS > 0 {
		when = fmt.Sprintf("counted %s ago", time.Duration(b.AgeS)*time.Second)
	}
	return fmt.Sprintf("%d loan(s) waiting (%s, in %dms)", b.Loans, when, b.DurationMS)
}
