package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/child"
	"github.com/loanq/loanq/internal/pause"
	"github.com/loanq/loanq/problem"
)

// Exit statuses of the command of `work run` that choose a disposition
// (sysexits.h): EX_TEMPFAIL asks for a retry later, EX_DATAERR says the loan
// can never be processed.
const (
	runExitRetry = 75
	runExitNever = 65
	// runIdle is the pause between asks when the task answered empty and
	// --until-empty is not given.
	runIdle = 5 * time.Second
	// runKillAfter is how long a command has after SIGTERM before SIGKILL
	// (also when loanq dies: internal/child's guard).
	runKillAfter = 5 * time.Second
	// runRepeatsDefault is --max-repeats when not given.
	runRepeatsDefault = 3
	// runRepeatMemory bounds the loans a runner remembers having completed:
	// one that comes back after this many other completions did not come
	// back "at once".
	runRepeatMemory = 4096
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
LOANQ_SERVE_TOKEN or other LOANQ_* (only the four above), and no DATABASE_URL
when that is loanq's database. A CMD that needs a database gets it under
another name (MY_DB="$LOANQ_DB" loanq work run …).
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
   loanq --user robot work run verify-bank --max-repeats 0 -- ./verify.sh {}   # loans may come back without end`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "count", Aliases: []string{"n"}, Value: 1, Usage: "loans to ask for at a time (at most the free --concurrency slots)"},
			&cli.IntFlag{Name: "concurrency", Aliases: []string{"c"}, Value: 1, Usage: "commands running at once (1-64)"},
			&cli.IntFlag{Name: "max-loans", Usage: "stop after this many loans (0: no limit)"},
			&cli.BoolFlag{Name: "until-empty", Usage: "exit when the task answers empty (else ask again every 5s)"},
			&cli.StringFlag{Name: "retry-after", Value: "15m", Usage: "return delay for exit 75 and for failures (0s-72h)"},
			&cli.StringFlag{Name: "loan-timeout", Value: "0s", Usage: "stop a command after this long (SIGTERM) and count a failure (0s: no limit)"},
			&cli.IntFlag{Name: "max-failures", Usage: "stop the loop after this many failures (0: never)"},
			&cli.StringFlag{Name: "grace", Value: "30s", Usage: "on SIGINT/SIGTERM, how long running commands may finish before they are stopped"},
			&cli.IntFlag{Name: "max-repeats", Value: runRepeatsDefault, Usage: "stop (exit 3) once a loan CMD completed has come back this many times in a row (0: no limit)"},
			logFormatFlag(),
		},
		Action: workRun,
	}
}

type runOptions struct {
	task        string
	path        string
	argv        []string
	count       int
	concurrency int
	maxLoans    int
	untilEmpty  bool
	retryAfter  time.Duration
	loanTimeout time.Duration
	maxFailures int
	maxRepeats  int
	grace       time.Duration
}

func workRunOptions(c *cli.Context) (runOptions, error) {
	var o runOptions
	a := c.Args().Slice()
	if len(a) == 0 {
		return o, problem.Usagef("`loanq work run` needs a task and a command: loanq work run TASK -- CMD [ARGS…]")
	}
	o.task = a[0]
	if err := dispatch.ValidateTaskName(o.task); err != nil {
		return o, err
	}
	if len(a) < 2 || a[1] == "" {
		return o, problem.Usagef("no command to run for the loans of %s: give it after --, e.g. loanq work run %s -- ./process.sh {}", o.task, o.task)
	}
	o.count, o.concurrency, o.maxLoans, o.maxFailures = c.Int("count"), c.Int("concurrency"), c.Int("max-loans"), c.Int("max-failures")
	o.maxRepeats = c.Int("max-repeats")
	switch {
	case o.count < 1 || o.count > dispatch.MaxCount:
		return o, problem.Usagef("invalid --count %d: ask for between 1 and %d loans at a time", o.count, dispatch.MaxCount)
	case o.concurrency < 1 || o.concurrency > 64:
		return o, problem.Usagef("invalid --concurrency %d: run between 1 and 64 commands at once", o.concurrency)
	case o.maxLoans < 0:
		return o, problem.Usagef("invalid --max-loans %d: give 0 (no limit) or a positive number", o.maxLoans)
	case o.maxFailures < 0:
		return o, problem.Usagef("invalid --max-failures %d: give 0 (never stop) or a positive number", o.maxFailures)
	case o.maxRepeats < 0:
		return o, problem.Usagef("invalid --max-repeats %d: give 0 (no limit) or a positive number", o.maxRepeats)
	}
	var err error
	if o.retryAfter, err = parseDuration("retry-after", c.String("retry-after")); err != nil {
		return o, err
	}
	if o.retryAfter < 0 || o.retryAfter > dispatch.MaxReturnWait {
		return o, problem.Usagef("invalid --retry-after %s: give a duration from 0s to 72h", o.retryAfter)
	}
	if o.loanTimeout, err = parseDuration("loan-timeout", c.String("loan-timeout")); err != nil {
		return o, err
	}
	if o.loanTimeout < 0 {
		return o, problem.Usagef("invalid --loan-timeout %s: give 0s (no limit) or a positive duration", o.loanTimeout)
	}
	if o.grace, err = parseDuration("grace", c.String("grace")); err != nil {
		return o, err
	}
	if o.grace < 0 {
		return o, problem.Usagef("invalid --grace %s: give 0s or a positive duration", o.grace)
	}
	o.untilEmpty = c.Bool("until-empty")
	if o.path, err = child.Resolve(a[1]); err != nil {
		return o, err
	}
	o.argv = a[1:]
	return o, nil
}

// runResult is one processed loan, as printed.
type runResult struct {
	Task        string      `json:"task"`
	LoanID      drivers.Key `json:"loan_id"`
	ExitCode    int         `json:"exit_code"`
	Disposition string      `json:"disposition"`
	DurationMS  int64       `json:"duration_ms"`

	failure bool
	why     string
}

// runner is one `work run`.
type runner struct {
	e    *env
	o    runOptions
	stop <-chan struct{} // closed on SIGINT/SIGTERM
	db   context.Context // database calls: not cancelled by the signals, so unfinished loans are still returned
	dsn  string          // the DSN in use, kept from CMD's environment (child.Environ)

	log *eventLog // stderr's events: text lines, or JSON (--log-format)

	mu        sync.Mutex
	out       io.Writer
	errw      io.Writer
	cmdOut    io.Writer
	json      bool
	progress  bool
	done      int
	running   int
	failures  int
	tooMany   bool
	lastError error
	repeats   repeats
}

// repeats tracks the loans this runner completed that come straight back: a
// completed loan that still matches the task's criteria is eligible again,
// so a CMD that changes nothing the criteria read gets it back at once,
// without end. "At once" is: before the task has answered empty, and within
// the last runRepeatMemory completions. Called with runner.mu held.
type repeats struct {
	back   map[drivers.Key]repeat // completed loans: how often each came back in a row
	order  []repeat               // the same, oldest completion first, to forget the oldest
	seq    uint64
	warned bool
	// stop is set once a loan came back --max-repeats times in a row.
	stop      bool
	stopLoan  drivers.Key
	stopTimes int
}

type repeat struct {
	loan  drivers.Key
	times int // times it came back in a row
	seq   uint64
}

// taken records a loan a request returned and says how many times in a row
// it has now come back after this runner completed it (0: it did not).
func (rp *repeats) taken(loan drivers.Key) int {
	if c, ok := rp.back[loan]; ok {
		return c.times + 1
	}
	return 0
}

// disposed records how a taken loan ended: completed, it is remembered with
// times (how often it had come back when taken); otherwise its streak ends.
func (rp *repeats) disposed(loan drivers.Key, completed bool, times int) {
	if !completed {
		delete(rp.back, loan)
		return
	}
	if rp.back == nil {
		rp.back = map[drivers.Key]repeat{}
	}
	rp.seq++
	c := repeat{loan: loan, times: times, seq: rp.seq}
	rp.back[loan] = c
	rp.order = append(rp.order, c)
	for len(rp.order) > runRepeatMemory {
		old := rp.order[0]
		rp.order = rp.order[1:]
		if cur, ok := rp.back[old.loan]; ok && cur.seq == old.seq {
			delete(rp.back, old.loan)
		}
	}
}

// empty forgets every completion: the task answered empty, so whatever
// comes later did not come back at once.
func (rp *repeats) empty() {
	rp.back, rp.order = nil, nil
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
	if _, err := e.Task(c.Context, o.task); err != nil {
		return err
	}
	r := &runner{e: e, o: o, stop: c.Context.Done(), db: context.WithoutCancel(c.Context), dsn: c.String("db"),
		out: c.App.Writer, errw: c.App.ErrWriter, cmdOut: c.App.Writer, json: e.json, log: lg,
		progress: isTerminal(c.App.ErrWriter) && !lg.JSON()}
	if r.json {
		r.cmdOut = c.App.ErrWriter // stdout is for the JSON lines
	}
	if lg.JSON() {
		lg.j.Info("work run started", "task", o.task, "user", e.user, "concurrency", o.concurrency, "count", o.count)
	}
	return r.loop(c.Context)
}

func (r *runner) stopping() bool {
	select {
	case <-r.stop:
		return true
	default:
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tooMany || r.repeats.stop
}

func (r *runner) loop(ctx context.Context) error {
	slots := make(chan struct{}, r.o.concurrency)
	var wg sync.WaitGroup
	taken := 0
	defer r.clearProgress()
	for !r.stopping() && (r.o.maxLoans == 0 || taken < r.o.maxLoans) {
		// Wait for a free slot (or the stop signal) before asking for work.
		select {
		case slots <- struct{}{}:
		case <-r.stop:
			continue
		}
		<-slots
		// A command that ended while we waited may have hit --max-failures:
		// it sets that before freeing its slot, so this check sees it.
		if r.stopping() {
			break
		}
		free := r.o.concurrency - len(slots)
		n := min(r.o.count, free)
		if r.o.maxLoans > 0 {
			n = min(n, r.o.maxLoans-taken)
		}
		// OwnRequest: other `work run` processes of this user must not get
		// the same answer (and loans); CancelAs: a signal while waiting
		// cancels the request instead of leaving it to be served later.
		req, err := r.e.Get(ctx, r.o.task, r.e.user, n, dispatch.GetOptions{Backoff: dispatch.DefaultBackoff,
			OwnRequest: true, CancelAs: r.e.user})
		if err != nil {
			if r.stopping() && errors.Is(err, context.Canceled) {
				break
			}
			wg.Wait()
			return err
		}
		if len(req.Loans) == 0 {
			r.mu.Lock()
			r.repeats.empty()
			r.mu.Unlock()
			if r.o.untilEmpty {
				break
			}
			pause.For(ctx, runIdle)
			continue
		}
		for _, loan := range req.Loans {
			back := r.cameBack(loan)
			slots <- struct{}{}
			taken++
			wg.Add(1)
			go func(loan drivers.Key) {
				defer wg.Done()
				defer func() { <-slots }()
				r.process(req, loan, back)
			}(loan)
		}
	}
	wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tooMany {
		return problem.WithHint(fmt.Errorf("stopped after %d failures (--max-failures %d)", r.failures, r.o.maxFailures), "see the failed loans above; they were returned after --retry-after")
	}
	if r.lastError != nil {
		return r.lastError
	}
	if rp := r.repeats; rp.stop {
		return &problem.Exit{Code: problem.ExitRepeats, Msg: fmt.Sprintf(
			"stopped: loan %s came back %s in a row after this runner completed it (--max-repeats %d): "+
				"completing it leaves it matching the criteria of task %s (see above; --max-repeats 0 never stops)",
			rp.stopLoan, times(rp.stopTimes), r.o.maxRepeats, r.o.task)}
	}
	return nil
}

// cameBack checks a loan a request returned against the loans this runner
// completed: the first time one comes back it explains why on stderr, and
// once one has come back --max-repeats times in a row no new work is taken
// (this loan is still processed: it is ours now). It returns how many times
// in a row the loan has come back (0: it did not).
func (r *runner) cameBack(loan drivers.Key) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	back := r.repeats.taken(loan)
	if back == 0 {
		return 0
	}
	if !r.repeats.warned {
		r.repeats.warned = true
		r.clearProgress()
		r.log.Event(slog.LevelWarn, fmt.Sprintf("loanq: loan %s came back right after this runner completed it: the command completed it, "+
			"but it still matches the criteria of task %s, so it is eligible again. Make the command change the data "+
			"the criteria read, or have it exit 65 (never) or 75 (return after --retry-after) for such loans. "+
			"%s", loan, r.o.task, r.repeatLimit()),
			"loan came back right after this runner completed it: it still matches the task's criteria; make the command change the data the criteria read, or exit 65 (never) or 75 (return)",
			"task", r.o.task, "user", r.e.user, "loan", loan, "max_repeats", r.o.maxRepeats)
		r.showProgress()
	}
	if r.o.maxRepeats > 0 && back >= r.o.maxRepeats && !r.repeats.stop {
		r.repeats.stop, r.repeats.stopLoan, r.repeats.stopTimes = true, loan, back
	}
	return back
}

func (r *runner) repeatLimit() string {
	if r.o.maxRepeats == 0 {
		return "(--max-repeats 0: loans may come back without end.)"
	}
	return fmt.Sprintf("The loop stops (exit 3) once a loan has come back %s in a row (--max-repeats %d).", times(r.o.maxRepeats), r.o.maxRepeats)
}

func times(n int) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}

// process runs the command for one loan and disposes of the loan.
func (r *runner) process(req *dispatch.Request, loan drivers.Key, back int) {
	r.mu.Lock()
	r.running++
	r.showProgress()
	r.mu.Unlock()

	// The key as text: an integer's digits, a UUID, or a text key passed
	// as one argument (no shell is involved).
	id := loan.String()
	argv := make([]string, len(r.o.argv))
	for i, a := range r.o.argv {
		argv[i] = strings.ReplaceAll(a, "{}", id)
	}
	if len(argv) > 0 {
		argv[0] = r.o.argv[0]
	}
	env := child.Environ(os.Environ(), r.dsn, "LOANQ_TASK="+r.o.task, "LOANQ_LOAN_ID="+id, "LOANQ_USER="+r.e.user,
		"LOANQ_REQUEST_ID="+strconv.FormatInt(req.ID, 10))
	start := time.Now()
	res := runResult{Task: r.o.task, LoanID: loan}
	interrupted := false
	// In JSON mode each line CMD writes to stderr (and to stdout when that
	// is stderr, --output json) becomes an event naming the loan.
	cmdOut := r.cmdOut
	var outEvents *lineEvents
	if r.json {
		outEvents = r.log.Output(r.cmdOut, "stdout", "task", r.o.task, "loan", loan, "request", req.ID)
		cmdOut = outEvents.writer()
	}
	errEvents := r.log.Output(r.errw, "stderr", "task", r.o.task, "loan", loan, "request", req.ID)
	p, err := child.Start(r.o.path, argv, env, runKillAfter, nil, cmdOut, errEvents.writer())
	if err != nil {
		res.ExitCode, res.why = 127, "could not start: "+err.Error()
	} else {
		res.ExitCode, interrupted, res.why = r.watch(p)
	}
	errEvents.Flush()
	if outEvents != nil {
		outEvents.Flush()
	}
	res.DurationMS = time.Since(start).Milliseconds()

	action, after := dispatch.Complete, time.Duration(0)
	switch {
	case interrupted:
		action, after = dispatch.Return, 0
	case res.why != "":
		action, after, res.failure = dispatch.Return, r.o.retryAfter, true
	case res.ExitCode == 0:
		action = dispatch.Complete
	case res.ExitCode == runExitRetry:
		action, after = dispatch.Return, r.o.retryAfter
	case res.ExitCode == runExitNever:
		action = dispatch.Never
	default:
		action, after, res.failure = dispatch.Return, r.o.retryAfter, true
	}
	res.Disposition = action
	_, derr := r.e.Dispose(r.db, r.o.task, loan.String(), r.e.user, action, after, action == dispatch.Return)

	r.mu.Lock()
	defer r.mu.Unlock()
	r.running--
	r.done++
	r.repeats.disposed(loan, action == dispatch.Complete && derr == nil, back)
	if res.failure {
		r.failures++
		if r.o.maxFailures > 0 && r.failures >= r.o.maxFailures {
			r.tooMany = true
		}
	}
	r.clearProgress()
	if derr != nil {
		r.lastError = derr
		r.log.Event(slog.LevelError, fmt.Sprintf("loanq: loan %s: disposition %s failed: %v", loan, action, derr),
			"disposition failed", "task", r.o.task, "user", r.e.user, "request", req.ID, "loan", loan, "disposition", action, "error", derr.Error())
	}
	r.print(res, after, interrupted)
	if r.log.JSON() {
		level := slog.LevelInfo
		if res.failure {
			level = slog.LevelWarn
		}
		attrs := []any{"task", r.o.task, "user", r.e.user, "request", req.ID, "loan", loan, "exit", res.ExitCode,
			"disposition", string(action), "duration_ms", res.DurationMS, "failure", res.failure}
		if action == dispatch.Return {
			attrs = append(attrs, "return_after_ms", after.Milliseconds())
		}
		if interrupted {
			attrs = append(attrs, "interrupted", true)
		}
		if res.why != "" {
			attrs = append(attrs, "why", res.why)
		}
		r.log.j.Log(context.Background(), level, "loan done", attrs...)
	}
	r.showProgress()
}

// watch waits for the command, enforcing --loan-timeout and, after a stop
// signal, --grace. It returns the exit status, whether the loan must go back
// unfinished (stopped after the grace), and why it counts as a failure
// beyond its exit status ("" if not).
func (r *runner) watch(p *child.Proc) (status int, interrupted bool, why string) {
	var timeout, graceEnd, kill <-chan time.Time
	if r.o.loanTimeout > 0 {
		t := time.NewTimer(r.o.loanTimeout)
		defer t.Stop()
		timeout = t.C
	}
	stop := r.stop
	for {
		select {
		case <-p.Done():
			status = p.Status()
			if why == "" && p.Signaled() {
				why = fmt.Sprintf("ended by signal %d", status-128)
			}
			return status, interrupted, why
		case <-timeout:
			timeout = nil
			why = "--loan-timeout " + r.o.loanTimeout.String() + " passed"
			p.Signal(syscall.SIGTERM)
			kill = time.After(runKillAfter)
		case <-stop:
			stop = nil
			graceEnd = time.After(r.o.grace)
		case <-graceEnd:
			graceEnd = nil
			interrupted = true
			p.Signal(syscall.SIGTERM)
			kill = time.After(runKillAfter)
		case <-kill:
			kill = nil
			p.Signal(syscall.SIGKILL)
		}
	}
}

// print writes one line per loan. Called with r.mu held.
func (r *runner) print(res runResult, after time.Duration, interrupted bool) {
	if r.json {
		b, _ := json.Marshal(res)
		fmt.Fprintf(r.out, "%s\n", b)
		return
	}
	what := res.Disposition
	switch {
	case interrupted:
		what = "returned unfinished (interrupted)"
	case res.Disposition == dispatch.Return:
		what = "return after " + after.String()
	}
	line := fmt.Sprintf("loan %s: exit %d -> %s (%s)", res.LoanID, res.ExitCode, what, (time.Duration(res.DurationMS) * time.Millisecond).String())
	if res.failure {
		line += ", failure"
		if res.why != "" {
			line += ": " + res.why
		}
	}
	fmt.Fprintln(r.out, line)
}

// showProgress and clearProgress draw the progress line on a terminal.
// Called with r.mu held.
func (r *runner) showProgress() {
	if r.progress {
		fmt.Fprintf(r.errw, "\r%s: %d done, %d running, %d failures ", r.o.task, r.done, r.running, r.failures)
	}
}

func (r *runner) clearProgress() {
	if r.progress {
		fmt.Fprint(r.errw, "\r\033[K")
	}
}
