package commands

import (
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/flagvalue"
	"github.com/loanq/loanq/internal/textsafe"
	"github.com/loanq/loanq/jsondoc"
	"github.com/loanq/loanq/problem"
)

func taskUpdateCommand() *cli.Command {
	return &cli.Command{
		Name:      "update",
		Usage:     "change a task: the options of task create; only those given change",
		ArgsUsage: "NAME",
		Description: `Changes the options given and keeps the others. The new criteria are run
against the database (and checked lockable row by row for --lock rows) before
anything is stored, as at create; bad input changes nothing (exit 2). Active
work, pending requests and the history are kept.

--max-active 0 removes the cap, --hold-limit default goes back to the derived
hold limit (of the task LOCK), --max-hold off stops returning old WORK to the
queue. A task with --lock rows is probed as at create (task create --help):
a claim that locks more than twice the rows it returns is refused unless
--allow-wide-locks. Change --lock while the task is quiet: callers already serving finish
with the strategy they started with.

Examples:
   loanq task update verify-bank --where "statements_submitted = 1 AND statements_verified = 0 AND amount > 0"
   loanq task update verify-bank --max-hold 8h --max-active 10
   loanq task update verify-bank --hold-limit default --max-hold off
   loanq task update verify-bank --show borrower,amount --link 'https://los.example/loans/{key}?b={borrower}' --priority 5
   loanq task update big-loans --allow @senior-review --allow ana
   loanq task update big-loans --allow-clear
   loanq task update second-look --not-worked-in verify-bank

--allow and --not-worked-in add to the task's lists; --allow-clear and
--not-worked-in-clear empty them first (docs/governance.md).

` + reasonsHelp,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "where", Usage: "SQL condition selecting the task's loans"},
			&cli.StringFlag{Name: "order", Usage: "SQL ORDER BY list: highest priority first"},
			&cli.StringFlag{Name: "source", Usage: "table or view holding the loans"},
			&cli.StringFlag{Name: "key", Usage: "column of --source holding the loan key: an integer, text (up to 200 characters) or UUID column"},
			&cli.IntFlag{Name: "max-active", Usage: "cap on each user's active work in this task (0: none)"},
			&cli.StringFlag{Name: "lock", Usage: "lock strategy: " + drivers.StrategyList(drivers.AllStrategies, " or ")},
			&cli.StringFlag{Name: "query-delay", Usage: "sleep this long inside the locked section (demos, tests)"},
			&cli.StringFlag{Name: "lease-ttl", Usage: "how long a lease lasts without renewal (strategy lease)"},
			&cli.StringFlag{Name: "hold-limit", Usage: "longest a caller may hold the task LOCK (\"default\": derived)"},
			&cli.StringFlag{Name: "max-hold", Usage: "age past which active WORK returns to the queue (\"off\": never)"},
			&cli.IntFlag{Name: "prefetch", Usage: "size of the task's candidate pool (0: no pool)"},
			&cli.StringFlag{Name: "prefetch-ttl", Usage: "how long a pooled candidate stays claimable (\"default\": 10m)"},
			&cli.IntFlag{Name: "prefetch-low", Usage: "pool size under which refreshers refill it (0: N/4)"},
			&cli.BoolFlag{Name: "allow-wide-locks", Usage: "with --lock rows: keep the task even when one claim locks more than twice the rows it returns (see loanq explain --help)"},
			&cli.IntFlag{Name: "priority", Usage: "order of the task in work next: higher first"},
			&cli.StringFlag{Name: "show", Usage: "columns of --source shown with each loan, comma-separated (\"\": none)"},
			&cli.StringFlag{Name: "link", Usage: "link to each loan: an http(s) URL template with {key} and {COLUMN} of --show columns, URL-escaped (\"\": none)"},
		}, append(governanceFlags(true), reasonFlags()...)...),
		Action: taskUpdate,
	}
}

func taskUpdate(c *cli.Context) error {
	a, err := args(c, "NAME")
	if err != nil {
		return err
	}
	if err := dispatch.ValidateTaskName(a[0]); err != nil {
		return err
	}
	var ch dispatch.TaskChange
	ch.AllowWideLocks = c.Bool("allow-wide-locks")
	ch.Governance = governanceChange(c)
	str := func(name string) *string {
		if !c.IsSet(name) {
			return nil
		}
		v := c.String(name)
		return &v
	}
	ch.Where, ch.Order, ch.Source, ch.Key = str("where"), str("order"), str("source"), str("key")
	if c.IsSet("max-active") {
		v := c.Int("max-active")
		ch.MaxActive = &v
	}
	if c.IsSet("lock") {
		s, err := drivers.ParseStrategy(c.String("lock"))
		if err != nil {
			return err
		}
		ch.Lock = &s
	}
	dur := func(name, zeroWord string) (*time.Duration, error) {
		if !c.IsSet(name) {
			return nil, nil
		}
		var d time.Duration
		if zeroWord != "" && c.String(name) == zeroWord {
			return &d, nil
		}
		d, err := flagvalue.Duration(name, c.String(name))
		if err != nil {
			return nil, err
		}
		if d < 0 || (zeroWord != "" && d == 0) {
			hint := "a positive duration"
			if zeroWord != "" {
				hint += fmt.Sprintf(", or %q", zeroWord)
			}
			return nil, problem.Usagef("invalid --%s %s: give %s", name, c.String(name), hint)
		}
		return &d, nil
	}
	if ch.QueryDelay, err = dur("query-delay", ""); err != nil {
		return err
	}
	if ch.LeaseTTL, err = dur("lease-ttl", ""); err != nil {
		return err
	}
	if ch.HoldLimit, err = dur("hold-limit", "default"); err != nil {
		return err
	}
	if ch.MaxHold, err = dur("max-hold", "off"); err != nil {
		return err
	}
	if ch.PrefetchTTL, err = dur("prefetch-ttl", "default"); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		dst  **int
	}{{"prefetch", &ch.Prefetch}, {"prefetch-low", &ch.PrefetchLow}} {
		if c.IsSet(f.name) {
			v := c.Int(f.name)
			*f.dst = &v
		}
	}
	if err := displayChange(c, &ch); err != nil { // task_details.go
		return err
	}
	rch, err := reasonChange(c)
	if err != nil {
		return err
	}
	// Only the reason codes change: no other option to check or write.
	reasonsOnly := rch.Given()
	for _, f := range c.LocalFlagNames() {
		if f != "reasons" && f != "require-reason" && f != "allow-wide-locks" {
			reasonsOnly = false
		}
	}
	if !reasonsOnly {
		if err := ch.Check(); err != nil { // before connecting: bad input is refused with the database down too
			return err
		}
	}
	e, err := openActing(c)
	if err != nil {
		return err
	}
	defer e.Close()
	ch.UpdatedBy = e.user
	if rch.Given() { // checked against the task's codes before anything is written
		if _, err := e.admin.PlanTaskReasons(c.Context, a[0], rch); err != nil {
			return err
		}
	}
	var t *dispatch.Task
	if reasonsOnly {
		t, err = e.Task(c.Context, a[0])
	} else {
		t, err = e.admin.UpdateTask(c.Context, a[0], ch)
	}
	if err != nil {
		return err
	}
	reasons, err := e.admin.TaskReasons(c.Context, t)
	if rch.Given() {
		reasons, err = e.admin.SetTaskReasons(c.Context, t.Name, rch)
	}
	if err != nil {
		return err
	}
	return emit(c, map[string]any{"task": reasonsDoc(jsondoc.Task(t), reasons), "updated": true}, func(w io.Writer) {
		fmt.Fprintf(w, "updated task %s (lock %s); active work and history kept\n", textsafe.Escape(t.Name), t.Lock)
	})
}
