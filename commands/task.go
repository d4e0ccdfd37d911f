package commands

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/flagvalue"
	"github.com/loanq/loanq/internal/textsafe"
	"github.com/loanq/loanq/jsondoc"
	"github.com/loanq/loanq/problem"
)

func taskCommand() *cli.Command {
	return &cli.Command{
		Name:  "task",
		Usage: "define and inspect work queues (tasks)",
		Description: `A task is a criteria query over a table or view of loans plus a priority
order. Admins create tasks; processors get work from them.

Examples:
   loanq task create verify-bank --where "statements_submitted = 1 AND statements_verified = 0" --order "submitted_at"
   loanq task list
   loanq task show verify-bank`,
		Subcommands: []*cli.Command{
			taskStatsCommand(),
			taskRefillCommand(),
			{
				Name:      "create",
				Usage:     "define a task: a criteria query over a table of loans plus a priority order",
				ArgsUsage: "NAME",
				Description: `The criteria are checked against the database (run once, nothing stored)
before the task is saved. --where and --order are SQL: only admins should be
allowed to create tasks.

Examples:
   loanq task create verify-bank --where "statements_submitted = 1 AND statements_verified = 0" --order "submitted_at"
   loanq task create big-loans --source loan_view --key loan_id --where "amount > 500000" --max-active 5 --if-not-exists
   loanq task create quick-calls --where "borrower_contacted = 0" --order "priority DESC" --lock rows
   loanq task create senior-review --where "amount > 500000 AND senior_reviewed = 0" --hold-limit 2m

--lock rows (PostgreSQL, MySQL/MariaDB, Oracle): no task lock; every caller
claims its loans straight from the source with the database's skip-locked
syntax. The criteria must be lockable row by row (no DISTINCT, GROUP BY,
aggregates or UNION in the source): task create checks it and says why not.
Give the source an index matching the criteria and the order: task create
also claims 5 rows once (rolled back, as loanq explain does) and refuses (exit 2,
with a suggested index) a task whose claim locks more than twice the rows it
returns, as InnoDB does when the order needs a sort; --allow-wide-locks keeps
it anyway, and task show prints the verdict.

   loanq task create calls-by-priority --where "borrower_contacted = 0" --order "priority DESC" --lock rows --allow-wide-locks

--hold-limit bounds how long one caller may hold the task's row lock: past it
the database ends the caller's session, rolls its work back and frees the lock
for the others (a stopped, cut-off or vanished caller cannot block the task).
Without it the limit is 4 x the slowest of the task's ten latest criteria
queries (or --query-delay), at least 30s and at most 1h (before any run was
measured, one statement may run up to 1h); task show prints the limit in
force. docs/reliability.md and docs/<database>.md say what is set.

--max-hold is about the WORK, not the lock: active work of the task older
than it (a processor whose laptop died, who went on holiday) is returned to
the queue the next time anyone gets work from the task. The history keeps
who held it, since when, and that it expired. "loanq work reclaim" returns
work by hand. Without --max-hold a new task gets 72h: work taken on a
Friday afternoon is still its holder's on Monday morning, and the work of
someone who left returns within three days (docs/abandoned-work.md weighs
it). --max-hold off keeps work until it is disposed of or reclaimed.

   loanq task create verify-bank --where "statements_submitted = 1" --max-hold 8h
   loanq task create long-reviews --where "amount > 500000" --max-hold off

--prefetch N is for heavy criteria queries: each criteria run keeps up to N
more candidates in the task's pool, and a get is served from it in one
short transaction (each candidate rechecked by key before it is assigned)
instead of waiting for a query. Run "loanq task refill --all --every 30s"
(or "loanq serve --refill") to keep pools above their low mark.

   loanq task create heavy --where "statements_submitted = 1 AND statements_verified = 0" --order "submitted_at" --prefetch 200

--show and --link say what a processor sees of each loan (work get, work
status, work next, pipeline, the API and the /work page): columns of the
source (each must exist in it: checked like --where), and a link into the
lending system whose {key} and {COLUMN} placeholders are filled with the
loan's key and shown values, URL-escaped. --priority orders the tasks of
"loanq work next": higher first.

   loanq task create verify-bank --where "statements_submitted = 1" --show borrower,amount --link 'https://los.example/loans/{key}' --priority 10

--allow USER or --allow @GROUP (repeat) limits who may work the task: anyone
else gets exit 2 from work get, 403 from the API, and does not see the task
on /work (groups: loanq group add). --not-worked-in TASK (repeat) is four
eyes: a loan is never handed out here to a user who held it in TASK, active
or disposed, as long as that history is kept (docs/governance.md).

   loanq task create second-look --where "statements_verified = 1 AND senior_reviewed = 0" --allow @senior-review --not-worked-in verify-bank

` + reasonsHelp,
				Flags: append([]cli.Flag{
					&cli.StringFlag{Name: "where", Usage: "SQL condition selecting the task's loans (required)"},
					&cli.StringFlag{Name: "order", Usage: "SQL ORDER BY list: highest priority first (the key breaks ties)"},
					&cli.StringFlag{Name: "source", Value: "loan", Usage: "table or view holding the loans"},
					&cli.StringFlag{Name: "key", Value: "id", Usage: "column of --source holding the loan key: an integer, text (up to 200 characters) or UUID column"},
					&cli.IntFlag{Name: "max-active", Usage: "cap on each user's active work in this task (0: none)"},
					&cli.StringFlag{Name: "lock", Usage: "lock strategy: " + drivers.StrategyList(drivers.AllStrategies, " or ") + " (default: skip; lease on SQLite, which has no rows)"},
					&cli.StringFlag{Name: "query-delay", Value: "0s", Usage: "sleep this long inside the locked section: simulates a heavy criteria query (demos, tests)"},
					&cli.StringFlag{Name: "lease-ttl", Value: dispatch.DefaultLeaseTTL.String(), Usage: "how long a lease lasts without renewal (strategy lease; its holder renews it every TTL/3 while it works)"},
					&cli.StringFlag{Name: "hold-limit", Usage: "longest a caller may hold the task lock before the database ends its session (default: derived from the measured criteria-query time)"},
					&cli.StringFlag{Name: "max-hold", Usage: "age past which a processor's active WORK returns to the queue (expired), checked whenever loanq serves the task (default: 72h; \"off\": never; not --hold-limit, which is about the task LOCK)"},
					&cli.IntFlag{Name: "prefetch", Usage: "keep a candidate pool of N loans from each criteria run, so that gets are served without a query (0: no pool; docs/algorithm.md)"},
					&cli.StringFlag{Name: "prefetch-ttl", Usage: "how long a pooled candidate stays claimable (default 10m)"},
					&cli.IntFlag{Name: "prefetch-low", Usage: "pool size under which task refill and serve --refill refill it (default N/4)"},
					&cli.BoolFlag{Name: "if-not-exists", Usage: "succeed without change when an identical task exists (for scripts)"},
					&cli.BoolFlag{Name: "allow-wide-locks", Usage: "with --lock rows: keep the task even when one claim locks more than twice the rows it returns (see loanq explain --help)"},
					&cli.IntFlag{Name: "priority", Usage: "order of the task in work next: higher first (default 0)"},
					&cli.StringFlag{Name: "show", Usage: "columns of --source shown with each loan, comma-separated (e.g. borrower,amount)"},
					&cli.StringFlag{Name: "link", Usage: "link to each loan: an http(s) URL template with {key} and {COLUMN} of --show columns, URL-escaped (e.g. 'https://los.example/loans/{key}')"},
				}, append(governanceFlags(false), reasonFlags()...)...),
				Action: taskCreate,
			},
			taskUpdateCommand(),
			{Name: "list", Usage: "list tasks", ArgsUsage: " ", Action: taskList,
				Description: "Examples:\n   loanq task list\n   loanq --output json task list"},
			{Name: "delete", Usage: "delete a task with its history (assignments, requests, query runs)", ArgsUsage: "NAME", Action: taskDelete,
				Description: "Refused while the task has active assignments, unless --force: deleting it\nwould take that work out of people's pipelines without a disposition.\nThe application's loans are not touched.\n\nExamples:\n   loanq task delete old-queue\n   loanq task delete old-queue --force",
				Flags:       []cli.Flag{&cli.BoolFlag{Name: "force", Usage: "delete even when loans of the task are still active in someone's pipeline"}}},
			{Name: "show", Usage: "show a task and its latest criteria-query runs", ArgsUsage: "NAME", Action: taskShow,
				Description: "Shows the task's definition and its ten latest criteria-query runs: how long\neach took, how many requests it served (more than one: coalescing) and by whom.\n\nExamples:\n   loanq task show verify-bank\n   loanq --output json task show verify-bank"},
		},
	}
}

func taskCreate(c *cli.Context) error {
	a, err := args(c, "NAME")
	if err != nil {
		return err
	}
	if err := dispatch.ValidateTaskName(a[0]); err != nil {
		return err
	}
	delay, err := flagvalue.Duration("query-delay", c.String("query-delay"))
	if err != nil {
		return err
	}
	ttl, err := flagvalue.Duration("lease-ttl", c.String("lease-ttl"))
	if err != nil {
		return err
	}
	if ttl == 0 {
		// The engine reads 0 as "the default"; given on the command line it
		// would be silently replaced by the default, so it is refused instead.
		return problem.Usagef("invalid --lease-ttl %s: give a duration between 1s and 24h (leave the flag out for the default %s)", c.String("lease-ttl"), dispatch.DefaultLeaseTTL)
	}
	var hold time.Duration
	if c.String("hold-limit") != "" {
		if hold, err = flagvalue.Duration("hold-limit", c.String("hold-limit")); err != nil {
			return err
		}
		if hold <= 0 {
			return problem.Usagef("invalid --hold-limit %s: give a positive duration such as 90s, or leave it out for the derived default", c.String("hold-limit"))
		}
	}
	maxHold, err := parseMaxHold(c)
	if err != nil {
		return err
	}
	var lock drivers.Strategy
	if c.String("lock") != "" {
		if lock, err = drivers.ParseStrategy(c.String("lock")); err != nil {
			return err
		}
	}
	var prefetchTTL time.Duration
	if c.String("prefetch-ttl") != "" {
		if prefetchTTL, err = flagvalue.Duration("prefetch-ttl", c.String("prefetch-ttl")); err != nil {
			return err
		}
		if prefetchTTL <= 0 {
			return problem.Usagef("invalid --prefetch-ttl %s: give a duration between 1s and 24h", c.String("prefetch-ttl"))
		}
	}
	if (c.IsSet("prefetch-ttl") || c.IsSet("prefetch-low")) && c.Int("prefetch") == 0 {
		return problem.Usagef("--prefetch-ttl and --prefetch-low need --prefetch N (the pool's size)")
	}
	spec := dispatch.TaskSpec{
		Name: a[0], Source: c.String("source"), Key: c.String("key"), Where: c.String("where"), Order: c.String("order"),
		MaxActive: c.Int("max-active"), Lock: lock, QueryDelay: delay, LeaseTTL: ttl, HoldLimit: hold, MaxHold: maxHold,
		Prefetch: c.Int("prefetch"), PrefetchTTL: prefetchTTL, PrefetchLow: c.Int("prefetch-low"),
		IfNotExists: c.Bool("if-not-exists"), AllowWideLocks: c.Bool("allow-wide-locks"),
		Priority: c.Int("priority"), Link: c.String("link"),
		Governance:     governanceChange(c),
		MaxHoldDefault: !c.IsSet("max-hold"),
	}
	if spec.Show, err = dispatch.ParseShow(c.String("show")); err != nil {
		return err
	}
	if err := spec.Check(); err != nil { // before connecting: bad input is refused with the database down too
		return err
	}
	rch, err := reasonChange(c)
	if err != nil {
		return err
	}
	if err := dispatch.CheckReasonChange(rch); err != nil {
		return err
	}
	if rch.Codes != nil {
		spec.Reasons.Codes = *rch.Codes
	}
	if rch.Required != nil {
		spec.Reasons.Required = *rch.Required
	}
	e, err := openActing(c)
	if err != nil {
		return err
	}
	defer e.Close()
	spec.CreatedBy = e.user
	t, created, err := e.admin.CreateTask(c.Context, spec)
	if err != nil {
		return err
	}
	reasons, err := e.admin.TaskReasons(c.Context, t)
	if err != nil {
		return err
	}
	return emit(c, map[string]any{"task": reasonsDoc(jsondoc.Task(t), reasons), "created": created}, func(w io.Writer) {
		if created {
			fmt.Fprintf(w, "created task %s (lock %s)\n", textsafe.Escape(t.Name), t.Lock)
		} else {
			fmt.Fprintf(w, "task %s already exists with this definition; nothing changed\n", textsafe.Escape(t.Name))
		}
	})
}

// poolText is the pool line of task show and task stats.
func poolText(t *dispatch.Task, p *dispatch.PoolStatus) string {
	if p == nil {
		return "- (no candidate pool)"
	}
	age := "-"
	if p.AgeS != nil {
		age = (time.Duration(*p.AgeS) * time.Second).String()
	}
	return fmt.Sprintf("%d of %d fresh (oldest %s, ttl %s, low mark %d); %d gets served from it, %d refills",
		p.Size, t.Prefetch, age, t.PrefetchTTL, t.PrefetchLow, p.Hits, p.Refills)
}

// parseMaxHold reads --max-hold: absent is dispatch.DefaultMaxHold, "off"
// is never (0).
func parseMaxHold(c *cli.Context) (time.Duration, error) {
	if !c.IsSet("max-hold") {
		return dispatch.DefaultMaxHold, nil
	}
	if c.String("max-hold") == "off" {
		return 0, nil
	}
	d, err := flagvalue.Duration("max-hold", c.String("max-hold"))
	if err != nil {
		return 0, err
	}
	if d <= 0 {
		return 0, problem.Usagef("invalid --max-hold %s: give a positive duration such as 8h, \"off\" for never, or leave it out for the default %s", c.String("max-hold"), dispatch.DefaultMaxHold)
	}
	return d, nil
}

func taskList(c *cli.Context) error {
	if _, err := args(c); err != nil {
		return err
	}
	e, err := open(c)
	if err != nil {
		return err
	}
	defer e.Close()
	ts, err := listableTasks(c, e)
	if err != nil {
		return err
	}
	list := []map[string]any{}
	for _, t := range ts {
		list = append(list, jsondoc.Task(t))
	}
	return emit(c, map[string]any{"tasks": list}, func(w io.Writer) {
		if len(ts) == 0 {
			fmt.Fprintln(w, "no tasks yet: create one with `loanq task create NAME --where SQL`")
			return
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tLOCK\tMAX-ACTIVE\tSOURCE\tWHERE\tORDER")
		for _, t := range ts {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", textsafe.Escape(t.Name), textsafe.Escape(string(t.Lock)), capText(t.MaxActive),
				textsafe.Escape(t.Source), textsafe.Escape(t.Where), textsafe.Escape(t.Order))
		}
		tw.Flush()
	})
}

func capText(n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

func taskShow(c *cli.Context) error {
	a, err := args(c, "NAME")
	if err != nil {
		return err
	}
	if err := dispatch.ValidateTaskName(a[0]); err != nil {
		return err
	}
	e, err := open(c)
	if err != nil {
		return err
	}
	defer e.Close()
	t, err := e.Task(c.Context, a[0])
	if err != nil {
		return err
	}
	runs, err := e.admin.Runs(c.Context, t)
	if err != nil {
		return err
	}
	if runs == nil {
		runs = []dispatch.QueryRun{}
	}
	hold, derived, err := e.admin.HoldLimit(c.Context, t)
	if err != nil {
		return err
	}
	pool, err := e.Pool(c.Context, t)
	if err != nil {
		return err
	}
	reasons, err := e.admin.TaskReasons(c.Context, t)
	if err != nil {
		return err
	}
	tj := reasonsDoc(jsondoc.Task(t), reasons)
	tj["hold_limit_in_force_ms"] = hold.Milliseconds()
	tj["hold_limit_derived"] = derived
	if pool != nil {
		tj["pool"] = pool
	}
	verdict, err := e.admin.LockVerdict(c.Context, t)
	if err != nil {
		return err
	}
	tj["lock_verdict"] = nil // never probed (not --lock rows)
	// The backlog is counted now (one COUNT over the criteria); a failed
	// count (no SELECT on the source) leaves it unknown, with the reason.
	backlog, backlogErr := e.admin.CountBacklog(c.Context, t)
	tj["backlog"] = backlog
	failed := ""
	if backlogErr != nil {
		if c.Context.Err() != nil {
			return backlogErr
		}
		failed = backlogErr.Error()
		tj["backlog_error"] = failed
	}
	if verdict != "" {
		tj["lock_verdict"] = verdict
	}
	gov, err := e.admin.TaskGovernance(c.Context, t)
	if err != nil {
		return err
	}
	governanceJSON(tj, gov)
	return emit(c, map[string]any{"task": tj, "runs": runs}, func(w io.Writer) {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "task:\t%s\n", textsafe.Escape(t.Name))
		fmt.Fprintf(tw, "source:\t%s (key %s, %s)\n", textsafe.Escape(t.Source), textsafe.Escape(t.Key), t.KeyKind)
		fmt.Fprintf(tw, "where:\t%s\n", textsafe.Escape(t.Where))
		fmt.Fprintf(tw, "order:\t%s\n", textsafe.Escape(orDash(t.Order)))
		fmt.Fprintf(tw, "lock:\t%s\n", textsafe.Escape(string(t.Lock)))
		if verdict != "" {
			fmt.Fprintf(tw, "lock probe:\t%s\n", textsafe.Escape(verdict))
		}
		fmt.Fprintf(tw, "max active:\t%s\n", capText(t.MaxActive))
		fmt.Fprintf(tw, "query delay:\t%s\n", t.QueryDelay)
		if t.Lock == drivers.Lease {
			fmt.Fprintf(tw, "lease ttl:\t%s\n", t.LeaseTTL)
		}
		if derived {
			fmt.Fprintf(tw, "hold limit:\t%s (derived from the measured criteria-query time)\n", hold)
		} else {
			fmt.Fprintf(tw, "hold limit:\t%s\n", hold)
		}
		if t.MaxHold > 0 {
			fmt.Fprintf(tw, "max hold:\t%s (older active work returns to the queue)\n", t.MaxHold)
		} else {
			fmt.Fprintf(tw, "max hold:\t- (active work never expires: a processor who leaves keeps it until reclaimed; new tasks default to %s)\n", dispatch.DefaultMaxHold)
		}
		governanceLines(tw, gov)
		fmt.Fprintf(tw, "reasons:\t%s\n", textsafe.Escape(reasonsText(reasons)))
		fmt.Fprintf(tw, "pool:\t%s\n", poolText(t, pool))
		fmt.Fprintf(tw, "priority:\t%d (work next: higher first)\n", t.Priority)
		if len(t.Show) > 0 {
			fmt.Fprintf(tw, "show:\t%s\n", textsafe.Escape(strings.Join(t.Show, ",")))
		}
		if t.Link != "" {
			fmt.Fprintf(tw, "link:\t%s\n", textsafe.Escape(t.Link))
		}
		fmt.Fprintf(tw, "backlog:\t%s\n", backlogText(backlog, failed))
		fmt.Fprintf(tw, "created:\t%s by %s\n", t.CreatedAt.Format(time.RFC3339), textsafe.Escape(t.CreatedBy))
		tw.Flush()
		fmt.Fprintln(w)
		if len(runs) == 0 {
			fmt.Fprintln(w, "no criteria-query runs yet")
			return
		}
		fmt.Fprintln(w, "latest criteria-query runs:")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "STARTED\tDURATION\tLOCK\tLOANS FOUND\tREQUESTS SERVED\tLOANS ASSIGNED\tHOLDER")
		for _, r := range runs {
			fmt.Fprintf(tw, "%s\t%dms\t%s\t%d\t%d\t%d\t%s\n", r.StartedAt.Format(time.RFC3339), r.DurationMS, textsafe.Escape(r.Strategy), r.RowsFound, r.RequestsServed, r.LoansAssigned, textsafe.Escape(r.Holder))
		}
		tw.Flush()
	})
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func taskDelete(c *cli.Context) error {
	a, err := args(c, "NAME")
	if err != nil {
		return err
	}
	if err := dispatch.ValidateTaskName(a[0]); err != nil {
		return err
	}
	e, err := open(c)
	if err != nil {
		return err
	}
	defer e.Close()
	work, err := e.admin.DeleteTask(c.Context, a[0], c.Bool("force"))
	if err != nil {
		return err
	}
	return emit(c, map[string]any{"task": a[0], "deleted": true, "assignments_deleted": work}, func(w io.Writer) {
		fmt.Fprintf(w, "deleted task %s with its %d assignment(s), requests and criteria-query runs\n", a[0], work)
	})
}
