package commands

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/textsafe"
	"github.com/loanq/loanq/problem"
)

func dispositionCommand() *cli.Command {
	return &cli.Command{
		Name:      "disposition",
		Usage:     "end your active assignment of a loan: complete, return (after a delay) or never",
		ArgsUsage: "TASK LOAN complete|return|never",
		Description: `complete  done; the loan comes back later only if it still matches the criteria
return    back to the queue once --after has passed (0s to 72h; 0s: at once)
never     never assigned again for this task

Only the loan's assignee may disposition it. Every disposition is kept as history.

--reason CODE says why, with one of the codes the task declares for the
action (loanq task show TASK lists them; task create|update --reasons
declares them, --require-reason makes one mandatory). --note TEXT is free
text kept with the disposition, at most 1000 characters (docs/reasons.md).

Examples:
   loanq --user oliver disposition verify-bank 123 complete
   loanq --user oliver disposition verify-bank 456 return --after 4h --reason waiting-docs
   loanq --user oliver disposition verify-bank 789 never --reason duplicate --note "same borrower as loan 788"`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "after", Usage: "with return: how long until the loan is back in the queue (0s-72h)"},
			&cli.StringFlag{Name: "reason", Usage: "why: one of the task's reason codes for the action (loanq task show TASK lists them)"},
			&cli.StringFlag{Name: "note", Usage: "free text kept with the disposition (at most 1000 characters)"},
		},
		Action: disposition,
	}
}

func disposition(c *cli.Context) error {
	a, err := args(c, "TASK", "LOAN", "ACTION")
	if err != nil {
		return err
	}
	if err := dispatch.ValidateTaskName(a[0]); err != nil {
		return err
	}
	// The key is parsed per the task's key kind (an integer task refuses
	// "abc"), once the task is read: Dispose.
	loan := a[1]
	if loan == "" {
		return problem.Usagef("no loan id: give the loan id that `loanq pipeline` shows")
	}
	afterGiven := c.IsSet("after")
	after := int64(0)
	if afterGiven {
		d, err := dispatch.ParseReturnAfter(c.String("after"))
		if err != nil {
			return err
		}
		after = int64(d)
	}
	action, err := dispatch.CheckDisposition(a[2], durationOf(after), afterGiven)
	if err != nil {
		return err
	}
	if err := dispatch.CheckReturnTime(action, afterGiven, "--after"); err != nil {
		return err
	}
	note := dispatch.DispositionNote{Reason: c.String("reason"), Note: c.String("note")}
	if err := dispatch.CheckReasonAndNote(note.Reason, note.Note); err != nil {
		return err
	}
	e, err := openActing(c)
	if err != nil {
		return err
	}
	defer e.Close()
	d, err := e.DisposeNoted(c.Context, a[0], loan, e.user, action, durationOf(after), afterGiven, note)
	if err != nil {
		return err
	}
	return emit(c, d, func(w io.Writer) {
		why := ""
		if d.Reason != "" {
			why = " (reason " + textsafe.Escape(d.Reason) + ")"
		}
		if d.Disposition == dispatch.Return {
			fmt.Fprintf(w, "loan %s in task %s: returned to the queue after %s%s\n", textsafe.Escape(d.LoanID.String()), textsafe.Escape(d.Task), d.After, why)
			return
		}
		fmt.Fprintf(w, "loan %s in task %s: %s%s\n", textsafe.Escape(d.LoanID.String()), textsafe.Escape(d.Task), d.Disposition, why)
	})
}
