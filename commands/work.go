package commands

import (
	"fmt"
	"github.com/loanq/loanq/loankey"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/flagvalue"
	"github.com/loanq/loanq/internal/textsafe"
	"github.com/loanq/loanq/problem"
)

func workCommand() *cli.Command {
	recheck := []cli.Flag{
		&cli.StringFlag{Name: "timeout", Value: "2m", Usage: "stop rechecking after this long and exit 75 (0s: recheck until served)"},
		&cli.StringFlag{Name: "backoff", Value: formatBackoff(dispatch.DefaultBackoff), Usage: "recheck delays while busy; the last one repeats"},
		&cli.StringFlag{Name: "lock", Usage: "lock strategy for this call only: " + drivers.StrategyList(drivers.AllStrategies, " or ") + " (default: the task's)"},
	}
	return &cli.Command{
		Name:  "work",
		Usage: "get work from a task, or check a pending request",
		Description: `Exit codes: 0 served (also "empty": no loan available), 2 bad input,
75 still pending (busy: check again with "loanq work status ID"), 1 other failure,
130/143 interrupted by SIGINT/SIGTERM while waiting (the request is cancelled).

Examples:
   loanq --user oliver work get verify-bank --count 3
   loanq --user tracy work get verify-bank --count 3 --no-wait
   loanq --user tracy work status 17 --wait
   loanq --user oliver work next --count 3`,
		Subcommands: []*cli.Command{
			workListCommand(),
			workRunCommand(),
			workNextCommand(),
			{
				Name:      "get",
				Usage:     "get the highest-priority loans of a task that nobody else has",
				ArgsUsage: "TASK",
				Description: `Logs the request, takes the task lock and serves every pending request of the
task from one criteria query. When another caller holds the lock, the request
stays pending and is rechecked (5 s, 10 s, 20 s, then every 20 s) until served
or --timeout; with --no-wait loanq answers at once with exit code 75 and the
request id, to be checked later with "loanq work status ID".

A user has at most one pending request per task: asking again while one is
pending (after exit 75, say) attaches to it (same request id, said on stderr)
instead of logging a second request. Ctrl-C (SIGINT) or SIGTERM while waiting
cancels the request: it is never served later. If a holder served it first,
its loans are printed as usual and the exit code is 0.

Exit codes: 0 served (also when no loan was available: status "empty"),
2 bad input, 75 still pending, 1 other failure, 130 interrupted by SIGINT and
143 by SIGTERM (the request is cancelled).

A request nobody waits for any more is never served: a waiting call shows a
sign of life on it every 15 s, and so does each "work status" recheck; after
60 s without one (the caller killed, or exit 75 and no recheck) it is
"expired" (exit 1 when work get or work status finds it so).

Examples:
   loanq --user oliver work get verify-bank --count 3
   loanq --user tracy --output json work get verify-bank --no-wait`,
				Flags: append([]cli.Flag{
					&cli.IntFlag{Name: "count", Aliases: []string{"n"}, Value: 1, Usage: fmt.Sprintf("how many loans to ask for (1-%d)", dispatch.MaxCount)},
					&cli.BoolFlag{Name: "no-wait", Usage: "answer busy (exit 75) at once instead of rechecking"},
				}, recheck...),
				Action: workGet,
			},
			{
				Name:      "status",
				Usage:     "check a work request; serves it when it is pending and the task lock is free",
				ArgsUsage: "REQUEST_ID",
				Description: `Reads the request. While it is pending and the task lock is free, takes the
lock and serves every pending request of the task itself; with --wait it
rechecks (--backoff) until the request is served or --timeout passes.
A recheck by the requester is a sign of life on a pending request: one
rechecked within 60 s of the last is served as usual; later, it has expired.
Exit codes as for "work get": 75 while the request is still pending, 1 when
it expired.

Examples:
   loanq work status 17
   loanq work status 17 --wait --timeout 1m`,
				Flags:  append([]cli.Flag{&cli.BoolFlag{Name: "wait", Usage: "recheck until the request is served or --timeout passes"}}, recheck...),
				Action: workStatus,
			},
			{
				Name:      "cancel",
				Usage:     "cancel your pending work request: it will never be served",
				ArgsUsage: "REQUEST_ID",
				Description: `Cancels a pending request of the --user who asked. The database decides a
race with a holder serving it at the same moment: if the request was served
first, it is printed as served (its loans are yours) with a note on stderr.
Cancelling a request that is already cancelled changes nothing.

Exit codes: 0 the request is no longer pending (its status says cancelled or
served), 2 bad input (an unknown id, or another user's request), 1 other failure.

Examples:
   loanq --user oliver work cancel 17
   loanq --user oliver --output json work cancel 17`,
				Action: workCancel,
			},
			workReclaimCommand(),
		},
	}
}

func getOptions(c *cli.Context) (dispatch.GetOptions, error) {
	var opt dispatch.GetOptions
	var err error
	if opt.Timeout, err = flagvalue.Duration("timeout", c.String("timeout")); err != nil {
		return opt, err
	}
	if opt.Timeout < 0 {
		return opt, problem.Usagef("invalid --timeout %s: give 0s or a positive duration", opt.Timeout)
	}
	if opt.Backoff, err = flagvalue.Backoff(c.String("backoff")); err != nil {
		return opt, err
	}
	if s := c.String("lock"); s != "" {
		if opt.Lock, err = drivers.ParseStrategy(s); err != nil {
			return opt, err
		}
	}
	return opt, nil
}

func workGet(c *cli.Context) error {
	a, err := args(c, "TASK")
	if err != nil {
		return err
	}
	if err := dispatch.ValidateTaskName(a[0]); err != nil {
		return err
	}
	n := c.Int("count")
	if n < 1 || n > dispatch.MaxCount {
		return problem.Usagef("invalid --count %d: ask for between 1 and %d loans", n, dispatch.MaxCount)
	}
	opt, err := getOptions(c)
	if err != nil {
		return err
	}
	opt.NoWait = c.Bool("no-wait")
	e, err := openActing(c)
	if err != nil {
		return err
	}
	defer e.Close()
	opt.CancelAs = e.user
	opt.OnAttach = func(id int64) {
		fmt.Fprintf(c.App.ErrWriter, "loanq: attached to your pending request %d of task %s (one pending request per user and task)\n", id, a[0])
	}
	done := statusLine(c, &opt)
	req, err := e.Get(c.Context, a[0], e.user, n, opt)
	done()
	return printRequest(c, req, expiredError(req, err))
}

// expiredError is the exit 1 of `work get` and `work status` for a request
// that expired (docs/algorithm.md, "Abandoned requests"): it was not served
// and never will be, which is not the "done" of exit 0.
func expiredError(req *dispatch.Request, err error) error {
	if err != nil || req == nil || req.Status != dispatch.StatusExpired {
		return err
	}
	return problem.WithHint(fmt.Errorf("request %d of task %s expired: nobody showed it was waiting for it for %s (a caller killed, or a recheck too late), and it will not be served",
		req.ID, textsafe.Escape(req.Task), drivers.RequestAlive),
		fmt.Sprintf("ask again with `loanq work get %s`; a script that gets exit 75 rechecks with `loanq work status ID` within %s", textsafe.Escape(req.Task), drivers.RequestAlive))
}

func workStatus(c *cli.Context) error {
	id, err := requestIDArg(c)
	if err != nil {
		return err
	}
	opt, err := getOptions(c)
	if err != nil {
		return err
	}
	e, err := openActing(c)
	if err != nil {
		return err
	}
	defer e.Close()
	opt.CancelAs = e.user
	done := statusLine(c, &opt)
	req, err := e.Status(c.Context, id, c.Bool("wait"), opt)
	done()
	return printRequest(c, req, expiredError(req, err))
}

func workCancel(c *cli.Context) error {
	id, err := requestIDArg(c)
	if err != nil {
		return err
	}
	e, err := openActing(c)
	if err != nil {
		return err
	}
	defer e.Close()
	req, err := e.Cancel(c.Context, id, e.user)
	return printRequest(c, req, err)
}

// statusLine keeps one line on stderr, when stderr is a terminal, while a
// request waits for the task lock: its id, how long it has been pending and
// when the next look is. The returned func erases it. Nothing is written when
// stderr is a file or a pipe, so scripts see only the answer.
func statusLine(c *cli.Context, opt *dispatch.GetOptions) (done func()) {
	w := c.App.ErrWriter
	if !isTerminal(w) {
		return func() {}
	}
	shown := false
	opt.OnWait = func(req *dispatch.Request, next time.Duration) {
		pending := time.Since(req.CreatedAt).Round(time.Second)
		if pending < 0 || req.CreatedAt.IsZero() {
			pending = 0
		}
		fmt.Fprintf(w, "\r\033[Krequest %d (task %s): pending for %s, another caller holds the task lock; next look in %s",
			req.ID, textsafe.Escape(req.Task), pending, next.Round(10*time.Millisecond))
		shown = true
	}
	return func() {
		if shown {
			fmt.Fprint(w, "\r\033[K")
		}
	}
}

// printRequest prints the request (also when it is still pending, so a script
// gets the request id in JSON along with exit code 75) and passes err on.
func printRequest(c *cli.Context, req *dispatch.Request, err error) error {
	if req == nil {
		return err
	}
	if req.Notice != "" {
		fmt.Fprintf(c.App.ErrWriter, "loanq: %s\n", textsafe.Escape(req.Notice))
	}
	perr := emit(c, req, func(w io.Writer) {
		task, user := textsafe.Escape(req.Task), textsafe.Escape(req.User)
		switch req.Status {
		case dispatch.StatusPending:
			fmt.Fprintf(w, "request %d (task %s, %s): pending\n", req.ID, task, user)
		case dispatch.StatusCancelled:
			fmt.Fprintf(w, "request %d (task %s, %s): cancelled, it will not be served\n", req.ID, task, user)
		case dispatch.StatusExpired:
			fmt.Fprintf(w, "request %d (task %s, %s): expired, nobody waited for it; it will not be served\n", req.ID, task, user)
		case dispatch.StatusEmpty:
			fmt.Fprintf(w, "request %d (task %s, %s): empty, no loan available\n", req.ID, task, user)
		default:
			fmt.Fprintf(w, "request %d (task %s, %s): %s, %d of %d loan(s): %s\n", req.ID, task, user,
				req.Status, req.Assigned, req.Requested, joinIDs(req.Loans))
			printLoanItems(w, req.Work, false) // worknext.go
		}
	})
	if err != nil {
		return err
	}
	return perr
}

func joinIDs(ids []loankey.Key) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = textsafe.Escape(id.String()) // a text key is the database's text
	}
	return strings.Join(s, ", ")
}

// formatBackoff writes delays the way --backoff reads them ("5s,10s,20s").
func formatBackoff(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = d.String()
	}
	return strings.Join(parts, ",")
}

// requestIDArg reads the REQUEST_ID argument of work status and work cancel.
func requestIDArg(c *cli.Context) (int64, error) {
	a, err := args(c, "REQUEST_ID")
	if err != nil {
		return 0, err
	}
	id, err := strconv.ParseInt(a[0], 10, 64)
	if err != nil || id <= 0 {
		return 0, problem.Usagef("invalid request id %q: give the request_id that `loanq work get` printed", a[0])
	}
	return id, nil
}
