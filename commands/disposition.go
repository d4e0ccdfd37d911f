package commands

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/textsafe"
	"github.com/loanq/loanq/loankey"
	"github.com/loanq/loanq/problem"
)

func dispositionCommand() *cli.Command {
	return &cli.Command{
		Name:      "disposition",
		Usage:     "end your active assignment of a loan (or of several): complete, return (after a delay) or never",
		ArgsUsage: "TASK LOAN [LOAN…] complete|return|never",
		Description: `complete  done; the loan comes back later only if it still matches the criteria
return    back to the queue once --after has passed (0s to 72h; 0s: at once)
never     never assigned again for this task

Only the loan's assignee may disposition it. Every disposition is kept as history.

Several loans (at most 1000) go between the task and the action, or one per
line on stdin when LOAN is - (blank lines ignored): one call, one transaction,
all or nothing. If any of them is not your active work in the task (someone
else's, already dispositioned, never assigned) or the reason is refused,
nothing changes, the command exits 2 and says which loans and why. The output
is one line, or with -o json one document for all of them (docs/json.md); a
single LOAN prints as before. An empty stdin dispositions nothing (exit 0).

--reason CODE says why, with one of the codes the task declares for the
action (loanq task show TASK lists them; task create|update --reasons
declares them, --require-reason makes one mandatory). --note TEXT is free
text kept with the disposition, at most 1000 characters (docs/reasons.md).

Examples:
   loanq --user oliver disposition verify-bank 123 complete
   loanq --user oliver disposition verify-bank 456 return --after 4h --reason waiting-docs
   loanq --user oliver disposition verify-bank 789 never --reason duplicate --note "same borrower as loan 788"
   loanq --user oliver disposition verify-bank 123 456 789 complete
   loanq --user oliver -o json work get verify-bank --count 50 | jq -r '.loans[]' | loanq --user oliver disposition verify-bank - complete`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "after", Usage: "with return: how long until the loan is back in the queue (0s-72h)"},
			&cli.StringFlag{Name: "reason", Usage: "why: one of the task's reason codes for the action (loanq task show TASK lists them)"},
			&cli.StringFlag{Name: "note", Usage: "free text kept with the disposition (at most 1000 characters)"},
		},
		Action: disposition,
	}
}

func disposition(c *cli.Context) error {
	all := c.Args().Slice()
	if len(all) < 3 {
		return problem.Usagef("`%s` takes TASK LOAN [LOAN…] ACTION (got %d argument(s)); see `%s --help`",
			c.Command.HelpName, len(all), c.Command.HelpName)
	}
	task, loans, actionArg := all[0], all[1:len(all)-1], all[len(all)-1]
	if err := dispatch.ValidateTaskName(task); err != nil {
		return err
	}
	// One LOAN prints as it always has; a list, or - (stdin), prints one
	// document for all of them, however many stdin held.
	batch := len(loans) > 1 || loans[0] == "-"
	// The keys are parsed per the task's key kind (an integer task refuses
	// "abc"), once the task is read: Dispose, DisposeMany.
	if !batch && loans[0] == "" {
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
	action, err := dispatch.CheckDisposition(actionArg, durationOf(after), afterGiven)
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
	if batch {
		if loans, err = batchLoans(c, loans); err != nil {
			return err
		}
		return dispositionMany(c, task, loans, action, durationOf(after), afterGiven, note)
	}
	e, err := openActing(c)
	if err != nil {
		return err
	}
	defer e.Close()
	d, err := e.DisposeNoted(c.Context, task, loans[0], e.user, action, durationOf(after), afterGiven, note)
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

// batchLoans is the list of a batch disposition: the LOAN arguments, or
// with - the lines of stdin (blank lines ignored, spaces around a key
// trimmed). Checked before connecting (dispatch.CheckDisposeLoans); an
// empty stdin is an empty list, which disposes of nothing.
func batchLoans(c *cli.Context, args []string) ([]string, error) {
	if len(args) == 1 && args[0] == "-" {
		in := c.App.Reader
		if in == nil {
			in = os.Stdin
		}
		var loans []string
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 0, 4096), 64<<10)
		for sc.Scan() {
			if l := strings.TrimSpace(sc.Text()); l != "" {
				if len(loans) == dispatch.MaxDisposeMany {
					return nil, problem.Usagef("more than %d loans on stdin: one disposition takes at most %d; split the list (e.g. xargs -n %d)",
						dispatch.MaxDisposeMany, dispatch.MaxDisposeMany, dispatch.MaxDisposeMany)
				}
				loans = append(loans, l)
			}
		}
		if err := sc.Err(); err != nil {
			return nil, problem.AsUsage(err, "reading the loans from stdin (one per line)")
		}
		if len(loans) == 0 {
			return loans, nil
		}
		return loans, dispatch.CheckDisposeLoans(loans)
	}
	for _, a := range args {
		if a == "-" {
			return nil, problem.Usagef("- (the loans on stdin) goes alone: give either loans or -, not both")
		}
	}
	return args, dispatch.CheckDisposeLoans(args)
}

// dispositionMany disposes of several loans in one call (DisposeMany) and
// prints one line, or one JSON document, for all of them.
func dispositionMany(c *cli.Context, task string, loans []string, action string, after time.Duration, afterGiven bool, note dispatch.DispositionNote) error {
	e, err := openActing(c)
	if err != nil {
		return err
	}
	defer e.Close()
	var d *dispatch.DisposedMany
	if len(loans) == 0 {
		// Nothing on stdin (a drained queue's empty answer): nothing to
		// change, but a task that does not exist is still an error.
		if _, err := e.Task(c.Context, task); err != nil {
			return err
		}
		d = &dispatch.DisposedMany{Task: task, User: e.user, Disposition: action, Reason: note.Reason, Note: note.Note, Loans: []loankey.Key{}}
		if action == dispatch.Return {
			d.After, d.AfterSecs, d.AfterMS = after, after.Seconds(), after.Milliseconds()
		}
	} else if d, err = e.DisposeMany(c.Context, task, loans, e.user, action, after, afterGiven, note); err != nil {
		return err
	}
	return emit(c, d, func(w io.Writer) {
		why := ""
		if d.Reason != "" {
			why = " (reason " + textsafe.Escape(d.Reason) + ")"
		}
		n := fmt.Sprintf("%d loans", d.Count)
		if d.Count == 1 {
			n = "1 loan"
		}
		if d.Disposition == dispatch.Return {
			fmt.Fprintf(w, "return: %s of task %s (%s), back in the queue after %s%s\n", n, textsafe.Escape(d.Task), textsafe.Escape(d.User), d.After, why)
			return
		}
		fmt.Fprintf(w, "%s: %s of task %s (%s)%s\n", d.Disposition, n, textsafe.Escape(d.Task), textsafe.Escape(d.User), why)
	})
}
