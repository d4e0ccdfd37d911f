package demo

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/pause"
	"github.com/loanq/loanq/problem"
	"github.com/loanq/loanq/schema"
)

// Run seeds the sample data, runs cfg.Processors simulated processors for
// cfg.Duration, and returns the summary read back from the database. A
// summary whose Passed is false is still returned, with a nil error: the
// caller prints it and then fails.
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	opened, err := open(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	defer opened.Close()
	setup, err := seed(ctx, &cfg, opened)
	if err != nil {
		return nil, err
	}
	d := opened.Driver
	admin := dispatch.NewAdmin(opened.DB, d)

	// Each processor has its own connection pool and engine (its own lease
	// holder name), as a person at another machine would: nothing in this
	// process coordinates them except the database.
	live := &counters{}
	procs := make([]*processor, cfg.Processors)
	for i := range procs {
		pdb, err := schema.Open(ctx, cfg.DSN, schema.Options{})
		if err != nil {
			return nil, fmt.Errorf("connecting processor %d: %w", i+1, err)
		}
		defer pdb.Close()
		procs[i] = &processor{
			user:  processorName(i),
			eng:   dispatch.New(pdb.DB, d),
			db:    pdb.DB,
			d:     d,
			rng:   rand.New(rand.NewPCG(cfg.Seed, uint64(i)+1)),
			tasks: setup.tasks,
			live:  live,
			busy:  map[string]int64{},
		}
	}
	names := make([]string, len(procs))
	for i, p := range procs {
		names[i] = p.user
	}
	cfg.logf("running %d processors for %s: %s", len(procs), cfg.Duration, strings.Join(names, ", "))

	start := time.Now()
	deadline := start.Add(cfg.Duration)
	mon := startMonitor(ctx, admin, 250*time.Millisecond)
	stopProgress := startProgress(&cfg, live, start)
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.run(ctx, deadline)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopProgress()
	audits, dupSeen, monErr := mon.stop()
	if err := ctx.Err(); err != nil {
		return nil, problem.WithHint(fmt.Errorf("demo interrupted: %w", err), "run `loanq demo` again; it resets its data")
	}
	return summarize(ctx, admin, opened.Driver, opened.DB, setup, procs, elapsed, audits, dupSeen, monErr)
}

var processorNames = []string{"ana", "ben", "chloe", "dev", "eli", "fay", "gus", "hana", "ivan", "jo", "kai", "lea"}

func processorName(i int) string {
	if i < len(processorNames) {
		return processorNames[i]
	}
	return fmt.Sprintf("p%02d", i+1)
}

// counters feed the progress line while processors run.
type counters struct {
	requests, busy, loans, disposed atomic.Int64
}

// processor is one simulated person: get work, work it, disposition it.
type processor struct {
	user  string
	eng   *dispatch.Engine
	db    *sql.DB // its connections, for the work itself (the loan's update)
	d     drivers.Driver
	rng   *rand.Rand
	tasks []demoTask
	live  *counters

	// Read only after the run, when the goroutine has ended.
	busy     map[string]int64 // busy answers per task
	rechecks int64
	errors   []string
}

const maxProcessorErrors = 10

func (p *processor) run(ctx context.Context, deadline time.Time) {
	for ctx.Err() == nil && time.Now().Before(deadline) && len(p.errors) < maxProcessorErrors {
		t := p.pick()
		n := 1 + p.rng.IntN(t.maxCount)
		p.live.requests.Add(1)
		// NoWait, then rechecks, as a script running `work get --no-wait` and
		// `work status ID` would: the busy answers are what the demo counts.
		req, err := p.eng.Get(ctx, t.spec.Name, p.user, n, dispatch.GetOptions{NoWait: true})
		if req != nil && problem.KindOf(err) == problem.Busy {
			p.busy[t.spec.Name]++
			p.live.busy.Add(1)
			req, err = p.recheck(ctx, req.ID)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.fail(err)
			continue
		}
		p.live.loans.Add(int64(len(req.Loans)))
		for _, loan := range req.Loans {
			if !time.Now().Before(deadline) {
				break // end of the shift: the rest stays in this processor's pipeline
			}
			if err := pause.For(ctx, time.Duration(20+p.rng.IntN(40))*time.Millisecond); err != nil { // "working"
				return
			}
			if err := p.dispose(ctx, t, loan.Int64()); err != nil {
				if ctx.Err() != nil {
					return
				}
				p.fail(err)
			}
		}
		if len(req.Loans) == 0 { // that queue is empty or capped for now
			if pause.For(ctx, 100*time.Millisecond) != nil {
				return
			}
		}
	}
}

func (p *processor) fail(err error) {
	p.errors = append(p.errors, fmt.Sprintf("%s: %v", p.user, err))
	_ = pause.For(context.Background(), 100*time.Millisecond)
}

func (p *processor) pick() demoTask {
	r := p.rng.IntN(100)
	for _, t := range p.tasks {
		if r < t.weight {
			return t
		}
		r -= t.weight
	}
	return p.tasks[0]
}

// recheck is what a processor does after a busy answer: `loanq work status
// ID` until the request is served. The backoff is compressed (100-400 ms
// instead of the CLI's 5 s, 10 s, 20 s) to fit a demo of seconds. It goes on
// past the demo's deadline: no request may be left pending.
func (p *processor) recheck(ctx context.Context, id int64) (*dispatch.Request, error) {
	waits := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}
	giveUp := time.Now().Add(2 * time.Minute)
	for i := 0; ; i++ {
		jitter := time.Duration(p.rng.IntN(50)) * time.Millisecond
		if err := pause.For(ctx, waits[min(i, len(waits)-1)]+jitter); err != nil {
			return nil, err
		}
		p.rechecks++
		req, err := p.eng.Status(ctx, id, false, dispatch.GetOptions{})
		if err == nil {
			return req, nil
		}
		if req == nil || problem.KindOf(err) != problem.Busy {
			return nil, err
		}
		if time.Now().After(giveUp) {
			return nil, fmt.Errorf("request %d still pending after 2m of rechecks", id)
		}
	}
}

// dispose ends one assignment: mostly complete, some return (at once or
// after 2 s), a few never. Before completing, the processor records its work
// in the application row, so the loan stops matching the task's criteria;
// otherwise `complete` would hand it straight back to the queue
// (docs/algorithm.md, "Dispositions and eligibility").
func (p *processor) dispose(ctx context.Context, t demoTask, loan int64) error {
	action, after, afterGiven := dispatch.Complete, time.Duration(0), false
	switch r := p.rng.Float64(); {
	case r < 0.80:
		update := "UPDATE loan SET " + t.complete + " WHERE id = " + p.d.Dialect().Placeholder(1)
		if _, err := p.db.ExecContext(ctx, update, loan); err != nil {
			return fmt.Errorf("updating loan %d: %w", loan, err)
		}
	case r < 0.86:
		action, afterGiven = dispatch.Return, true
	case r < 0.92:
		action, after, afterGiven = dispatch.Return, 2*time.Second, true
	default:
		action = dispatch.Never
	}
	if _, err := p.eng.Dispose(ctx, t.spec.Name, strconv.FormatInt(loan, 10), p.user, action, after, afterGiven); err != nil {
		return err
	}
	p.live.disposed.Add(1)
	return nil
}

// monitor runs the engine's audit against the database while processors
// work, so the invariant is checked on the states the run passes through,
// not only on the final one.
type monitor struct {
	done   chan struct{}
	wg     sync.WaitGroup
	audits int
	dup    int64
	err    error
}

func startMonitor(ctx context.Context, eng *dispatch.Admin, every time.Duration) *monitor {
	m := &monitor{done: make(chan struct{})}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-m.done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			findings, err := eng.Audit(ctx)
			if err != nil {
				if m.err == nil && ctx.Err() == nil {
					m.err = err
				}
				continue
			}
			m.audits++
			m.dup = max(m.dup, duplicates(findings))
		}
	}()
	return m
}

func (m *monitor) stop() (audits int, dup int64, err error) {
	close(m.done)
	m.wg.Wait()
	return m.audits, m.dup, m.err
}

func duplicates(fs []dispatch.Finding) int64 {
	for _, f := range fs {
		if f.Check == "AuditDuplicateActive" {
			return f.Count
		}
	}
	return 0
}

// startProgress rewrites one line on the terminal until the returned stop is called.
func startProgress(cfg *Config, live *counters, start time.Time) (stop func()) {
	if cfg.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		width := 0
		for {
			select {
			case <-done:
				fmt.Fprintf(cfg.Progress, "\r%s\r", strings.Repeat(" ", width))
				return
			case <-tick.C:
			}
			line := fmt.Sprintf("  %4.1fs of %s  requests %d  busy %d  loans assigned %d  dispositioned %d",
				time.Since(start).Seconds(), cfg.Duration, live.requests.Load(), live.busy.Load(), live.loans.Load(), live.disposed.Load())
			width = max(width, len(line))
			fmt.Fprintf(cfg.Progress, "\r%-*s", width, line)
		}
	}()
	return func() { close(done); wg.Wait() }
}
