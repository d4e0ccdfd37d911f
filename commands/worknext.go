package commands

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/flagvalue"
	"github.com/loanq/loanq/internal/textsafe"
	"github.com/loanq/loanq/problem"
)

func workNextCommand() *cli.Command {
	return &cli.Command{
		Name:      "next",
		Usage:     "get the next work across every task you may work: by task priority, then the task waiting longest",
		ArgsUsage: " ",
		Description: `Asks the tasks in order, each as "work get --no-wait" would, until --count
loans are handed out: by default the tasks with the highest --priority (task
create) first, and among equals the one nobody asked for work the longest;
--task-order oldest puts that one first whatever its priority. A task whose
lock another caller holds is passed over (its request cancelled) while
another task has work; only when every task with work is busy does work next
wait, for the first of them (woken by its holder's commit), then ask them all
again, until --timeout. Each loan says which task it came from.

Exit codes: 0 served (also "empty": no task had a loan), 2 bad input,
75 every task with work stayed busy (--no-wait, or --timeout passed),
1 other failure, 130/143 interrupted.

Examples:
   loanq --user oliver work next
   loanq --user oliver work next --count 5 --task-order oldest
   loanq --user oliver --output json work next --no-wait`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "count", Aliases: []string{"n"}, Value: 1, Usage: fmt.Sprintf("how many loans to ask for (1-%d)", dispatch.MaxCount)},
			&cli.StringFlag{Name: "task-order", Value: dispatch.OrderPriority, Usage: "priority (higher --priority first, then the task waiting longest) or oldest (the task waiting longest first)"},
			&cli.BoolFlag{Name: "no-wait", Usage: "answer busy (exit 75) at once when every task with work is busy"},
			&cli.StringFlag{Name: "timeout", Value: "2m", Usage: "stop waiting for a busy task after this long and exit 75 (0s: wait until served)"},
			&cli.StringFlag{Name: "backoff", Value: formatBackoff(dispatch.DefaultBackoff), Usage: "longest single wait for a busy task before every task is asked again; the last one repeats"},
		},
		Action: workNext,
	}
}

func workNext(c *cli.Context) error {
	if _, err := args(c); err != nil {
		return err
	}
	n := c.Int("count")
	if n < 1 || n > dispatch.MaxCount {
		return problem.Usagef("invalid --count %d: ask for between 1 and %d loans", n, dispatch.MaxCount)
	}
	order, err := dispatch.ParseTaskOrder(c.String("task-order"))
	if err != nil {
		return err
	}
	opt := dispatch.NextOptions{Order: order, NoWait: c.Bool("no-wait")}
	if opt.Timeout, err = flagvalue.Duration("timeout", c.String("timeout")); err != nil {
		return err
	}
	if opt.Timeout < 0 {
		return problem.Usagef("invalid --timeout %s: give 0s or a positive duration", opt.Timeout)
	}
	if opt.Backoff, err = flagvalue.Backoff(c.String("backoff")); err != nil {
		return err
	}
	e, err := openActing(c)
	if err != nil {
		return err
	}
	defer e.Close()
	opt.CancelAs = e.user
	ans, err := e.Next(c.Context, e.user, n, opt)
	if ans == nil {
		return err
	}
	if ans.Notice != "" {
		fmt.Fprintf(c.App.ErrWriter, "loanq: %s\n", textsafe.Escape(ans.Notice))
	}
	perr := emit(c, ans, func(w io.Writer) {
		fmt.Fprintf(w, "work next for %s (task order %s): %s, %d of %d loan(s)\n", textsafe.Escape(ans.User), ans.Order, ans.Status, ans.Assigned, ans.Requested)
		printLoanItems(w, ans.Work, true)
		var tried []string
		for _, t := range ans.Tried {
			tried = append(tried, fmt.Sprintf("%s %s %d", textsafe.Escape(t.Task), t.Status, t.Assigned))
		}
		if len(tried) > 0 {
			fmt.Fprintf(w, "tasks asked: %s\n", strings.Join(tried, ", "))
		}
	})
	if err != nil {
		return err
	}
	return perr
}

// printLoanItems prints loans with their details and links, a line each
// (work get, work status, work next); nothing when none shows anything and
// the task is not asked for.
func printLoanItems(w io.Writer, items []dispatch.LoanItem, withTask bool) {
	shows := withTask
	for _, it := range items {
		if len(it.Details) > 0 || it.Link != nil {
			shows = true
		}
	}
	if !shows || len(items) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "LOAN\tDETAILS\tLINK"
	if withTask {
		head = "TASK\t" + head
	}
	fmt.Fprintln(tw, head)
	for _, it := range items {
		line := fmt.Sprintf("%s\t%s\t%s", textsafe.Escape(it.LoanID.String()), detailsText(it.Details), linkText(it.Link))
		if withTask {
			line = textsafe.Escape(it.Task) + "\t" + line
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
}

// detailsText is a loan's details as "column=value, …" (NULL: -), each
// value escaped for the terminal.
func detailsText(d dispatch.Details) string {
	if len(d) == 0 {
		return "-"
	}
	parts := make([]string, len(d))
	for i, x := range d {
		v := "-"
		if x.Value != nil {
			v = *x.Value
		}
		parts[i] = textsafe.Escape(x.Column) + "=" + textsafe.Escape(v)
	}
	return strings.Join(parts, ", ")
}

func linkText(l *string) string {
	if l == nil {
		return "-"
	}
	return textsafe.Escape(*l)
}
