// Package workrun is the process supervisor of `loanq work run`: it asks a
// Queue for loans, runs a command once per loan (internal/child: its own
// process group, stopped when loanq dies, an environment without loanq's
// secrets), chooses each loan's disposition by the command's exit status,
// and stops on --max-failures, --max-repeats or a stop signal. It prints
// nothing: an Observer supplied by the command is told what happens.
package workrun

import (
	"context"
	"errors"
	"fmt"
	"github.com/loanq/loanq/loankey"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/child"
	"github.com/loanq/loanq/internal/pause"
)

// Exit statuses of the command that choose a disposition (sysexits.h):
// EX_TEMPFAIL asks for a retry later, EX_DATAERR says the loan can never be
// processed. Any other status but 0 is a failure.
const (
	ExitRetry = 75
	ExitNever = 65
)

// Defaults of the Options left zero, and of the command line.
const (
	// DefaultIdle is the pause between asks when the task answered empty
	// and UntilEmpty is not set.
	DefaultIdle = 5 * time.Second
	// DefaultKillAfter is how long a command has after SIGTERM before
	// SIGKILL (also when loanq dies: internal/child's guard).
	DefaultKillAfter = 5 * time.Second
	// DefaultMaxRepeats is --max-repeats when not given.
	DefaultMaxRepeats = 3
)

// Queue is the database side of a run, supplied by the command (the engine,
// for one task and one user).
type Queue interface {
	// Get asks for up to n loans and returns the request's id and its
	// loans, none when the task answered empty. When ctx ends while the
	// request waits, the request must be cancelled, not left to be served.
	Get(ctx context.Context, n int) (request int64, loans []loankey.Key, err error)
	// Dispose records how a loan ended: action is dispatch.Complete,
	// dispatch.Return (back after after) or dispatch.Never.
	Dispose(ctx context.Context, loan loankey.Key, action string, after time.Duration) error
}

// Observer is told what happens, to show it. Started, CameBack and Done are
// called one at a time; Output from the goroutine that runs the loan's
// command.
type Observer interface {
	// Output returns where the command of a loan writes its stdout and
	// stderr, and a function called once the command has ended (nil: none).
	Output(l Loan) (stdout, stderr io.Writer, ended func())
	// Started: a command is about to start.
	Started(p Progress)
	// CameBack: the first loan of the run that came back right after the
	// run completed it (times in a row); called once per run.
	CameBack(l Loan, times int)
	// Done: a loan was disposed of (or its disposition failed: Result.Err).
	Done(r Result, p Progress)
}

// Options are what a run does; the command checks them.
type Options struct {
	Task string
	User string
	// Path is the program (child.Resolve), Argv its arguments, Argv[0] the
	// name it sees. {} in Argv[1:] is replaced by the loan id.
	Path string
	Argv []string
	// DSN is the database in use: a DATABASE_URL that holds it is kept from
	// the command's environment (child.Environ), as are the variables its
	// client reads the password from (PasswordEnv, drivers.PasswordEnv).
	DSN         string
	PasswordEnv []string

	Count       int           // loans asked for at a time (at most the free slots)
	Concurrency int           // commands running at once
	MaxLoans    int           // stop after this many loans (0: no limit)
	UntilEmpty  bool          // stop when the task answers empty
	RetryAfter  time.Duration // return delay for ExitRetry and failures
	LoanTimeout time.Duration // SIGTERM a command after this long, a failure (0: no limit)
	Grace       time.Duration // after the stop, how long commands may finish
	MaxFailures int           // stop after this many failures (0: never)
	MaxRepeats  int           // stop once a completed loan came back this many times in a row (0: never)

	Idle      time.Duration // 0: DefaultIdle
	KillAfter time.Duration // 0: DefaultKillAfter
}

// Loan is one loan of a request.
type Loan struct {
	Request int64
	Key     loankey.Key
}

// Progress is what the run counts.
type Progress struct {
	Done, Running, Failures int
}

// Result is one processed loan.
type Result struct {
	Loan
	ExitCode    int           // 128+N when signal N ended the command, 127 when it could not start
	Disposition string        // dispatch.Complete, Return or Never
	After       time.Duration // the return delay (Disposition Return)
	Duration    time.Duration // how long the command ran
	// Failure: it counts towards MaxFailures; Why says why beyond the exit
	// status ("" if nothing more: a plain non-zero status).
	Failure bool
	Why     string
	// Interrupted: stopped after the grace, returned unfinished at once.
	Interrupted bool
	// Err: the disposition failed (the run ends with this error).
	Err error
}

// MaxFailuresError is a run stopped by MaxFailures.
type MaxFailuresError struct{ Failures, Max int }

func (e *MaxFailuresError) Error() string {
	return fmt.Sprintf("stopped after %d failures (max %d)", e.Failures, e.Max)
}

// RepeatsError is a run stopped by MaxRepeats: Loan came back Times times in
// a row after the run completed it.
type RepeatsError struct {
	Loan       loankey.Key
	Times, Max int
}

func (e *RepeatsError) Error() string {
	return fmt.Sprintf("stopped: loan %s came back %d times in a row (max %d)", e.Loan, e.Times, e.Max)
}

// Runner is one run.
type Runner struct {
	o   Options
	q   Queue
	obs Observer

	stop <-chan struct{} // the caller's context ended: no new work
	db   context.Context // dispositions: not cancelled by the stop, so unfinished loans are still returned

	mu        sync.Mutex
	done      int
	running   int
	failures  int
	tooMany   bool
	lastError error
	repeats   repeats
}

// New prepares a run.
func New(o Options, q Queue, obs Observer) *Runner {
	if o.Idle == 0 {
		o.Idle = DefaultIdle
	}
	if o.KillAfter == 0 {
		o.KillAfter = DefaultKillAfter
	}
	return &Runner{o: o, q: q, obs: obs}
}

// Run gets loans and runs the command for each until the task answers empty
// (UntilEmpty), MaxLoans were taken, or ctx ends (a stop signal: no new work
// is taken, running commands get Grace, then SIGTERM; what is unfinished is
// returned at once, and Run returns nil). It returns a *MaxFailuresError or a
// *RepeatsError when those limits stopped it, or the queue's error.
func (r *Runner) Run(ctx context.Context) error {
	r.stop, r.db = ctx.Done(), context.WithoutCancel(ctx)
	slots := make(chan struct{}, r.o.Concurrency)
	var wg sync.WaitGroup
	taken := 0
	for !r.stopping() && (r.o.MaxLoans == 0 || taken < r.o.MaxLoans) {
		// Wait for a free slot (or the stop signal) before asking for work.
		select {
		case slots <- struct{}{}:
		case <-r.stop:
			continue
		}
		<-slots
		// A command that ended while we waited may have hit MaxFailures:
		// it sets that before freeing its slot, so this check sees it.
		if r.stopping() {
			break
		}
		free := r.o.Concurrency - len(slots)
		n := min(r.o.Count, free)
		if r.o.MaxLoans > 0 {
			n = min(n, r.o.MaxLoans-taken)
		}
		req, loans, err := r.q.Get(ctx, n)
		if err != nil {
			if r.stopping() && errors.Is(err, context.Canceled) {
				break
			}
			wg.Wait()
			return err
		}
		if len(loans) == 0 {
			r.mu.Lock()
			r.repeats.empty()
			r.mu.Unlock()
			if r.o.UntilEmpty {
				break
			}
			pause.For(ctx, r.o.Idle)
			continue
		}
		for _, key := range loans {
			l := Loan{Request: req, Key: key}
			back := r.cameBack(l)
			slots <- struct{}{}
			taken++
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				r.process(l, back)
			}()
		}
	}
	wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tooMany {
		return &MaxFailuresError{Failures: r.failures, Max: r.o.MaxFailures}
	}
	if r.lastError != nil {
		return r.lastError
	}
	if r.repeats.stop != nil {
		return r.repeats.stop
	}
	return nil
}

func (r *Runner) stopping() bool {
	select {
	case <-r.stop:
		return true
	default:
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tooMany || r.repeats.stop != nil
}

// cameBack checks a loan a request returned against the loans this run
// completed: the first time one comes back the observer is told, and once
// one has come back MaxRepeats times in a row no new work is taken (this
// loan is still processed: it is ours now). It returns how many times in a
// row the loan has come back (0: it did not).
func (r *Runner) cameBack(l Loan) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	back := r.repeats.taken(l.Key)
	if back == 0 {
		return 0
	}
	if !r.repeats.warned {
		r.repeats.warned = true
		r.obs.CameBack(l, back)
	}
	if r.o.MaxRepeats > 0 && back >= r.o.MaxRepeats && r.repeats.stop == nil {
		r.repeats.stop = &RepeatsError{Loan: l.Key, Times: back, Max: r.o.MaxRepeats}
	}
	return back
}

func (r *Runner) progress() Progress {
	return Progress{Done: r.done, Running: r.running, Failures: r.failures}
}

// Environ is the environment of the command for one loan: the caller's
// (base) without loanq's secrets (child.Environ), plus LOANQ_TASK,
// LOANQ_LOAN_ID, LOANQ_USER and LOANQ_REQUEST_ID.
func Environ(base []string, o Options, l Loan) []string {
	return child.Environ(base, o.DSN, o.PasswordEnv, "LOANQ_TASK="+o.Task, "LOANQ_LOAN_ID="+l.Key.String(), "LOANQ_USER="+o.User,
		"LOANQ_REQUEST_ID="+strconv.FormatInt(l.Request, 10))
}

// Args is the command's argv for a loan: {} in the arguments (not in the
// program's name) replaced by the key as text: an integer's digits, a UUID,
// or a text key passed as one argument (no shell is involved).
func Args(argv []string, loan loankey.Key) []string {
	id := loan.String()
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = strings.ReplaceAll(a, "{}", id)
	}
	if len(out) > 0 {
		out[0] = argv[0]
	}
	return out
}

// Disposition maps how a command ended to what becomes of its loan: status
// 0 complete, ExitRetry return after retryAfter, ExitNever never, anything
// else (or a why: a signal, the timeout, a failed start) return after
// retryAfter as a failure; interrupted (stopped after the grace) return at
// once, not a failure.
func Disposition(status int, why string, interrupted bool, retryAfter time.Duration) (action string, after time.Duration, failure bool) {
	switch {
	case interrupted:
		return dispatch.Return, 0, false
	case why != "":
		return dispatch.Return, retryAfter, true
	case status == 0:
		return dispatch.Complete, 0, false
	case status == ExitRetry:
		return dispatch.Return, retryAfter, false
	case status == ExitNever:
		return dispatch.Never, 0, false
	default:
		return dispatch.Return, retryAfter, true
	}
}

// process runs the command for one loan and disposes of the loan.
func (r *Runner) process(l Loan, back int) {
	r.mu.Lock()
	r.running++
	r.obs.Started(r.progress())
	r.mu.Unlock()

	res := Result{Loan: l}
	start := time.Now()
	stdout, stderr, ended := r.obs.Output(l)
	p, err := child.Start(r.o.Path, Args(r.o.Argv, l.Key), Environ(os.Environ(), r.o, l), r.o.KillAfter, nil, stdout, stderr)
	if err != nil {
		res.ExitCode, res.Why = 127, "could not start: "+err.Error()
	} else {
		res.ExitCode, res.Interrupted, res.Why = r.watch(p)
	}
	if ended != nil {
		ended()
	}
	res.Duration = time.Since(start)
	res.Disposition, res.After, res.Failure = Disposition(res.ExitCode, res.Why, res.Interrupted, r.o.RetryAfter)
	res.Err = r.q.Dispose(r.db, l.Key, res.Disposition, res.After)

	r.mu.Lock()
	defer r.mu.Unlock()
	r.running--
	r.done++
	r.repeats.disposed(l.Key, res.Disposition == dispatch.Complete && res.Err == nil, back)
	if res.Failure {
		r.failures++
		if r.o.MaxFailures > 0 && r.failures >= r.o.MaxFailures {
			r.tooMany = true
		}
	}
	if res.Err != nil {
		r.lastError = res.Err
	}
	r.obs.Done(res, r.progress())
}

// watch waits for the command, enforcing LoanTimeout and, after the stop,
// Grace. It returns the exit status, whether the loan must go back
// unfinished (stopped after the grace), and why it counts as a failure
// beyond its exit status ("" if not).
func (r *Runner) watch(p *child.Proc) (status int, interrupted bool, why string) {
	var timeout, graceEnd, kill <-chan time.Time
	if r.o.LoanTimeout > 0 {
		t := time.NewTimer(r.o.LoanTimeout)
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
			why = "--loan-timeout " + r.o.LoanTimeout.String() + " passed"
			p.Signal(syscall.SIGTERM)
			kill = time.After(r.o.KillAfter)
		case <-stop:
			stop = nil
			graceEnd = time.After(r.o.Grace)
		case <-graceEnd:
			graceEnd = nil
			interrupted = true
			p.Signal(syscall.SIGTERM)
			kill = time.After(r.o.KillAfter)
		case <-kill:
			kill = nil
			p.Signal(syscall.SIGKILL)
		}
	}
}
