package commands

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/textsafe"
)

// The flags of task create|update that say who may work a task and its
// four-eyes rule (docs/governance.md), and what task show prints of them.

// repeated is a flag value given once per value: unlike StringSliceFlag it
// does not split at commas (a user name may hold one).
type repeated []string

func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }
func (r *repeated) String() string     { return strings.Join(*r, " ") }

func governanceFlags(update bool) []cli.Flag {
	flags := []cli.Flag{
		&cli.GenericFlag{Name: "allow", Value: &repeated{}, Usage: "a `USER` or @GROUP who may work the task (repeat; without any, everyone may" +
			map[bool]string{true: "; adds to the list", false: ""}[update] + ")"},
		&cli.GenericFlag{Name: "not-worked-in", Value: &repeated{}, Usage: "four eyes: never hand a loan to a user who worked it in `TASK` (repeat" +
			map[bool]string{true: "; adds to the list", false: ""}[update] + ")"},
	}
	if update {
		flags = append(flags,
			&cli.BoolFlag{Name: "allow-clear", Usage: "empty the allow list first: everyone may work the task (with --allow: replace the list)"},
			&cli.BoolFlag{Name: "not-worked-in-clear", Usage: "drop the four-eyes rule first (with --not-worked-in: replace the list)"})
	}
	return flags
}

func governanceChange(c *cli.Context) dispatch.GovernanceChange {
	list := func(name string) []string {
		if r, ok := c.Generic(name).(*repeated); ok && r != nil {
			return *r
		}
		return nil
	}
	return dispatch.GovernanceChange{Allow: list("allow"), AllowClear: c.Bool("allow-clear"),
		NotWorkedIn: list("not-worked-in"), NotWorkedInClear: c.Bool("not-worked-in-clear")}
}

// governanceLines prints task show's lines of the task's allow list and
// four-eyes rule.
func governanceLines(tw *tabwriter.Writer, g dispatch.Governance) {
	if len(g.Allow) == 0 {
		fmt.Fprintf(tw, "allowed:\teveryone (no --allow)\n")
	} else {
		fmt.Fprintf(tw, "allowed:\t%s\n", textsafe.Escape(strings.Join(g.Allow, ", ")))
	}
	if len(g.NotWorkedIn) == 0 {
		fmt.Fprintf(tw, "four eyes:\t- (no --not-worked-in)\n")
	} else {
		fmt.Fprintf(tw, "four eyes:\tnever to a user who worked the loan in %s\n", textsafe.Escape(strings.Join(g.NotWorkedIn, ", ")))
	}
}

// governanceJSON adds task show's keys.
func governanceJSON(tj map[string]any, g dispatch.Governance) {
	tj["allow"] = orEmpty(g.Allow)
	tj["not_worked_in"] = orEmpty(g.NotWorkedIn)
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// listableTasks is task list's tasks: every task, or, for a processor's
// database account, the tasks the user it acts as may work.
func listableTasks(c *cli.Context, e *env) ([]*dispatch.Task, error) {
	requested := ""
	if c.IsSet("user") {
		requested = c.String("user")
	}
	who, err := e.UntrustedUser(c.Context, requested, e.user)
	if err != nil {
		return nil, err
	}
	if who == "" {
		return e.Tasks(c.Context)
	}
	return e.WorkableTasks(c.Context, who)
}
