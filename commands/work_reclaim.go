package commands

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/internal/flagvalue"
	"github.com/loanq/loanq/internal/textsafe"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/jsondoc"
	"github.com/loanq/loanq/problem"
)

func workReclaimCommand() *cli.Command {
	return &cli.Command{
		Name:      "reclaim",
		Usage:     "return active work of a task to the queue by hand (supervisors)",
		ArgsUsage: "TASK",
		Description: `Ends the task's active assignments, of every processor or of --of USER, at
least --older-than old (database clock), as "reclaimed": the loans are
eligible again at once, and the history keeps who held them, since when, and
who (--user) reclaimed them. --dry-run lists what would be returned and
changes nothing. A task's --max-hold does the same automatically ("expired").

Exit codes: 0 done (also when nothing matched), 2 bad input, 1 other failure.

Examples:
   loanq --user sam work reclaim verify-bank --of oliver
   loanq --user sam work reclaim verify-bank --older-than 8h --dry-run
   loanq --user sam --output json work reclaim verify-bank --older-than 48h`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "of", Usage: "only the work of this processor (user name)"},
			&cli.StringFlag{Name: "older-than", Value: "0s", Usage: "only work assigned at least this long ago"},
			&cli.BoolFlag{Name: "dry-run", Usage: "list what would be returned; change nothing"},
		},
		Action: workReclaim,
	}
}

func workReclaim(c *cli.Context) error {
	a, err := args(c, "TASK")
	if err != nil {
		return err
	}
	if err := dispatch.ValidateTaskName(a[0]); err != nil {
		return err
	}
	older, err := flagvalue.Duration("older-than", c.String("older-than"))
	if err != nil {
		return err
	}
	if older < 0 {
		return problem.Usagef("invalid --older-than %s: give 0s or a positive duration", c.String("older-than"))
	}
	e, err := openActing(c)
	if err != nil {
		return err
	}
	defer e.Close()
	dry := c.Bool("dry-run")
	items, err := e.Reclaim(c.Context, a[0], e.user, c.String("of"), older, dry)
	if err != nil {
		return err
	}
	doc := jsondoc.Reclaim(a[0], e.user, dry, items)
	return emit(c, doc, func(w io.Writer) {
		verb := "returned to the queue"
		if dry {
			verb = "would be returned (dry run, nothing changed)"
		}
		fmt.Fprintf(w, "task %s: %d assignment(s) %s\n", a[0], len(items), verb)
		if len(items) == 0 {
			return
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "LOAN\tUSER\tASSIGNED\tAGE")
		for _, it := range items {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", textsafe.Escape(it.LoanID.String()), textsafe.Escape(it.User), it.AssignedAt.UTC().Format(time.RFC3339), time.Duration(it.AgeMS)*time.Millisecond)
		}
		tw.Flush()
	})
}
