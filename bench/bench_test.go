package bench_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/loanq/loanq/bench"
	"github.com/loanq/loanq/commands"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// childEnv makes the test binary act as loanq itself, so --processes can
// re-execute it with the hidden `bench worker` subcommand.
const childEnv = "LOANQ_BENCH_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(commands.Main(append([]string{"loanq"}, os.Args[1:]...), os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// check asserts what the bench must guarantee whatever the timing: no
// duplicates, every item finished exactly once (read from the database),
// and per-worker counts that add up to the items.
func check(t *testing.T, d drivers.Driver, dsn string, r *bench.Result, workers, rows int) {
	t.Helper()
	if r.Duplicates != 0 || r.Missed != 0 || r.LeaseLost != 0 {
		t.Errorf("%s: duplicates %d, missed %d, leases lost %d; want 0", r.Strategy, r.Duplicates, r.Missed, r.LeaseLost)
	}
	if len(r.PerWorker) != workers {
		t.Fatalf("%s: %d per-worker results, want %d", r.Strategy, len(r.PerWorker), workers)
	}
	var sum int64
	for i, w := range r.PerWorker {
		if w.Worker != i+1 {
			t.Errorf("%s: worker #%d is numbered %d", r.Strategy, i+1, w.Worker)
		}
		sum += w.Processed
	}
	if sum != int64(rows) {
		t.Errorf("%s: per-worker counts add up to %d, want %d", r.Strategy, sum, rows)
	}
	if r.IdealMS != int64(rows)*int64(r.WorkMS)/int64(workers) {
		t.Errorf("%s: ideal %d ms, want rows × work / workers", r.Strategy, r.IdealMS)
	}
}

// inspectTable checks the item table while a run's items are still in it
// (the run drops the table when it ends): every item finished exactly once
// by a worker, read from the database.
func inspectTable(t *testing.T, d drivers.Driver, dsn string, rows int) func(string) {
	return func(strategy string) {
		t.Helper()
		_, db := testdb.Open(t, dsn)
		once := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_bench_item WHERE status = 'done' AND processed = 1 AND owner IS NOT NULL")
		all := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_bench_item")
		if once != int64(rows) || all != int64(rows) {
			t.Errorf("%s: %d of %d items finished exactly once, want %d of %d", strategy, once, all, rows, rows)
		}
	}
}

// leftNothing checks that a run left the database as it found it: no bench
// object (the item table, its indexes, Oracle's procedure) and the same rows
// in loanq's task tables as before.
func leftNothing(t *testing.T, d drivers.Driver, dsn string, before map[string]int64) {
	t.Helper()
	_, db := testdb.Open(t, dsn)
	if n := testdb.Objects(t, d, db, "loanq_bench"); n != 0 {
		t.Errorf("%d bench objects left in the database after the run", n)
	}
	if after := testdb.Rows(t, d, db); !reflect.DeepEqual(after, before) {
		t.Errorf("rows before the run %v, after %v: the bench left rows behind", before, after)
	}
}

// Every strategy the database supports, small, with one and with several
// items per claim. No timing is asserted: only correctness. The run leaves
// no bench object and no row behind.
func TestStrategies(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, db := testdb.Migrated(t, dsn)
		before := testdb.Rows(t, d, db)
		for _, batch := range []int{1, 3} {
			cfg := bench.Config{DSN: dsn, Strategy: "all", Workers: 4, Rows: 40, Work: 5 * time.Millisecond, Batch: batch}
			bench.InspectItems(&cfg, inspectTable(t, d, dsn, 40))
			rs, err := bench.Run(context.Background(), cfg)
			if err != nil {
				t.Fatalf("batch %d: %v", batch, err)
			}
			leftNothing(t, d, dsn, before)
			if len(rs) != len(d.Capabilities().Strategies) {
				t.Fatalf("ran %d strategies, want %v", len(rs), d.Capabilities().Strategies)
			}
			for i, r := range rs {
				if r.Strategy != string(d.Capabilities().Strategies[i]) {
					t.Errorf("result %d is %s, want %s", i, r.Strategy, d.Capabilities().Strategies[i])
				}
				check(t, d, dsn, r, 4, 40)
				if r.MaxClaim < 1 || r.MaxClaim > batch {
					t.Errorf("%s: a claim returned %d items with --batch %d", r.Strategy, r.MaxClaim, batch)
				}
				// Rows locked per claim, measured (BENCHMARKS.md). Every
				// claim on the item table reads its (status, id) index in
				// claim order, so the skip-locked and queued claims lock what
				// they return; SQLite has no row locks to count.
				switch {
				case !drivers.Supports(d, drivers.Rows):
					if r.LockedPerClaim != -1 {
						t.Errorf("%s on %s: %d rows locked per claim, want -1 (not measured)", r.Strategy, d.Name(), r.LockedPerClaim)
					}
				case r.Strategy != "lease" && r.LockedPerClaim != batch:
					t.Errorf("%s: a claim of %d locks %d rows, want %d", r.Strategy, batch, r.LockedPerClaim, batch)
				case r.LockedPerClaim < batch:
					t.Errorf("%s: a claim of %d locks %d rows, fewer than it returns", r.Strategy, batch, r.LockedPerClaim)
				}
				if r.Strategy == "skip" && r.LockErrors != 0 {
					t.Errorf("skip reported %d lock errors: SKIP LOCKED should never meet one", r.LockErrors)
				}
			}
		}
	})
}

// The workers in two OS processes (this test binary re-executed as
// `loanq bench worker`): coordination comes from the database alone.
func TestProcesses(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, _ := testdb.Migrated(t, dsn)
		s := d.Capabilities().Strategies[0]
		chart := filepath.Join(t.TempDir(), "run.svg")
		cfg := bench.Config{DSN: dsn, Strategy: string(s),
			Workers: 4, Rows: 40, Work: 5 * time.Millisecond, Batch: 1, Processes: 2, Chart: chart,
			Command: []string{os.Args[0], "bench", "worker"}, Env: []string{childEnv + "=1"}}
		bench.InspectItems(&cfg, inspectTable(t, d, dsn, 40))
		rs, err := bench.Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 1 || rs[0].Processes != 2 {
			t.Fatalf("results %+v", rs)
		}
		check(t, d, dsn, rs[0], 4, 40)
		svg, err := os.ReadFile(chart)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(svg), "<svg") || strings.Count(string(svg), `class="work"`) != 40 {
			t.Errorf("chart has %d claim bars, want 40 (one per single-item claim)", strings.Count(string(svg), `class="work"`))
		}
	})
}

func TestValidate(t *testing.T) {
	ok := bench.Config{Strategy: "skip", Workers: 1, Rows: 1, Batch: 1}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mod  func(*bench.Config)
		want string
	}{
		{func(c *bench.Config) { c.Workers = 0 }, "--workers"},
		{func(c *bench.Config) { c.Workers = 257 }, "--workers"},
		{func(c *bench.Config) { c.Rows = 1_000_001 }, "--rows"},
		{func(c *bench.Config) { c.Work = -time.Millisecond }, "--work"},
		{func(c *bench.Config) { c.Work = 11 * time.Second }, "--work"},
		{func(c *bench.Config) { c.Batch = 1001 }, "--batch"},
		{func(c *bench.Config) { c.Processes = 2 }, "--processes"},
		{func(c *bench.Config) { c.Strategy = "optimistic" }, "--strategy"},
		{func(c *bench.Config) { c.Chart = "run.png" }, "--chart"},
	} {
		cfg := ok
		c.mod(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one naming %s", cfg, err, c.want)
		}
	}
}

// --batch above 1 finishes a claim with one statement (DoneMany), and a
// skip run with no work time is followed by the raw one-statement
// claim-and-finish where the dialect has one (ClaimDone); its audit
// (no item finished twice or never) fails the run otherwise.
func TestBatchRawLimit(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, _ := testdb.Migrated(t, dsn)
		if !drivers.Supports(d, drivers.Skip) {
			t.Skipf("%s has no skip strategy; its batches are covered by TestStrategies", d.Name())
		}
		cfg := bench.Config{DSN: dsn, Strategy: "skip", Workers: 4, Rows: 203, Batch: 10}
		bench.InspectItems(&cfg, inspectTable(t, d, dsn, 203))
		rs, err := bench.Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		r := rs[0]
		check(t, d, dsn, r, 4, 203)
		c, err := bench.For(d)
		if err != nil {
			t.Fatal(err)
		}
		has := !c.ClaimDone.Empty()
		if has != (r.RawBatchPerS > 0) || has != (r.RawBatchRatio > 0) || r.MaxClaim != 10 || r.Server == "" {
			t.Errorf("raw batch %.0f/s ratio %.3f (dialect has the statement: %v), max claim %d, server %q", r.RawBatchPerS, r.RawBatchRatio, has, r.MaxClaim, r.Server)
		}
	})
}
