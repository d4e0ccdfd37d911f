package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/loanq/loanq/drivers"
)

// With --processes P the workers run in P separate OS processes: loanq runs
// itself with the hidden subcommand `bench worker`, which is what shows that
// nothing but the database coordinates them. The protocol on the child's
// stdin/stdout is line-based:
//
//	child  → "ready\n"  once its connections are open
//	parent → "go\n"     to every child at once; the parent's clock starts
//	child  → one JSON ChildReport line when its workers are done
//
// The DSN travels in the environment (LOANQ_DB), never on the command line,
// where `ps` would show a password.

// ChildConfig is what one child process runs.
type ChildConfig struct {
	DSN      string
	Strategy string
	First    int // number of its first worker (workers are numbered 1..N across processes)
	Count    int
	Work     time.Duration
	Batch    int
}

// ChildReport is the child's answer: item workers (`bench worker`) or
// engine callers (`bench engine-worker`).
type ChildReport struct {
	Workers []WorkerResult       `json:"workers,omitempty"`
	Callers []engineWorkerReport `json:"callers,omitempty"`
	Error   string               `json:"error,omitempty"`
}

// handshake is a child's side of the start: say ready, wait for go.
func handshake(in io.Reader, out io.Writer, who string) func() error {
	return func() error {
		if _, err := fmt.Fprintln(out, "ready"); err != nil {
			return err
		}
		line, err := bufio.NewReader(in).ReadString('\n')
		if err != nil || strings.TrimSpace(line) != "go" {
			return fmt.Errorf("%s: no go from the parent (%q, %v)", who, line, err)
		}
		return nil
	}
}

// report writes a child's answer as one JSON line; the run's error goes in
// it and is returned too.
func report(out io.Writer, rep ChildReport, err error) error {
	if err != nil {
		rep.Error = err.Error()
	}
	encErr := json.NewEncoder(out).Encode(rep)
	if err != nil {
		return err
	}
	return encErr
}

// decodeReports reads the children's answers; any child's error fails the run.
func decodeReports(lines []string) ([]ChildReport, error) {
	var reps []ChildReport
	var errs []error
	for i, line := range lines {
		var rep ChildReport
		if err := json.Unmarshal([]byte(line), &rep); err != nil {
			errs = append(errs, fmt.Errorf("worker process %d: %v", i+1, err))
			continue
		}
		if rep.Error != "" {
			errs = append(errs, fmt.Errorf("worker process %d: %s", i+1, rep.Error))
		}
		reps = append(reps, rep)
	}
	return reps, errors.Join(errs...)
}

// RunChild is the hidden `loanq bench worker`: it runs its share of the
// workers when the parent says go and reports them on out.
func RunChild(ctx context.Context, cfg ChildConfig, in io.Reader, out io.Writer) error {
	s, err := drivers.ParseStrategy(cfg.Strategy)
	if err != nil {
		return err
	}
	if cfg.Count < 1 || cfg.Count > MaxWorkers || cfg.First < 1 || cfg.Batch < 1 || cfg.Batch > MaxBatch || cfg.Work < 0 || cfg.Work > MaxWork {
		return fmt.Errorf("bench worker: bad arguments %+v", cfg)
	}
	workers, _, err := runLocal(ctx, cfg.DSN, s, cfg.First, cfg.Count, cfg.Work, cfg.Batch, handshake(in, out, "bench worker"))
	return report(out, ChildReport{Workers: workers}, err)
}

type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr strings.Builder
}

// split spreads workers over processes: the first and count of each share.
func split(workers, processes int) [][2]int {
	var out [][2]int
	first := 1
	for p := 0; p < processes; p++ {
		n := workers / processes
		if p < workers%processes {
			n++
		}
		out = append(out, [2]int{first, n})
		first += n
	}
	return out
}

// spawn starts one child per argument list (after command, default this
// executable with "bench worker"), waits until all are connected, starts them
// together and returns each child's report line and the time from go to the
// last report.
func spawn(ctx context.Context, command []string, env []string, dsn string, argLists [][]string) ([]string, time.Duration, error) {
	if len(command) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, 0, fmt.Errorf("finding loanq's own executable for --processes: %w", err)
		}
		command = []string{exe, "bench", "worker"}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var children []*child
	defer func() {
		for _, c := range children {
			c.stdin.Close()
			_ = c.cmd.Wait() // after cancel, CommandContext has killed any child still running
		}
	}()
	for p, extra := range argLists {
		c, err := startChild(ctx, command, env, dsn, extra, p)
		if err != nil {
			return nil, 0, err
		}
		children = append(children, c)
	}
	start, err := startTogether(children)
	if err != nil {
		return nil, 0, err
	}
	lines, err := readReports(children)
	return lines, time.Since(start), err
}

// startChild starts child number p (from 0) with its stdin and stdout piped;
// the child connects, says "ready" and waits for "go".
func startChild(ctx context.Context, command []string, env []string, dsn string, extra []string, p int) (*child, error) {
	args := append(append([]string{}, command[1:]...), extra...)
	c := &child{cmd: exec.CommandContext(ctx, command[0], args...)}
	c.cmd.Env = append(append(os.Environ(), env...), "LOANQ_DB="+dsn)
	c.cmd.Stderr = &c.stderr
	var err error
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c.stdout = bufio.NewReader(out)
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting worker process %d: %w", p+1, err)
	}
	return c, nil
}

// startTogether waits until every child is ready (connected), then tells
// them all to go, and returns when it did: the start of the measured time.
func startTogether(children []*child) (time.Time, error) {
	for i, c := range children {
		line, err := c.stdout.ReadString('\n')
		if err != nil || strings.TrimSpace(line) != "ready" {
			return time.Time{}, fmt.Errorf("worker process %d did not get ready: %q %v %s", i+1, line, err, strings.TrimSpace(c.stderr.String()))
		}
	}
	start := time.Now()
	for i, c := range children {
		if _, err := io.WriteString(c.stdin, "go\n"); err != nil {
			return time.Time{}, fmt.Errorf("starting worker process %d: %w", i+1, err)
		}
	}
	return start, nil
}

// readReports reads every child's report line, one goroutine per child, so
// each report is read as soon as its child writes it.
func readReports(children []*child) ([]string, error) {
	lines := make([]string, len(children))
	errs := make([]error, len(children))
	var wg sync.WaitGroup
	for i, c := range children {
		wg.Add(1)
		go func() {
			defer wg.Done()
			line, err := c.stdout.ReadString('\n')
			if err != nil {
				errs[i] = fmt.Errorf("worker process %d: %v %s", i+1, err, strings.TrimSpace(c.stderr.String()))
			}
			lines[i] = line
		}()
	}
	wg.Wait()
	return lines, errors.Join(errs...)
}

// runProcesses runs the item-table workers in cfg.Processes children.
func runProcesses(ctx context.Context, cfg *Config, s drivers.Strategy) ([]WorkerResult, time.Duration, error) {
	var argLists [][]string
	for _, sh := range split(cfg.Workers, cfg.Processes) {
		argLists = append(argLists, []string{"--strategy", string(s), "--first", strconv.Itoa(sh[0]), "--count", strconv.Itoa(sh[1]),
			"--work", cfg.Work.String(), "--batch", strconv.Itoa(cfg.Batch)})
	}
	lines, elapsed, err := spawn(ctx, cfg.Command, cfg.Env, cfg.DSN, argLists)
	if err != nil {
		return nil, elapsed, err
	}
	reps, err := decodeReports(lines)
	if err != nil {
		return nil, elapsed, err
	}
	var all []WorkerResult
	for _, rep := range reps {
		all = append(all, rep.Workers...)
	}
	slices.SortFunc(all, func(a, b WorkerResult) int { return a.Worker - b.Worker })
	return all, elapsed, nil
}

// EngineChildConfig is what one child process of `bench --target engine
// --processes P` runs.
type EngineChildConfig struct {
	DSN      string
	Strategy string
	First    int
	Workers  int
	Count    int
	Duration time.Duration
	Work     time.Duration
	Batch    bool // --dispose batch
	Marks    bool
}

// RunEngineChild is the hidden `loanq bench engine-worker`.
func RunEngineChild(ctx context.Context, cfg EngineChildConfig, in io.Reader, out io.Writer) error {
	s, err := drivers.ParseStrategy(cfg.Strategy)
	if err != nil {
		return err
	}
	if cfg.Workers < 1 || cfg.Workers > MaxWorkers || cfg.First < 1 || cfg.Count < 1 || cfg.Duration < 0 || cfg.Work < 0 || cfg.Work > MaxWork {
		return fmt.Errorf("bench engine-worker: bad arguments %+v", cfg)
	}
	reps, _, err := runEngineLocal(ctx, engineShare{DSN: cfg.DSN, Strategy: s, First: cfg.First, N: cfg.Workers,
		Count: cfg.Count, Duration: cfg.Duration, Work: cfg.Work, Batch: cfg.Batch, Marks: cfg.Marks}, handshake(in, out, "bench engine-worker"))
	return report(out, ChildReport{Callers: reps}, err)
}

// runEngineProcesses runs the engine callers in cfg.Processes children.
func runEngineProcesses(ctx context.Context, cfg *EngineConfig, s drivers.Strategy) ([]engineWorkerReport, time.Duration, error) {
	command := cfg.Command
	if len(command) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, 0, fmt.Errorf("finding loanq's own executable for --processes: %w", err)
		}
		command = []string{exe, "bench", "engine-worker"}
	}
	var argLists [][]string
	for _, sh := range split(cfg.Workers, cfg.Processes) {
		a := []string{"--strategy", string(s), "--first", strconv.Itoa(sh[0]), "--workers", strconv.Itoa(sh[1]),
			"--count", strconv.Itoa(cfg.Count), "--duration", cfg.Duration.String(), "--work", cfg.Work.String()}
		if cfg.Chart != "" {
			a = append(a, "--marks")
		}
		if cfg.Dispose == DisposeBatch {
			a = append(a, "--batch-dispose")
		}
		argLists = append(argLists, a)
	}
	lines, elapsed, err := spawn(ctx, command, cfg.Env, cfg.DSN, argLists)
	if err != nil {
		return nil, elapsed, err
	}
	reps, err := decodeReports(lines)
	var all []engineWorkerReport
	for _, rep := range reps {
		all = append(all, rep.Callers...)
	}
	return all, elapsed, err
}
