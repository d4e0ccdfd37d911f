package commands

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/flagvalue"
	"github.com/loanq/loanq/internal/textsafe"
	"github.com/loanq/loanq/problem"
)

func workListCommand() *cli.Command {
	return &cli.Command{
		Name:      "list",
		Usage:     "everyone's active work with its age, oldest first (the supervisor view)",
		ArgsUsage: " ",
		Description: `Ages are measured with the database clock. --task and --user narrow the list;
--older-than D keeps work held at least D.

Examples:
   loanq work list
   loanq work list --task verify-bank --older-than 4h
   loanq --output json work list --user oliver`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "task", Usage: "only this task"},
			&cli.StringFlag{Name: "user", Usage: "only this processor's work"},
			&cli.StringFlag{Name: "older-than", Value: "0s", Usage: "only work held at least this long (e.g. 4h)"},
		},
		Action: workList,
	}
}

func workList(c *cli.Context) error {
	if _, err := args(c); err != nil {
		return err
	}
	var f dispatch.WorkFilter
	if f.Task = c.String("task"); f.Task != "" {
		if err := dispatch.ValidateTaskName(f.Task); err != nil {
			return err
		}
	}
	f.User = c.String("user")
	if c.IsSet("user") && f.User == "" {
		return problem.Usagef("empty --user: give a processor's name, or leave --user out for everyone")
	}
	var err error
	if f.OlderThan, err = flagvalue.Duration("older-than", c.String("older-than")); err != nil {
		return err
	}
	if f.OlderThan < 0 {
		return problem.Usagef("invalid --older-than %s: give 0s or a positive duration", f.OlderThan)
	}
	e, err := open(c)
	if err != nil {
		return err
	}
	defer e.Close()
	items, err := e.admin.WorkList(c.Context, f)
	if err != nil {
		return err
	}
	return emit(c, map[string]any{"work": items}, func(w io.Writer) {
		if len(items) == 0 {
			fmt.Fprintln(w, "no active work matches")
			return
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TASK\tLOAN\tUSER\tASSIGNED AT\tAGE")
		for _, it := range items {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", textsafe.Escape(it.Task), textsafe.Escape(it.LoanID.String()), textsafe.Escape(it.User), it.AssignedAt.Format(time.RFC3339),
				(time.Duration(it.AgeMS) * time.Millisecond).Round(time.Second))
		}
		tw.Flush()
	})
}
