// Package historyrun runs loanq's callers against one task and checks what
// they saw with internal/testkit/history (docs/reliability.md): worker processes (a test
// binary re-executed, each running many callers through dispatch in
// process) and callers that run the loanq binary, all looping get → work →
// disposition while faults strike (a worker SIGKILLed, database sessions
// killed, a server restarted); then the final state is read and checked.
//
// A run is reproducible in its choices: every caller draws from a
// generator seeded from Plan.Seed and its own name (counts, actions,
// cancels); the interleaving is the machine's.
package historyrun

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/testkit/history"
)

// EnvWorker, set in a re-executed worker's environment, names its
// configuration file: the test binary's init calls WorkerMain with it.
const EnvWorker = "LOANQ_HISTORY_WORKER"

// Plan is one run.
type Plan struct {
	DSN  string
	Task string
	Spec
	Seed     uint64
	Duration time.Duration
	// Processes worker processes of PerProcess callers each, through
	// dispatch, each process with a pool of Conns connections; CLI callers
	// through the loanq binary (Loanq), goroutines of this process.
	Processes, PerProcess, Conns int
	// InFlight bounds the calls the callers of one worker process make at
	// once (0: no bound; see caller.gate).
	InFlight int
	CLI      int
	Loanq    string
	// Worker is the command that re-executes a worker (the test binary);
	// EnvWorker is added to its environment.
	Worker []string
	// BigShare is the share of gets asking --count 30; the others ask 1.
	BigShare float64
	Dir      string // the operation logs
	Faults   []Fault
	// KillDSN reaches the server directly to kill sessions (PgBouncer's
	// clients are not the server's sessions); "" for DSN.
	KillDSN string
	Check   history.Options
	Logf    func(format string, args ...any)
}

// Fault is something done to the run at At after its start.
type Fault struct {
	At time.Duration
	// KillWorker SIGKILLs worker process KillWorker-1 (0: none).
	KillWorker int
	// Sessions kills this many database sessions of the run's database.
	Sessions int
	// Do is anything else (a server restart); it runs in Run's goroutine.
	Do   func() error
	Name string
}

// Outcome is a run's history, the final state and what the checker found.
type Outcome struct {
	Ops    []history.Op
	State  history.State
	Result *history.Result
	Notes  []string // what happened (faults)
}

// workerConfig is what a worker process is told.
type workerConfig struct {
	DSN      string        `json:"dsn"`
	Task     string        `json:"task"`
	Source   string        `json:"source"`
	Name     string        `json:"name"`
	Callers  int           `json:"callers"`
	Conns    int           `json:"conns"`
	InFlight int           `json:"in_flight"`
	Seed     uint64        `json:"seed"`
	BigShare float64       `json:"big_share"`
	Duration time.Duration `json:"duration"`
	Log      string        `json:"log"`
}

// seedOf derives a caller's generator from the run's seed and its name.
func seedOf(seed uint64, name string) *rand.Rand {
	var h uint64 = 14695981039346656037
	for i := 0; i < len(name); i++ {
		h = (h ^ uint64(name[i])) * 1099511628211
	}
	return rand.New(rand.NewPCG(seed, h))
}

// WorkerMain runs a worker process's callers (the configuration file in
// path) and returns the process's exit code.
func WorkerMain(path string) int {
	if err := worker(path); err != nil {
		fmt.Fprintln(os.Stderr, "history worker:", err)
		return 1
	}
	return 0
}

func worker(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var cfg workerConfig
	if err := json.Unmarshal(b, &cfg); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration+5*time.Minute)
	defer cancel()
	d, db, _, err := drivers.Connect(ctx, cfg.DSN)
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(cfg.Conns)
	db.SetMaxIdleConns(cfg.Conns)
	if err := db.PingContext(ctx); err != nil {
		return err
	}
	// Ready; the run starts when every worker is (the start on stdin: a
	// loaded machine starts processes seconds apart).
	fmt.Println("ready")
	var startNS int64
	if _, err := fmt.Fscan(os.Stdin, &startNS); err != nil {
		return fmt.Errorf("reading the start: %w", err)
	}
	deadline := time.Unix(0, startNS).Add(cfg.Duration)
	f, err := os.OpenFile(cfg.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	log := history.NewLog(f, cfg.Name)
	e := dispatch.New(db, d)
	var gate chan struct{}
	if cfg.InFlight > 0 {
		gate = make(chan struct{}, cfg.InFlight)
	}
	var wg sync.WaitGroup
	for i := range cfg.Callers {
		user := fmt.Sprintf("%s-c%02d", cfg.Name, i)
		c := &caller{user: user, cl: &engineClient{e: e, task: cfg.Task, user: user}, log: log, d: d, db: db,
			source: cfg.Source, rng: seedOf(cfg.Seed, user), bigShare: cfg.BigShare, deadline: deadline, stagger: cfg.Duration / 4, gate: gate}
		wg.Go(func() { c.run(ctx) })
	}
	wg.Wait()
	return log.Err()
}

// Run runs the plan against a migrated database: it creates the task,
// starts the callers, strikes the faults, waits for the callers to end,
// and checks the history.
func Run(ctx context.Context, p Plan) (*Outcome, error) {
	logf := p.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	began := time.Now()
	d, db, _, err := drivers.Connect(ctx, p.DSN)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	db.SetMaxOpenConns(4)
	taskID, err := setup(ctx, d, db, p.Task, p.Spec, p.Seed)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		return nil, err
	}
	mainLog, err := os.OpenFile(filepath.Join(p.Dir, "main.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	defer mainLog.Close()
	log := history.NewLog(mainLog, "main")

	// Worker processes.
	type worker struct {
		name  string
		cmd   *exec.Cmd
		done  chan struct{}
		err   error
		users []string
		start io.WriteCloser
		ready chan struct{}
	}
	var workers []*worker
	var stderrs []*lockedBuffer
	defer func() {
		for _, w := range workers {
			select {
			case <-w.done:
			default:
				_ = w.cmd.Process.Kill()
				<-w.done
			}
		}
	}()
	for i := range p.Processes {
		name := fmt.Sprintf("w%d", i+1)
		cfg := workerConfig{DSN: p.DSN, Task: p.Task, Source: sourceOf(p.Task), Name: name, Callers: p.PerProcess, Conns: p.Conns, InFlight: p.InFlight,
			Seed: p.Seed, BigShare: p.BigShare, Duration: p.Duration, Log: filepath.Join(p.Dir, name+".jsonl")}
		b, _ := json.Marshal(cfg)
		path := filepath.Join(p.Dir, name+".json")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return nil, err
		}
		cmd := exec.Command(p.Worker[0], p.Worker[1:]...)
		cmd.Env = append(os.Environ(), EnvWorker+"="+path)
		buf := &lockedBuffer{}
		stderrs = append(stderrs, buf)
		cmd.Stderr = buf
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("starting worker %s: %w", name, err)
		}
		w := &worker{name: name, cmd: cmd, done: make(chan struct{}), start: stdin, ready: make(chan struct{})}
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if sc.Text() == "ready" {
					close(w.ready)
				} else {
					_, _ = buf.Write(append(sc.Bytes(), '\n'))
				}
			}
		}()
		for j := range p.PerProcess {
			w.users = append(w.users, fmt.Sprintf("%s-c%02d", name, j))
		}
		go func() { w.err = cmd.Wait(); close(w.done) }()
		workers = append(workers, w)
	}
	// Every worker connected: the run starts.
	for i, w := range workers {
		select {
		case <-w.ready:
		case <-w.done:
			return nil, fmt.Errorf("worker %s ended before it was ready: %v\n%s", w.name, w.err, stderrs[i].String())
		case <-time.After(2 * time.Minute):
			return nil, fmt.Errorf("worker %s not ready after 2 minutes", w.name)
		}
	}
	start := time.Now()
	deadline := start.Add(p.Duration)
	logf("set up and workers ready in %.1fs", time.Since(began).Seconds())
	for _, w := range workers {
		fmt.Fprintln(w.start, start.UnixNano())
		w.start.Close()
	}
	// CLI callers, here.
	hard, stop := context.WithDeadline(ctx, deadline.Add(2*time.Minute))
	defer stop()
	var cli sync.WaitGroup
	for i := range p.CLI {
		user := fmt.Sprintf("cli-c%02d", i)
		c := &caller{user: user, cl: &cliClient{binary: p.Loanq, dsn: p.DSN, task: p.Task, user: user}, log: log, d: d, db: db,
			source: sourceOf(p.Task), rng: seedOf(p.Seed, user), bigShare: p.BigShare, deadline: deadline, stagger: p.Duration / 4}
		cli.Go(func() { c.run(hard) })
	}

	// Faults, in this goroutine.
	out := &Outcome{}
	note := func(format string, args ...any) {
		s := fmt.Sprintf("+%.2fs ", time.Since(start).Seconds()) + fmt.Sprintf(format, args...)
		out.Notes = append(out.Notes, s)
		logf("%s", s)
	}
	killer := db
	if p.KillDSN != "" {
		_, kdb, _, err := drivers.Connect(ctx, p.KillDSN)
		if err != nil {
			return nil, err
		}
		defer kdb.Close()
		killer = kdb
	}
	frng := rand.New(rand.NewPCG(p.Seed, 0xfa17))
	for _, f := range p.Faults {
		if wait := time.Until(start.Add(f.At)); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		switch {
		case f.KillWorker > 0 && f.KillWorker <= len(workers):
			w := workers[f.KillWorker-1]
			inv := time.Now()
			if err := w.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				note("SIGKILL of worker %s: %v", w.name, err)
				continue
			}
			<-w.done
			at := time.Now()
			dbAt := dbNow(ctx, d, db)
			for _, u := range w.users {
				log.Record(history.Op{Caller: u, Kind: history.Kill, Type: history.OK, Process: w.name, Invoke: inv, Complete: at, DBComplete: dbAt})
			}
			note("SIGKILL of worker process %s (%d callers)", w.name, len(w.users))
		case f.Sessions > 0:
			n, err := killSessions(ctx, d, killer, f.Sessions, frng)
			if err != nil {
				note("killing sessions: %v", err)
				continue
			}
			note("killed %d database sessions", n)
		case f.Do != nil:
			if err := f.Do(); err != nil {
				return nil, fmt.Errorf("fault %s: %w", f.Name, err)
			}
			note("%s", f.Name)
		}
	}

	// The end: callers stop asking at the deadline and finish their loans.
	var hung []string
	for _, w := range workers {
		select {
		case <-w.done:
		case <-hard.Done():
			hung = append(hung, w.name)
			_ = w.cmd.Process.Kill()
			<-w.done
		}
	}
	cli.Wait()
	note("callers done (%.1fs after the deadline)", time.Since(deadline).Seconds())
	if len(hung) > 0 {
		return nil, fmt.Errorf("worker processes %v still running 2 minutes after the deadline", hung)
	}
	for i, w := range workers {
		var ee *exec.ExitError
		if w.err != nil && !(errors.As(w.err, &ee) && !ee.Exited()) { // SIGKILLed ones end by signal
			return nil, fmt.Errorf("worker %s: %v\n%s", w.name, w.err, stderrs[i].String())
		}
	}

	// The history and the state.
	for _, name := range append([]string{"main"}, workerNames(len(workers))...) {
		f, err := os.Open(filepath.Join(p.Dir, name+".jsonl"))
		if err != nil {
			return nil, err
		}
		ops, err := history.ReadLog(bufio.NewReader(f))
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("reading %s's history: %w", name, err)
		}
		out.Ops = append(out.Ops, ops...)
	}
	if out.State, err = readState(ctx, d, db, taskID, p.Task); err != nil {
		return nil, err
	}
	var runs, pooled int64
	var meanMS float64
	_ = db.QueryRowContext(ctx, drivers.Rebind(d.Dialect(), "SELECT COUNT(*), COALESCE(AVG(duration_ms), 0) FROM loanq_query_run WHERE task_id = ?"), taskID).Scan(&runs, &meanMS)
	_ = db.QueryRowContext(ctx, drivers.Rebind(d.Dialect(), "SELECT COUNT(*) FROM loanq_work_request WHERE task_id = ? AND pooled = 1"), taskID).Scan(&pooled)
	note("%d criteria runs (mean %.0f ms), %d requests served from the pool", runs, meanMS, pooled)
	checking := time.Now()
	out.Result = history.Check(out.Ops, out.State, p.Check)
	logf("history read and checked in %.1fs", time.Since(checking).Seconds())
	return out, nil
}

func workerNames(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("w%d", i+1))
	}
	return out
}

// lockedBuffer collects a worker's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.b) < 1<<16 {
		l.b = append(l.b, p...)
	}
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}
