package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/loanq/loanq/loankey"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/child"
	"github.com/loanq/loanq/internal/flagvalue"
	"github.com/loanq/loanq/problem"
	"github.com/loanq/loanq/workrun"
)

func workRunCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "a processor loop for scripts: get loans, run CMD once per loan, disposition each by CMD's exit status",
		ArgsUsage: "TASK -- CMD [ARGS…]",
		Description: `Gets work from TASK through the engine (as "work get" does), runs CMD once per
loan with LOANQ_TASK, LOANQ_LOAN_ID, LOANQ_USER and LOANQ_REQUEST_ID in its
environment ({} in ARGS is replaced by the loan id), and disposes of each loan
by CMD's exit status (as "disposition" does):
   0        complete
   75       return, back in the queue after --retry-after
   65       never
   other    return after --retry-after, counted as a failure (also when a
            signal or --loan-timeout ended CMD; --max-failures N stops the loop)
SIGINT/SIGTERM: no new work is taken, running commands get --grace to finish,
then SIGTERM; what is unfinished is returned at once (return --after 0s); exit 0.
If loanq dies (SIGKILL), CMD's process group gets SIGTERM, SIGKILL 5s later.
CMD's environment is loanq's without loanq's own variables: no LOANQ_DB,
LOANQ_SERVE_TOKEN or other LOANQ_* (only the four above), no DATABASE_URL
when that is loanq's database, and no PGPASSWORD when loanq's database is
PostgreSQL (loanq's password when the DSN has none). A CMD that needs a
database gets it under another name (MY_DB="$LOANQ_DB" loanq work run …).
A loan CMD completed that still matches the task's criteria is eligible again
and may come straight back: loanq says so once on stderr, and --max-repeats K
(default 3, 0: no limit) stops the loop with exit 3 once a loan has come back
K times in a row. Make CMD change what the criteria read, or exit 65/75.
--until-empty exits once the task answers "empty" and nothing runs. Output:
one line per loan; with --output json one JSON object per line
{"task","loan_id","exit_code","disposition","duration_ms"}; CMD's stdout goes
to loanq's stderr then. A progress line is shown on a terminal only.
Exit codes: 0 done or interrupted, 2 bad input, 1 --max-failures reached or a
database failure, 3 --max-repeats reached.

Examples:
   loanq --user robot work run verify-bank --until-empty -- ./verify.sh {}
   loanq --user robot work run verify-bank --concurrency 4 --loan-timeout 10m --retry-after 1h -- python3 check.py
   loanq --user robot work run verify-bank --max-repeats 0 -- ./verify.sh {}   # loans may come back without end
   loanq --user robot work run review --reason never=duplicate --reason return=waiting-docs -- ./check.sh {}

--reason ACTION=CODE gives that reason code with every disposition of ACTION
(docs/reasons.md); a task that requires a reason for an action refuses to
start (exit 2) until each of complete, return and never it requires has one.`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "count", Aliases: []string{"n"}, Value: 1, Usage: "loans to ask for at a time (at most the free --concurrency slots)"},
			&cli.IntFlag{Name: "concurrency", Aliases: []string{"c"}, Value: 1, Usage: "commands running at once (1-64)"},
			&cli.IntFlag{Name: "max-loans", Usage: "stop after this many loans (0: no limit)"},
			&cli.BoolFlag{Name: "until-empty", Usage: "exit when the task answers empty (else ask again every 5s)"},
			&cli.StringFlag{Name: "retry-after", Value: "15m", Usage: "return delay for exit 75 and for failures (0s-72h)"},
			&cli.StringFlag{Name: "loan-timeout", Value: "0s", Usage: "stop a command after this long (SIGTERM) and count a failure (0s: no limit)"},
			&cli.IntFlag{Name: "max-failures", Usage: "stop the loop after this many failures (0: never)"},
			&cli.StringFlag{Name: "grace", Value: "30s", Usage: "on SIGINT/SIGTERM, how long running commands may finish before they are stopped"},
			&cli.StringSliceFlag{Name: "reason", Usage: "ACTION=CODE: the reason code given with every disposition of that action (repeatable; docs/reasons.md), e.g. --reason never=duplicate"},
			&cli.IntFlag{Name: "max-repeats", Value: workrun.DefaultMaxRepeats, Usage: "stop (exit 3) once a loan CMD completed has come back this many times in a row (0: no limit)"},
			logFormatFlag(),
		},
		Action: workRun,
	}
}

// workRunOptions checks everything the user typed before the database is
// touched.
func workRunOptions(c *cli.Context) (workrun.Options, error) {
	var o workrun.Options
	a := c.Args().Slice()
	if len(a) == 0 {
		return o, problem.Usagef("`loanq work run` needs a task and a command: loanq work run TASK -- CMD [ARGS…]")
	}
	o.Task = a[0]
	if err := dispatch.ValidateTaskName(o.Task); err != nil {
		return o, err
	}
	if len(a) < 2 || a[1] == "" {
		return o, problem.Usagef("no command to run for the loans of %s: give it after --, e.g. loanq work run %s -- ./process.sh {}", o.Task, o.Task)
	}
	o.Count, o.Concurrency, o.MaxLoans, o.MaxFailures = c.Int("count"), c.Int("concurrency"), c.Int("max-loans"), c.Int("max-failures")
	o.MaxRepeats = c.Int("max-repeats")
	switch {
	case o.Count < 1 || o.Count > dispatch.MaxCount:
		return o, problem.Usagef("invalid --count %d: ask for between 1 and %d loans at a time", o.Count, dispatch.MaxCount)
	case o.Concurrency < 1 || o.Concurrency > 64:
		return o, problem.Usagef("invalid --concurrency %d: run between 1 and 64 commands at once", o.Concurrency)
	case o.MaxLoans < 0:
		return o, problem.Usagef("invalid --max-loans %d: give 0 (no limit) or a positive number", o.MaxLoans)
	case o.MaxFailures < 0:
		return o, problem.Usagef("invalid --max-failures %d: give 0 (never stop) or a positive number", o.MaxFailures)
	case o.MaxRepeats < 0:
		return o, problem.Usagef("invalid --max-repeats %d: give 0 (no limit) or a positive number", o.MaxRepeats)
	}
	var err error
	if o.RetryAfter, err = flagvalue.Duration("retry-after", c.String("retry-after")); err != nil {
		return o, err
	}
	if o.RetryAfter < 0 || o.RetryAfter > dispatch.MaxReturnWait {
		return o, problem.Usagef("invalid --retry-after %s: give a duration from 0s to 72h", o.RetryAfter)
	}
	if o.LoanTimeout, err = flagvalue.Duration("loan-timeout", c.String("loan-timeout")); err != nil {
		return o, err
	}
	if o.LoanTimeout < 0 {
		return o, problem.Usagef("invalid --loan-timeout %s: give 0s (no limit) or a positive duration", o.LoanTimeout)
	}
	if o.Grace, err = flagvalue.Duration("grace", c.String("grace")); err != nil {
		return o, err
	}
	if o.Grace < 0 {
		return o, problem.Usagef("invalid --grace %s: give 0s or a positive duration", o.Grace)
	}
	o.UntilEmpty = c.Bool("until-empty")
	if o.Path, err = child.Resolve(a[1]); err != nil {
		return o, err
	}
	o.Argv = a[1:]
	return o, nil
}

func workRun(c *cli.Context) error {
	o, err := workRunOptions(c)
	if err != nil {
		return err
	}
	lg, err := newEventLog(c)
	if err != nil {
		return err
	}
	e, err := openActing(c)
	if err != nil {
		return err
	}
	defer e.Close()
	// The task and the user are checked before any request is logged.
	task, err := e.Task(c.Context, o.Task)
	if err != nil {
		return err
	}
	reasons, err := workRunReasons(c, e, task)
	if err != nil {
		return err
	}
	o.User, o.DSN, o.PasswordEnv = e.user, c.String("db"), e.driver.Capabilities().PasswordEnv
	v := &runView{o: o, log: lg, out: c.App.Writer, errw: c.App.ErrWriter, cmdOut: c.App.Writer, json: e.json,
		progress: isTerminal(c.App.ErrWriter) && !lg.JSON()}
	if v.json {
		v.cmdOut = c.App.ErrWriter // stdout is for the JSON lines
	}
	if lg.JSON() {
		lg.j.Info("work run started", "task", o.Task, "user", e.user, "concurrency", o.Concurrency, "count", o.Count)
	}
	err = workrun.New(o, &runQueue{e: e, task: o.Task, reasons: reasons}, v).Run(c.Context)
	v.clearProgress()
	var failures *workrun.MaxFailuresError
	var repeats *workrun.RepeatsError
	switch {
	case errors.As(err, &failures):
		return problem.WithHint(fmt.Errorf("stopped after %d failures (--max-failures %d)", failures.Failures, failures.Max), "see the failed loans above; they were returned after --retry-after")
	case errors.As(err, &repeats):
		return &problem.Exit{Code: problem.ExitRepeats, Msg: fmt.Sprintf(
			"stopped: loan %s came back %s in a row after this runner completed it (--max-repeats %d): "+
				"completing it leaves it matching the criteria of task %s (see above; --max-repeats 0 never stops)",
			repeats.Loan, times(repeats.Times), repeats.Max, o.Task)}
	}
	return err
}

// runQueue is the engine as `work run` asks it for loans of one task.
type runQueue struct {
	e       *env
	task    string
	reasons map[string]string // action → --reason code
}

func (q *runQueue) Get(ctx context.Context, n int) (int64, []loankey.Key, error) {
	// OwnRequest: other `work run` processes of this user must not get
	// the same answer (and loans); CancelAs: a signal while waiting
	// cancels the request instead of leaving it to be served later.
	req, err := q.e.Get(ctx, q.task, q.e.user, n, dispatch.GetOptions{Backoff: dispatch.DefaultBackoff,
		OwnRequest: true, CancelAs: q.e.user})
	if err = expiredError(req, err); err != nil {
		return 0, nil, err // expired: not "empty", which would end --until-empty as done
	}
	return req.ID, req.Loans, nil
}

func (q *runQueue) Dispose(ctx context.Context, loan loankey.Key, action string, after time.Duration) error {
	_, err := q.e.DisposeNoted(ctx, q.task, loan.String(), q.e.user, action, after, action == dispatch.Return,
		dispatch.DispositionNote{Reason: q.reasons[action]})
	return err
}

// runView shows a run: one line per loan on stdout (JSON with --output
// json), events on stderr (--log-format), a progress line on a terminal.
// Its Started, CameBack and Done are called one at a time (workrun.Observer).
type runView struct {
	o        workrun.Options
	log      *eventLog
	out      io.Writer
	errw     io.Writer
	cmdOut   io.Writer
	json     bool
	progress bool
	shown    workrun.Progress
}

// runResult is one processed loan, as printed.
type runResult struct {
	Task        string      `json:"task"`
	LoanID      loankey.Key `json:"loan_id"`
	ExitCode    int         `json:"exit_code"`
	Disposition string      `json:"disposition"`
	DurationMS  int64       `json:"duration_ms"`
}

// Output: in JSON mode each line CMD writes to stderr (and to stdout when
// that is stderr, --output json) becomes an event naming the loan.
func (v *runView) Output(l workrun.Loan) (stdout, stderr io.Writer, ended func()) {
	stdout = v.cmdOut
	var outEvents *lineEvents
	if v.json {
		outEvents = v.log.Output(v.cmdOut, "stdout", "task", v.o.Task, "loan", l.Key, "request", l.Request)
		stdout = outEvents.writer()
	}
	errEvents := v.log.Output(v.errw, "stderr", "task", v.o.Task, "loan", l.Key, "request", l.Request)
	return stdout, errEvents.writer(), func() {
		errEvents.Flush()
		if outEvents != nil {
			outEvents.Flush()
		}
	}
}

func (v *runView) Started(p workrun.Progress) {
	v.shown = p
	v.showProgress()
}

// CameBack explains, once, why a loan came straight back.
func (v *runView) CameBack(l workrun.Loan, _ int) {
	v.clearProgress()
	v.log.Event(slog.LevelWarn, fmt.Sprintf("loanq: loan %s came back right after this runner completed it: the command completed it, "+
		"but it still matches the criteria of task %s, so it is eligible again. Make the command change the data "+
		"the criteria read, or have it exit 65 (never) or 75 (return after --retry-after) for such loans. "+
		"%s", l.Key, v.o.Task, v.repeatLimit()),
		"loan came back right after this runner completed it: it still matches the task's criteria; make the command change the data the criteria read, or exit 65 (never) or 75 (return)",
		"task", v.o.Task, "user", v.o.User, "loan", l.Key, "max_repeats", v.o.MaxRepeats)
	v.showProgress()
}

func (v *runView) repeatLimit() string {
	if v.o.MaxRepeats == 0 {
		return "(--max-repeats 0: loans may come back without end.)"
	}
	return fmt.Sprintf("The loop stops (exit 3) once a loan has come back %s in a row (--max-repeats %d).", times(v.o.MaxRepeats), v.o.MaxRepeats)
}

func times(n int) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}

func (v *runView) Done(res workrun.Result, p workrun.Progress) {
	v.shown = p
	v.clearProgress()
	if res.Err != nil {
		v.log.Event(slog.LevelError, fmt.Sprintf("loanq: loan %s: disposition %s failed: %v", res.Key, res.Disposition, res.Err),
			"disposition failed", "task", v.o.Task, "user", v.o.User, "request", res.Request, "loan", res.Key, "disposition", res.Disposition, "error", res.Err.Error())
	}
	v.print(res)
	if v.log.JSON() {
		level := slog.LevelInfo
		if res.Failure {
			level = slog.LevelWarn
		}
		attrs := []any{"task", v.o.Task, "user", v.o.User, "request", res.Request, "loan", res.Key, "exit", res.ExitCode,
			"disposition", res.Disposition, "duration_ms", res.Duration.Milliseconds(), "failure", res.Failure}
		if res.Disposition == dispatch.Return {
			attrs = append(attrs, "return_after_ms", res.After.Milliseconds())
		}
		if res.Interrupted {
			attrs = append(attrs, "interrupted", true)
		}
		if res.Why != "" {
			attrs = append(attrs, "why", res.Why)
		}
		v.log.j.Log(context.Background(), level, "loan done", attrs...)
	}
	v.showProgress()
}

// print writes one line per loan.
func (v *runView) print(res workrun.Result) {
	if v.json {
		b, _ := json.Marshal(runResult{Task: v.o.Task, LoanID: res.Key, ExitCode: res.ExitCode, Disposition: res.Disposition,
			DurationMS: res.Duration.Milliseconds()})
		fmt.Fprintf(v.out, "%s\n", b)
		return
	}
	what := res.Disposition
	switch {
	case res.Interrupted:
		what = "returned unfinished (interrupted)"
	case res.Disposition == dispatch.Return:
		what = "return after " + res.After.String()
	}
	line := fmt.Sprintf("loan %s: exit %d -> %s (%s)", res.Key, res.ExitCode, what, (time.Duration(res.Duration.Milliseconds()) * time.Millisecond).String())
	if res.Failure {
		line += ", failure"
		if res.Why != "" {
			line += ": " + res.Why
		}
	}
	fmt.Fprintln(v.out, line)
}

// showProgress and clearProgress draw the progress line on a terminal.
func (v *runView) showProgress() {
	if v.progress {
		fmt.Fprintf(v.errw, "\r%s: %d done, %d running, %d failures ", v.o.Task, v.shown.Done, v.shown.Running, v.shown.Failures)
	}
}

func (v *runView) clearProgress() {
	if v.progress {
		fmt.Fprint(v.errw, "\r\033[K")
	}
}

// workRunReasons reads --reason ACTION=CODE and checks it against the
// task's codes before any request is logged: a code the task does not
// declare, or an action the task requires a reason for (one work run can
// dispose with: complete, return, never) without one, is exit 2.
func workRunReasons(c *cli.Context, e *env, task *dispatch.Task) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range c.StringSlice("reason") {
		action, code, ok := strings.Cut(v, "=")
		a, err := dispatch.ParseAction(strings.TrimSpace(action))
		if !ok || err != nil {
			return nil, problem.Usagef("invalid --reason %q: give ACTION=CODE with ACTION complete, return or never (e.g. --reason never=duplicate)", v)
		}
		if err := dispatch.CheckReasonAndNote(code, ""); err != nil {
			return nil, err
		}
		out[a] = code
	}
	r, err := e.admin.TaskReasons(c.Context, task)
	if err != nil {
		return nil, err
	}
	for _, a := range []string{dispatch.Complete, dispatch.Return, dispatch.Never} {
		if err := r.CheckReason(task.Name, a, out[a]); err != nil {
			return nil, problem.WithHint(err, fmt.Sprintf("work run gives it with --reason %s=CODE", a))
		}
	}
	return out, nil
}
