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

// ChildReport is the child's answer.
type ChildReport struct {
	Workers []WorkerResult `json:"workers"`
	Error   string         `json:"error,omitempty"`
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
	ready := func() error {
		if _, err := fmt.Fprintln(out, "ready"); err != nil {
			return err
		}
		line, err := bufio.NewReader(in).ReadString('\n')
		if err != nil || strings.TrimSpace(line) != "go" {
			return fmt.Errorf("bench worker: no go from the parent (%q, %v)", line, err)
		}
		return nil
	}
	workers, _, err := runLocal(ctx, cfg.DSN, s, cfg.First, cfg.Count, cfg.Work, cfg.Batch, ready)
	rep := ChildReport{Workers: workers}
	if err != nil {
		rep.Error = err.Error()
	}
	encErr := json.NewEncoder(out).Encode(rep)
	if err != nil {
		return err
	}
	return encErr
}

type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr strings.Builder
	first  int
	count  int
}

// runProcesses starts cfg.Processes children, waits until all are connected,
// starts them together and gathers their reports.
func runProcesses(ctx context.Context, cfg *Config, s drivers.Strategy) ([]WorkerResult, time.Duration, error) {
	command := cfg.Command
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
	first := 1
	for p := 0; p < cfg.Processes; p++ {
		n := cfg.Workers / cfg.Processes
		if p < cfg.Workers%cfg.Processes {
			n++
		}
		args := append(append([]string{}, command[1:]...),
			"--strategy", string(s), "--first", strconv.Itoa(first), "--count", strconv.Itoa(n),
			"--work", cfg.Work.String(), "--batch", strconv.Itoa(cfg.Batch))
		c := &child{cmd: exec.CommandContext(ctx, command[0], args...), first: first, count: n}
		c.cmd.Env = append(append(os.Environ(), cfg.Env...), "LOANQ_DB="+cfg.DSN)
		c.cmd.Stderr = &c.stderr
		var err error
		if c.stdin, err = c.cmd.StdinPipe(); err != nil {
			return nil, 0, err
		}
		out, err := c.cmd.StdoutPipe()
		if err != nil {
			return nil, 0, err
		}
		c.stdout = bufio.NewReader(out)
		if err := c.cmd.Start(); err != nil {
			return nil, 0, fmt.Errorf("starting worker process %d: %w", p+1, err)
		}
		children = append(children, c)
		first += n
	}
	for i, c := range children {
		line, err := c.stdout.ReadString('\n')
		if err != nil || strings.TrimSpace(line) != "ready" {
			return nil, 0, fmt.Errorf("worker process %d did not get ready: %q %v %s", i+1, line, err, strings.TrimSpace(c.stderr.String()))
		}
	}
	start := time.Now()
	for i, c := range children {
		if _, err := io.WriteString(c.stdin, "go\n"); err != nil {
			return nil, 0, fmt.Errorf("starting worker process %d: %w", i+1, err)
		}
	}
	var mu sync.Mutex
	var all []WorkerResult
	var errs []error
	var wg sync.WaitGroup
	for i, c := range children {
		wg.Add(1)
		go func() {
			defer wg.Done()
			line, err := c.stdout.ReadString('\n')
			var rep ChildReport
			if err == nil {
				err = json.Unmarshal([]byte(line), &rep)
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("worker process %d: %v %s", i+1, err, strings.TrimSpace(c.stderr.String())))
			case rep.Error != "":
				errs = append(errs, fmt.Errorf("worker process %d: %s", i+1, rep.Error))
			}
			all = append(all, rep.Workers...)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return nil, elapsed, err
	}
	slices.SortFunc(all, func(a, b WorkerResult) int { return a.Worker - b.Worker })
	return all, elapsed, nil
}
