package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/loanq/loanq/bench"
	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/testkit/testdb"
	"github.com/loanq/loanq/problem"
)

// engineKeys are the first keys of `bench --target engine -o json`, in order.
var engineKeys = []string{"target", "database", "strategy", "workers", "count", "loans", "elapsed_ms",
	"loans_per_s", "get_p50_ms", "get_p99_ms", "criteria_runs", "requests", "duplicates"}

// engineRun runs the engine benchmark and checks the database while the
// run's task and items are still there (inspect) and after it (nothing left
// behind).
func engineRun(t *testing.T, cfg bench.EngineConfig, rows int) *bench.EngineResult {
	t.Helper()
	d, db := testdb.Open(t, cfg.DSN)
	before := testdb.Rows(t, d, db)
	var db0 engineDB
	bench.InspectEngine(&cfg, func() { db0 = readEngineDB(t, cfg.DSN) })
	r, err := bench.RunEngine(context.Background(), cfg)
	if err != nil {
		t.Fatalf("%s: %v", cfg.Strategy, err)
	}
	checkEngine(t, db0, r, rows)
	leftNothing(t, d, cfg.DSN, before)
	return r
}

// engineDB is what the database held at the end of an engine run.
type engineDB struct{ work, distinct, active, done int64 }

func readEngineDB(t *testing.T, dsn string) engineDB {
	d, db := testdb.Open(t, dsn)
	work := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work w JOIN loanq_task t ON t.id = w.task_id WHERE t.name = '"+bench.EngineTask+"'")
	distinct := testdb.Int(t, d, db, "SELECT COUNT(DISTINCT w.loan_id) FROM loanq_work w JOIN loanq_task t ON t.id = w.task_id WHERE t.name = '"+bench.EngineTask+"'")
	active := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work WHERE disposition IS NULL")
	done := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_bench_item WHERE status = 'done' AND processed = 1")
	return engineDB{work, distinct, active, done}
}

// checkEngine asserts what the engine benchmark guarantees whatever the
// timing, against the database: every loan handed out once, each work row
// counted by a caller, no request left pending, and the JSON's fixed keys.
func checkEngine(t *testing.T, db engineDB, r *bench.EngineResult, rows int) {
	t.Helper()
	if r.Duplicates != 0 || r.ItemsTwice != 0 || r.Pending != 0 || r.RawDuplicates != 0 {
		t.Errorf("duplicates %d, items twice %d, pending %d, raw duplicates %d; want 0", r.Duplicates, r.ItemsTwice, r.Pending, r.RawDuplicates)
	}
	work, distinct, active, done := db.work, db.distinct, db.active, db.done
	if r.Loans != work || r.LoansCounted != work || distinct != work || work != int64(rows) || done != int64(rows) || active != 0 {
		t.Errorf("loans %d, counted by the callers %d; database: %d work rows for %d loans, %d active, %d items done once; want all %d (0 active)",
			r.Loans, r.LoansCounted, work, distinct, active, done, rows)
	}
	var sum int64
	for _, w := range r.PerWorker {
		sum += w.Loans
	}
	if sum != r.LoansCounted || r.Requests*int64(r.Count) < int64(rows) || r.GetP99MS < r.GetP50MS {
		t.Errorf("per-caller loans %d, counted %d, requests %d, p50 %d p99 %d", sum, r.LoansCounted, r.Requests, r.GetP50MS, r.GetP99MS)
	}
	// Rounds under a task lock assign the top of what is left, one round
	// after the other: no loan is assigned after a lower-priority one.
	if r.Strategy != "rows" && r.Prefetch == 0 && r.AssignedOutOfOrder != 0 {
		t.Errorf("%s: %d loans assigned after a lower-priority one, want 0", r.Strategy, r.AssignedOutOfOrder)
	}
	// The priority skew covers every loan the callers got (and every item
	// of the raw claim) when they ran in one process; it is not measured
	// across processes, whose clocks start apart.
	switch {
	case r.Processes > 1 && (r.PrioritySkew != nil || r.RawPrioritySkew != nil):
		t.Errorf("%d processes: priority skew %+v, raw %+v; want none (not measured)", r.Processes, r.PrioritySkew, r.RawPrioritySkew)
	case r.Processes <= 1 && (r.PrioritySkew == nil || r.PrioritySkew.Items != r.Loans || r.RawPrioritySkew == nil || r.RawPrioritySkew.Items != int64(r.RawItems)):
		t.Errorf("priority skew %+v over %d loans, raw %+v over %d items; want every one covered", r.PrioritySkew, r.Loans, r.RawPrioritySkew, r.RawItems)
	}
	if r.RawItems == 0 || r.RawItemsPerS <= 0 || r.Ratio <= 0 || r.Server == "" {
		t.Errorf("raw %d items, %.0f/s, ratio %.3f, server %q", r.RawItems, r.RawItemsPerS, r.Ratio, r.Server)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for len(keys) < len(engineKeys) && dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(keys, engineKeys) {
		t.Errorf("JSON keys %v, want %v first", keys, engineKeys)
	}
}

// A short engine run with goroutines and its chart, on every database, with
// the database's default strategy and with several loans per work get.
func TestEngine(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, _ := testdb.Migrated(t, dsn)
		for _, count := range []int{1, 3} {
			chart := filepath.Join(t.TempDir(), "engine.svg")
			r := engineRun(t, bench.EngineConfig{DSN: dsn, Workers: 4, Count: count, Rows: 30, Chart: chart}, 30)
			if r.Strategy != string(d.Capabilities().Strategies[0]) || r.Count != count || r.Target != "engine" {
				t.Errorf("strategy %s count %d target %s", r.Strategy, r.Count, r.Target)
			}
			svg, err := os.ReadFile(chart)
			if err != nil {
				t.Fatal(err)
			}
			if bars := strings.Count(string(svg), `class="work"`); int64(bars) != r.Requests {
				t.Errorf("chart has %d request bars for %d requests", bars, r.Requests)
			}
		}
	})
}

// One caller gets the task's loans, and the raw claim its items, in
// priority order: the priority skew's baseline is none. Many callers' skew
// is measured, not asserted (docs/scaling.md, "Priority skew").
func TestEnginePrioritySkewOfOneCallerIsNone(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, _ := testdb.Migrated(t, dsn)
		for _, s := range d.Capabilities().Strategies {
			for _, count := range []int{1, 4} {
				r := engineRun(t, bench.EngineConfig{DSN: dsn, Strategy: string(s), Workers: 1, Count: count, Rows: 20}, 20)
				if r.PrioritySkew.OutOfOrder != 0 || r.PrioritySkew.DisplacementMax != 0 || r.RawPrioritySkew.OutOfOrder != 0 {
					t.Errorf("%s --count %d, one caller: skew %+v, raw %+v; want none", s, count, r.PrioritySkew, r.RawPrioritySkew)
				}
			}
		}
	})
}

// Every strategy of the database, callers in two OS processes (this test
// binary re-executed as `loanq bench engine-worker`).
func TestEngineProcesses(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, _ := testdb.Migrated(t, dsn)
		for _, s := range d.Capabilities().Strategies {
			r := engineRun(t, bench.EngineConfig{DSN: dsn, Strategy: string(s), Workers: 4, Processes: 2,
				Count: 2, Rows: 24, Command: []string{os.Args[0], "bench", "engine-worker"}, Env: []string{childEnv + "=1"}}, 24)
			if r.Processes != 2 || r.Strategy != string(s) || len(r.PerWorker) != 4 {
				t.Errorf("%s: processes %d, strategy %s, %d callers", s, r.Processes, r.Strategy, len(r.PerWorker))
			}
		}
	})
}

// --dispose batch: each caller completes a get's loans with one
// DisposeMany, in this process and in two OS processes; every loan is done
// once, and the document says how they were disposed of.
func TestEngineBatchDispose(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		testdb.Migrated(t, dsn)
		r := engineRun(t, bench.EngineConfig{DSN: dsn, Workers: 4, Count: 5, Rows: 40, Dispose: bench.DisposeBatch}, 40)
		if r.Dispose != bench.DisposeBatch || r.Loans != 40 {
			t.Errorf("dispose %q, %d loans; want batch, 40", r.Dispose, r.Loans)
		}
		r = engineRun(t, bench.EngineConfig{DSN: dsn, Workers: 4, Processes: 2, Count: 3, Rows: 24, Dispose: bench.DisposeBatch,
			Command: []string{os.Args[0], "bench", "engine-worker"}, Env: []string{childEnv + "=1"}}, 24)
		if r.Dispose != bench.DisposeBatch || r.Processes != 2 {
			t.Errorf("dispose %q in %d processes; want batch in 2", r.Dispose, r.Processes)
		}
		if r = engineRun(t, bench.EngineConfig{DSN: dsn, Workers: 2, Count: 2, Rows: 6}, 6); r.Dispose != bench.DisposeEach {
			t.Errorf("dispose %q by default, want each", r.Dispose)
		}
	})
}

func TestEngineValidate(t *testing.T) {
	ok := bench.EngineConfig{Workers: 1, Rows: 1, Count: 1}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mod  func(*bench.EngineConfig)
		want string
	}{
		{func(c *bench.EngineConfig) { c.Workers = 0 }, "--workers"},
		{func(c *bench.EngineConfig) { c.Count = 0 }, "--count"},
		{func(c *bench.EngineConfig) { c.Rows = 0 }, "--rows"},
		{func(c *bench.EngineConfig) { c.Duration = -1 }, "--duration"},
		{func(c *bench.EngineConfig) { c.Strategy = "all" }, "one strategy"},
		{func(c *bench.EngineConfig) { c.Strategy = "optimistic" }, "--strategy"},
		{func(c *bench.EngineConfig) { c.Chart = "/nonexistent-folder/x.svg" }, "does not exist"},
		{func(c *bench.EngineConfig) { c.Dispose = "bulk" }, "--dispose"},
	} {
		cfg := ok
		c.mod(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one naming %s", cfg, err, c.want)
		}
	}
}

// `bench --target cli` with this test binary standing in for loanq: both
// phases run, the loans counted are the task's completed work rows, no loan
// handed out twice, no request left pending.
func TestCLI(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, db := testdb.Migrated(t, dsn)
		before := testdb.Rows(t, d, db)
		cfg := bench.CLIConfig{DSN: dsn, Processes: 2, Rows: 50, Duration: time.Second,
			Command: []string{os.Args[0]}, Env: []string{childEnv + "=1"}}
		var done int64
		bench.InspectCLI(&cfg, func() {
			done = testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work w JOIN loanq_task t ON t.id = w.task_id WHERE t.name = '"+bench.CLITask+"' AND w.disposition = 'complete'")
		})
		r, err := bench.RunCLI(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		leftNothing(t, d, dsn, before)
		if r.Duplicates != 0 || r.Pending != 0 || r.Loans != done || r.Loans == 0 || r.BaselinePairs == 0 || r.Ratio <= 0 || r.Server == "" {
			t.Errorf("cli result %+v; %d completed work rows in the database", r, done)
		}
	})
}

// The engine and CLI benches refuse a database that holds tasks of its
// users (bad input, naming --allow-user-tasks) and change nothing there; with
// AllowUserTasks they run and leave the users' task and every row as they
// were. The item bench creates no task and runs anyway.
func TestRefusesUserTasks(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, db := testdb.Migrated(t, dsn)
		testdb.CreateLoans(t, d, db, 3)
		e := dispatch.New(db, d)
		if _, _, err := e.Admin().CreateTask(context.Background(), dispatch.TaskSpec{Name: "payments", Source: "loan", Key: "id",
			Where: "eligible = 1", Order: "priority", Lock: d.Capabilities().Strategies[0], CreatedBy: "test"}); err != nil {
			t.Fatal(err)
		}
		before := testdb.Rows(t, d, db)
		_, err := bench.RunEngine(context.Background(), bench.EngineConfig{DSN: dsn, Workers: 1, Count: 1, Rows: 5, NoRaw: true})
		if problem.KindOf(err) != problem.Usage || !strings.Contains(fmt.Sprint(err), "--allow-user-tasks") || !strings.Contains(fmt.Sprint(err), "payments") {
			t.Errorf("engine bench on a database with a user task: %v; want bad input naming the task and --allow-user-tasks", err)
		}
		_, err = bench.RunCLI(context.Background(), bench.CLIConfig{DSN: dsn, Processes: 1, Rows: 5, Duration: time.Second,
			Command: []string{os.Args[0]}, Env: []string{childEnv + "=1"}})
		if problem.KindOf(err) != problem.Usage || !strings.Contains(fmt.Sprint(err), "--allow-user-tasks") {
			t.Errorf("cli bench on a database with a user task: %v; want bad input naming --allow-user-tasks", err)
		}
		leftNothing(t, d, dsn, before)

		engineRun(t, bench.EngineConfig{DSN: dsn, Workers: 2, Count: 1, Rows: 6, AllowUserTasks: true}, 6)
		if _, err := e.Task(context.Background(), "payments"); err != nil {
			t.Errorf("the users' task after an allowed bench run: %v", err)
		}
	})
}
