// Package demo is `loanq demo`: it seeds a sample application table `loan`,
// defines a few tasks over it through the engine, and runs simulated human
// processors against them at the same time, each with its own connection as
// separate machines would have. The summary it ends with is computed from the
// database (the request log, the criteria-query log and the engine's audit),
// not from the simulation's memory, so what it shows is what the database
// guarantees.
package demo

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/problem"
	"github.com/loanq/loanq/schema"
)

// Owner is the created_by of the demo's tasks. A reset deletes only tasks that
// carry both a demo task name and this owner, never anyone else's.
const Owner = "loanq-demo"

// Defaults of the command line.
const (
	DefaultLoans      = 2000
	DefaultProcessors = 6
	DefaultDuration   = 8 * time.Second
	DefaultQueryDelay = 300 * time.Millisecond
	DefaultSeed       = 1
	MaxLoans          = 1_000_000
	MaxProcessors     = 64
)

// Config is one demo run.
type Config struct {
	DSN        string
	Loans      int
	Seed       uint64
	Processors int
	Duration   time.Duration
	// QueryDelay makes verify-bank's criteria query take this long under the
	// task lock, standing in for a heavy query: callers arriving meanwhile get
	// busy answers and are served by the holder's run (coalescing).
	QueryDelay time.Duration
	// Log receives one line per set-up step (text output); nil: silent.
	Log io.Writer
	// Progress receives a live progress line, rewritten in place with \r
	// (terminals only); nil: none.
	Progress io.Writer
}

func (c *Config) defaults() error {
	if c.Loans == 0 {
		c.Loans = DefaultLoans
	}
	if c.Processors == 0 {
		c.Processors = DefaultProcessors
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if c.Loans < 10 || c.Loans > MaxLoans {
		return problem.Usagef("invalid --loans %d: give between 10 and %d", c.Loans, MaxLoans)
	}
	if c.Processors < 1 || c.Processors > MaxProcessors {
		return problem.Usagef("invalid --processors %d: give between 1 and %d", c.Processors, MaxProcessors)
	}
	if c.Duration < time.Second || c.Duration > 10*time.Minute {
		return problem.Usagef("invalid --duration %s: give between 1s and 10m", c.Duration)
	}
	if c.QueryDelay < 0 || c.QueryDelay > 10*time.Second {
		return problem.Usagef("invalid --query-delay %s: give between 0s and 10s", c.QueryDelay)
	}
	return nil
}

func (c *Config) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, format+"\n", args...)
	}
}

// demoTask is one of the demo's queues and what a processor does to a loan's
// application row when it completes it: a completed loan must stop matching
// the criteria, or the task hands it out again (docs/algorithm.md,
// "Dispositions and eligibility").
type demoTask struct {
	spec     dispatch.TaskSpec
	complete string // what completing sets in the loan's application row (an UPDATE's SET list)
	weight   int    // how often a processor picks this task, out of 100
	maxCount int    // a processor asks for 1..maxCount loans
}

func demoTasks(queryDelay time.Duration) []demoTask {
	return []demoTask{
		{spec: dispatch.TaskSpec{Name: "verify-bank",
			Where: "statements_submitted = 1 AND statements_verified = 0", Order: "submitted_at",
			QueryDelay: queryDelay},
			complete: "statements_verified = 1", weight: 60, maxCount: 3},
		{spec: dispatch.TaskSpec{Name: "big-loans",
			Where: "amount >= 250000 AND senior_reviewed = 0", Order: "amount DESC",
			MaxActive: 3},
			// Asking for up to 4 against a cap of 3 shows partial answers.
			complete: "senior_reviewed = 1", weight: 20, maxCount: 4},
		{spec: dispatch.TaskSpec{Name: "call-borrower",
			Where: "statements_submitted = 0 AND borrower_contacted = 0", Order: "priority, submitted_at"},
			complete: "borrower_contacted = 1", weight: 20, maxCount: 2},
	}
}

// TaskInfo describes a demo task as created.
type TaskInfo struct {
	Name         string `json:"name"`
	Where        string `json:"where"`
	Order        string `json:"order"`
	Lock         string `json:"lock"`
	MaxActive    int    `json:"max_active"`
	QueryDelayMS int64  `json:"query_delay_ms"`
	Matching     int64  `json:"matching_loans"`
	id           int64
}

// Setup is what seeding did.
type Setup struct {
	Database string `json:"database"`
	Dialect  string `json:"dialect"`
	// Migrated: loanq's schema was applied or brought up to date first.
	Migrated bool `json:"migrated"`
	// Reset: earlier demo data was found and replaced; ResetNote says what.
	Reset     bool       `json:"reset"`
	ResetNote string     `json:"reset_note,omitempty"`
	Loans     int        `json:"loans"`
	Seed      uint64     `json:"seed"`
	SeedMS    int64      `json:"seed_ms"`
	Tasks     []TaskInfo `json:"tasks"`

	tasks []demoTask
}

// Seed creates (or resets) the sample table and the demo tasks and returns
// what it did. It is `loanq demo seed` and the first half of `loanq demo`.
func Seed(ctx context.Context, cfg Config) (*Setup, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	db, err := open(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return seed(ctx, &cfg, db)
}

// open opens the demo's database. The demo writes a sample table anyway, so
// it also applies loanq's own schema: a newcomer pointing it at an empty
// database (or a file that does not exist yet) needs no extra step.
func open(ctx context.Context, cfg *Config) (*schema.Database, error) {
	db, err := schema.Open(ctx, cfg.DSN, schema.Options{Migrate: schema.Always, Check: true})
	if err != nil {
		return nil, err
	}
	if db.Migrated {
		cfg.logf("applied loanq's schema to %s", db.DSN.Redacted())
	}
	return db, nil
}

func seed(ctx context.Context, cfg *Config, opened *schema.Database) (*Setup, error) {
	d, db := opened.Driver, opened.DB
	s := &Setup{Database: opened.DSN.Redacted(), Dialect: d.Name(), Loans: cfg.Loans, Seed: cfg.Seed, Migrated: opened.Migrated}

	eng := dispatch.NewAdmin(db, d)
	s.tasks = demoTasks(cfg.QueryDelay)
	if err := reset(ctx, cfg, eng, db, s); err != nil {
		return nil, err
	}

	t0 := time.Now()
	if err := createLoanTable(ctx, d, db, cfg.Loans, cfg.Seed); err != nil {
		return nil, err
	}
	s.SeedMS = time.Since(t0).Milliseconds()
	cfg.logf("created table loan with %d sample loans (seed %d) in %dms", cfg.Loans, cfg.Seed, s.SeedMS)

	for _, dt := range s.tasks {
		spec := dt.spec
		spec.CreatedBy = Owner // the driver's default lock strategy: lease on SQLite, skip elsewhere
		t, _, err := eng.CreateTask(ctx, spec)
		if err != nil {
			return nil, fmt.Errorf("creating demo task %s: %w", spec.Name, err)
		}
		info := TaskInfo{Name: t.Name, Where: t.Where, Order: t.Order, Lock: string(t.Lock), MaxActive: t.MaxActive,
			QueryDelayMS: t.QueryDelay.Milliseconds(), id: t.ID}
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM loan WHERE "+t.Where).Scan(&info.Matching); err != nil {
			return nil, fmt.Errorf("counting the loans of task %s: %w", t.Name, err)
		}
		s.Tasks = append(s.Tasks, info)
		cfg.logf("created task %-13s %4d matching loans  lock %s%s", t.Name, info.Matching, t.Lock, taskExtras(info))
	}
	return s, nil
}

func taskExtras(t TaskInfo) string {
	var x []string
	if t.QueryDelayMS > 0 {
		x = append(x, fmt.Sprintf("query delay %dms", t.QueryDelayMS))
	}
	if t.MaxActive > 0 {
		x = append(x, fmt.Sprintf("max %d active per user", t.MaxActive))
	}
	if len(x) == 0 {
		return ""
	}
	return ", " + strings.Join(x, ", ")
}

// reset removes earlier demo data: the demo's tasks with their work, requests
// and query runs, and the sample table. It refuses, changing nothing, when a
// task of the same name or a `loan` table exists that the demo did not create.
func reset(ctx context.Context, cfg *Config, eng *dispatch.Admin, db *sql.DB, s *Setup) error {
	all, err := eng.Tasks(ctx)
	if err != nil {
		return err
	}
	demoNames := map[string]bool{}
	for _, dt := range s.tasks {
		demoNames[dt.spec.Name] = true
	}
	var names []string
	var others []string // non-demo tasks over the sample table: they lose their data
	for _, t := range all {
		switch {
		case demoNames[t.Name] && t.CreatedBy != Owner:
			return &problem.Error{Kind: problem.Usage,
				Msg:  fmt.Sprintf("task %q exists and was created by %s, not by the demo; the demo will not touch it", t.Name, t.CreatedBy),
				Hint: "run the demo on another database, e.g. `loanq --db sqlite:demo.db demo`"}
		case demoNames[t.Name]:
			names = append(names, t.Name)
		case t.Source == "loan":
			others = append(others, t.Name)
		}
	}
	exists, ours := loanTableState(ctx, db)
	if exists && !ours {
		return &problem.Error{Kind: problem.Usage,
			Msg:  "a table named loan exists with other columns than the demo's; the demo will not drop it",
			Hint: "run the demo on another database, e.g. `loanq --db sqlite:demo.db demo`"}
	}
	if len(names) == 0 && !exists {
		return nil
	}

	var work int64
	for _, name := range names {
		n, err := eng.DeleteTask(ctx, name, true)
		if err != nil {
			return fmt.Errorf("resetting the demo: %w", err)
		}
		work += n
	}
	if exists {
		if _, err := db.ExecContext(ctx, "DROP TABLE loan"); err != nil {
			return fmt.Errorf("resetting the demo (dropping table loan): %w", err)
		}
	}
	s.Reset = true
	var did []string
	if exists {
		did = append(did, "dropped table loan")
	}
	if len(names) > 0 {
		did = append(did, fmt.Sprintf("deleted %d demo task(s) with their %d assignment(s), requests and query runs", len(names), work))
	}
	s.ResetNote = "found earlier demo data: " + strings.Join(did, ", ")
	if len(others) > 0 {
		s.ResetNote += fmt.Sprintf("; note: task(s) %s also read table loan and now see fresh sample data", strings.Join(others, ", "))
	}
	cfg.logf("reset: %s", s.ResetNote)
	return nil
}
