package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/problem"
)

// The command-line benchmark (`loanq bench --target cli`) measures what a
// processor's script pays: every call is a new loanq process that connects,
// checks the schema and does one thing. P loops run at once, each a chain of
// processes, in two phases of --duration each, in the same run:
//
//  1. baseline: `task list` + `task show T`, two calls that take no lock —
//     the machine's ceiling for two loanq processes per loop;
//  2. engine: `work get T --count 1` + `disposition T LOAN complete`.
//
// The ratio of the two rates is the share of that ceiling the work queue
// reaches; the work get latency is measured around the whole process.
//
// Like the engine benchmark, it leaves no task, request or work row behind
// and drops its item table, and refuses a database holding tasks of its
// users unless AllowUserTasks is set.

// CLITask is the task `bench --target cli` creates for its run (and deletes
// after it).
const CLITask = "loanq-bench-cli"

// cliCriteria selects the items of the table no caller has completed yet
// for this task: a completed loan still matches `status = 'ready'` (the CLI
// loop has no step that changes it), and handing it out again would make the
// duplicate audit meaningless. loanq's loan ids are text (migration 00013):
// the source key is compared as the dialect writes it (KeyAsText).
func cliCriteria(d drivers.Dialect) string {
	return `status = 'ready' AND NOT EXISTS (SELECT 1 FROM loanq_work cw JOIN loanq_task ct ON ct.id = cw.task_id
 WHERE ct.name = '` + CLITask + `' AND cw.loan_id = ` + d.KeyAsText("src.id") + ` AND cw.disposition = 'complete')`
}

// CLIConfig is one `loanq bench --target cli` invocation.
type CLIConfig struct {
	DSN string
	// MustExist refuses a file database that does not exist (the user named
	// it; see schema.Options).
	MustExist bool
	Strategy  string
	Processes int // concurrent loops of loanq processes
	Rows      int
	Duration  time.Duration // per phase
	// Command is the loanq executable (and arguments before the command);
	// default this executable.
	Command []string
	Env     []string
	// AllowUserTasks runs on a database that holds tasks of its users.
	AllowUserTasks bool

	// inspect, when set (by tests, export_test.go), is called after the
	// audit, before the task and the item table are removed.
	inspect func()
}

// Validate checks the flags; errors are bad input (exit 2).
func (c *CLIConfig) Validate() error {
	if c.Processes < 1 || c.Processes > MaxWorkers {
		return problem.Usagef("invalid --processes %d: give 1 to %d concurrent loops", c.Processes, MaxWorkers)
	}
	if err := checkSizes(1, c.Rows); err != nil {
		return err
	}
	if c.Duration <= 0 || c.Duration > MaxEngineDuration {
		return problem.Usagef("invalid --duration %s: --target cli runs each phase this long; give e.g. 20s", c.Duration)
	}
	return checkOneStrategy("cli", c.Strategy)
}

// CLIResult is the JSON document of `loanq bench --target cli`.
type CLIResult struct {
	Target          string  `json:"target"`
	Database        string  `json:"database"`
	Strategy        string  `json:"strategy"`
	Processes       int     `json:"processes"`
	DurationMS      int64   `json:"duration_ms"` // per phase
	BaselinePairs   int64   `json:"baseline_pairs"`
	BaselinePerS    float64 `json:"baseline_pairs_per_s"`
	Loans           int64   `json:"loans"` // completed (work get + complete pairs), read from the database
	LoansPerS       float64 `json:"loans_per_s"`
	Ratio           float64 `json:"ratio"` // loans_per_s / baseline_pairs_per_s
	GetP50MS        int64   `json:"get_p50_ms"`
	GetP99MS        int64   `json:"get_p99_ms"`
	GetMaxMS        int64   `json:"get_max_ms"`
	CallP50MS       int64   `json:"lockfree_call_p50_ms"` // task list / task show, one process each
	Busy            int64   `json:"busy"`                 // work gets that exited 75
	Duplicates      int64   `json:"duplicates"`
	Pending         int64   `json:"pending"` // requests still pending after the run
	CriteriaRuns    int64   `json:"criteria_runs"`
	Requests        int64   `json:"requests"`
	Server          string  `json:"server"`
	EngineElapsedMS int64   `json:"engine_elapsed_ms"`
}

// RunCLI runs both phases and audits the task.
func RunCLI(ctx context.Context, cfg CLIConfig) (_ *CLIResult, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ss, err := openSession(ctx, cfg.DSN, cfg.MustExist)
	if err != nil {
		return nil, err
	}
	defer ss.close(ctx, &err)
	s, err := oneStrategy(ss.d, cfg.Strategy)
	if err != nil {
		return nil, err
	}
	cl, err := newCLICaller(cfg)
	if err != nil {
		return nil, err
	}
	if err := refuseUserTasks(ctx, ss.e, cfg.AllowUserTasks); err != nil {
		return nil, err
	}
	r := &CLIResult{Target: "cli", Database: ss.target.Redacted(), Strategy: string(s), Processes: cfg.Processes, DurationMS: cfg.Duration.Milliseconds()}
	if r.Server, err = ss.start(ctx); err != nil {
		return nil, err
	}
	if err := fill(ctx, ss.db, ss.c, cfg.Rows); err != nil {
		return nil, err
	}
	if err := ss.task(ctx, dispatch.TaskSpec{Name: CLITask, Where: cliCriteria(ss.d.Dialect()), Lock: s}); err != nil {
		return nil, err
	}
	if err := cl.baseline(ctx, cfg, r); err != nil {
		return nil, err
	}
	elapsed, err := cl.workLoop(ctx, cfg, r)
	if err != nil {
		return nil, err
	}
	if err := auditCLI(ctx, ss, r); err != nil {
		return nil, err
	}
	r.LoansPerS = round3(float64(r.Loans) / elapsed.Seconds())
	if r.BaselinePerS > 0 {
		r.Ratio = round3(r.LoansPerS / r.BaselinePerS)
	}
	if cfg.inspect != nil {
		cfg.inspect()
	}
	return r, nil
}

// cliCaller runs loanq processes: the executable and the environment every
// call shares.
type cliCaller struct {
	command []string
	env     []string
}

func newCLICaller(cfg CLIConfig) (*cliCaller, error) {
	command := cfg.Command
	if len(command) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("finding loanq's own executable: %w", err)
		}
		command = []string{exe}
	}
	env := append(append(os.Environ(), cfg.Env...), "LOANQ_DB="+cfg.DSN, "LOANQ_OUTPUT=json")
	return &cliCaller{command: command, env: env}, nil
}

// call runs one loanq process as user and returns its stdout, how long it
// took and its exit code; an exit other than 0 or 75 (busy) is an error.
func (cl *cliCaller) call(ctx context.Context, user string, args ...string) ([]byte, time.Duration, int, error) {
	cmd := exec.CommandContext(ctx, cl.command[0], append(append([]string{}, cl.command[1:]...), args...)...)
	cmd.Env = slices.Concat(cl.env, []string{"LOANQ_USER=" + user}) // a copy: the loops run at once
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	t0 := time.Now()
	err := cmd.Run()
	took := time.Since(t0)
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return nil, took, -1, err
		}
		code = ee.ExitCode()
		if code != problem.ExitBusy {
			return nil, took, code, fmt.Errorf("loanq %v exited %d: %s", args, code, bytes.TrimSpace(errb.Bytes()))
		}
	}
	return out.Bytes(), took, code, nil
}

// baseline is phase 1: two lock-free calls per loop.
func (cl *cliCaller) baseline(ctx context.Context, cfg CLIConfig, r *CLIResult) error {
	var mu sync.Mutex
	var calls []int64
	pairs, elapsed, err := loops(ctx, cfg.Processes, cfg.Duration, func(ctx context.Context, p int) (bool, error) {
		user := fmt.Sprintf("bench-cli-%03d", p)
		_, t1, _, err := cl.call(ctx, user, "task", "list")
		if err != nil {
			return false, err
		}
		_, t2, _, err := cl.call(ctx, user, "task", "show", CLITask)
		if err != nil {
			return false, err
		}
		mu.Lock()
		calls = append(calls, t1.Microseconds(), t2.Microseconds())
		mu.Unlock()
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("baseline loop: %w", err)
	}
	r.BaselinePairs = pairs
	r.BaselinePerS = round3(float64(pairs) / elapsed.Seconds())
	slices.Sort(calls)
	if len(calls) > 0 {
		r.CallP50MS = (percentile(calls, 0.5) + 500) / 1000
	}
	return nil
}

// workLoop is phase 2: work get + complete, until drained or the phase
// ends. It returns the phase's elapsed time.
func (cl *cliCaller) workLoop(ctx context.Context, cfg CLIConfig, r *CLIResult) (time.Duration, error) {
	var mu sync.Mutex
	var gets []int64
	var busy int64
	_, elapsed, err := loops(ctx, cfg.Processes, cfg.Duration, func(ctx context.Context, p int) (bool, error) {
		user := fmt.Sprintf("bench-cli-%03d", p)
		out, took, code, err := cl.call(ctx, user, "work", "get", CLITask, "--count", "1", "--timeout", getTimeout.String())
		if err != nil {
			return false, err
		}
		mu.Lock()
		gets = append(gets, took.Microseconds())
		if code == problem.ExitBusy {
			busy++
		}
		mu.Unlock()
		if code == problem.ExitBusy {
			return true, nil
		}
		var req struct {
			Loans []int64 `json:"loans"`
		}
		if err := json.Unmarshal(out, &req); err != nil {
			return false, fmt.Errorf("reading work get's JSON %q: %w", out, err)
		}
		if len(req.Loans) == 0 {
			return false, nil // drained
		}
		for _, loan := range req.Loans {
			if _, _, _, err := cl.call(ctx, user, "disposition", CLITask, strconv.FormatInt(loan, 10), "complete"); err != nil {
				return false, err
			}
		}
		return true, nil
	})
	if err != nil {
		return 0, fmt.Errorf("work get loop: %w", err)
	}
	r.EngineElapsedMS = elapsed.Milliseconds()
	r.Busy = busy
	slices.Sort(gets)
	if len(gets) > 0 {
		r.GetP50MS = (percentile(gets, 0.5) + 500) / 1000
		r.GetP99MS = (percentile(gets, 0.99) + 500) / 1000
		r.GetMaxMS = (gets[len(gets)-1] + 500) / 1000
	}
	return elapsed, nil
}

// auditCLI reads the outcome from the database: completed loans,
// duplicate assignments, requests and criteria runs of the task.
func auditCLI(ctx context.Context, ss *session, r *CLIResult) error {
	task, err := ss.e.Task(ctx, CLITask)
	if err != nil {
		return err
	}
	st := dispatch.ReportSQL(ss.d)
	dups, err := st.WorkDuplicates.One(ctx, ss.db, engineio.TaskParams{TaskID: task.ID})
	if err != nil {
		return fmt.Errorf("auditing the bench task's work: %w", err)
	}
	r.Duplicates = dups.Duplicates
	byUser, err := st.WorkByUser.All(ctx, ss.db, engineio.TaskParams{TaskID: task.ID})
	if err != nil {
		return fmt.Errorf("counting completed loans: %w", err)
	}
	for _, u := range byUser {
		if u.Disposition.Valid && u.Disposition.String == dispatch.Complete {
			r.Loans += u.N
		}
	}
	if r.CriteriaRuns, r.Requests, r.Pending, err = taskCounts(ctx, ss.db, st, task.ID); err != nil {
		return err
	}
	return nil
}

// loops runs n loops of step until d has passed or a step says stop, and
// returns how many steps completed and the time from start to the last one.
func loops(ctx context.Context, n int, d time.Duration, step func(ctx context.Context, p int) (bool, error)) (int64, time.Duration, error) {
	start := time.Now()
	deadline := start.Add(d)
	var mu sync.Mutex
	var done int64
	errs := make([]error, n)
	var wg sync.WaitGroup
	for p := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				more, err := step(ctx, p+1)
				if err != nil {
					errs[p] = err
					return
				}
				if !more {
					return
				}
				mu.Lock()
				done++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return done, time.Since(start), errors.Join(errs...)
}

// WriteCLIText prints a cli run for people.
func WriteCLIText(w interface{ Write([]byte) (int, error) }, r *CLIResult) {
	fmt.Fprintf(w, "cli, %s on %s (%s): %d concurrent loops of loanq processes, %d ms per phase\n", r.Strategy, r.Server, r.Database, r.Processes, r.DurationMS)
	fmt.Fprintf(w, "  baseline task list + task show: %d pairs, %.1f pairs/s (one lock-free call: p50 %d ms)\n", r.BaselinePairs, r.BaselinePerS, r.CallP50MS)
	fmt.Fprintf(w, "  work get --count 1 + disposition complete: %d loans, %.1f loans/s — %.0f %% of the baseline\n", r.Loans, r.LoansPerS, 100*r.Ratio)
	fmt.Fprintf(w, "  work get p50 %d ms, p99 %d ms, max %d ms; %d timed out; %d requests, %d criteria runs, %d left pending; duplicates %d\n",
		r.GetP50MS, r.GetP99MS, r.GetMaxMS, r.Busy, r.Requests, r.CriteriaRuns, r.Pending, r.Duplicates)
}
