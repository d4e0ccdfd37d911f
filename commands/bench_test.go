package commands_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loanq/loanq/internal/testkit/testdb"
)

// `loanq bench` through the command line on SQLite: JSON as issue 4 gives it,
// `all` as a list with a note about what SQLite lacks, and bad flags exit 2.
func TestBenchCommand(t *testing.T) {
	dsn := testdb.Fresh(t, "sqlite")
	if out, errs, code := run(t, "--db", dsn, "migrate", "up"); code != 0 {
		t.Fatalf("migrate up: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code := run(t, "--db", dsn, "--output", "json", "bench", "--workers", "3", "--rows", "12", "--work", "1ms")
	if code != 0 {
		t.Fatalf("bench: exit %d\n%s%s", code, out, errs)
	}
	var list1 []struct {
		Database   string  `json:"database"`
		Strategy   string  `json:"strategy"`
		Workers    int     `json:"workers"`
		Rows       int     `json:"rows"`
		WorkMS     float64 `json:"work_ms"`
		ElapsedMS  *int64  `json:"elapsed_ms"`
		IdealMS    *int64  `json:"ideal_ms"`
		Duplicates *int64  `json:"duplicates"`
		PerWorker  []struct {
			Worker    int    `json:"worker"`
			Processed int64  `json:"processed"`
			ElapsedMS *int64 `json:"elapsed_ms"`
		} `json:"per_worker"`
	}
	// One shape whatever --strategy: a list of results, here of one.
	if err := json.Unmarshal([]byte(out), &list1); err != nil || len(list1) != 1 {
		t.Fatalf("bench JSON (want a list of one result): %v\n%s", err, out)
	}
	one := list1[0]
	var sum int64
	for _, w := range one.PerWorker {
		sum += w.Processed
		if w.ElapsedMS == nil {
			t.Errorf("worker %d has no elapsed_ms", w.Worker)
		}
	}
	if one.Database == "" || one.Strategy != "lease" || one.Workers != 3 || one.Rows != 12 || one.WorkMS != 1 ||
		one.ElapsedMS == nil || one.IdealMS == nil || *one.IdealMS != 4 || one.Duplicates == nil || *one.Duplicates != 0 ||
		len(one.PerWorker) != 3 || sum != 12 {
		t.Errorf("bench JSON: %s", out)
	}

	out, errs, code = run(t, "--db", dsn, "--output", "json", "bench", "--strategy", "all", "--workers", "2", "--rows", "4", "--work", "0s")
	var list []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 || list[0]["strategy"] != "lease" {
		t.Fatalf("bench --strategy all on sqlite: exit %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(errs, "sqlite supports only lease") {
		t.Errorf("no note about the strategies SQLite lacks: %q", errs)
	}

	out, _, code = run(t, "--db", dsn, "bench", "--workers", "2", "--rows", "4", "--work", "0s")
	if code != 0 || !strings.Contains(out, "duplicates 0") || strings.Contains(out, "\r") {
		t.Errorf("bench text: exit %d\n%q", code, out)
	}

	for _, c := range []struct{ args, want string }{
		{"--workers 0", "--workers"},
		{"--workers 300", "--workers"},
		{"--rows 0", "--rows"},
		{"--rows 2000000", "--rows"},
		{"--work 11s", "--work"},
		{"--work -1ms", "--work"},
		{"--work soon", "--work"},
		{"--batch 0", "--batch"},
		{"--batch 1001", "--batch"},
		{"--strategy skip", "sqlite does not support strategy skip"},
		{"--strategy fast", "--strategy"},
		{"--processes 0", "--processes"},
		{"--processes 20", "--processes"},
	} {
		_, errs, code := run(t, append([]string{"--db", dsn, "bench"}, strings.Fields(c.args)...)...)
		if code != 2 || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("bench %s: exit %d, stderr %q; want exit 2 naming %s", c.args, code, errs, c.want)
		}
	}
}

// `loanq bench --target engine` through the command line: the JSON document
// of the issue that asked for it, the chart written where it says, and a
// --chart path that cannot be written refused before anything runs.
func TestBenchEngineCommand(t *testing.T) {
	dsn := testdb.Fresh(t, "sqlite")
	if out, errs, code := run(t, "--db", dsn, "migrate", "up"); code != 0 { // only migrate up and demo create a named SQLite file
		t.Fatalf("migrate up: exit %d\n%s%s", code, out, errs)
	}
	chart := filepath.Join(t.TempDir(), "engine.svg")
	out, errs, code := run(t, "--db", dsn, "--output", "json", "bench", "--target", "engine", "--workers", "3", "--rows", "12", "--count", "2", "--chart", chart)
	if code != 0 {
		t.Fatalf("bench --target engine: exit %d\n%s%s", code, out, errs)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("engine JSON: %v\n%s", err, out)
	}
	for _, k := range []string{"target", "database", "strategy", "workers", "count", "loans", "elapsed_ms", "loans_per_s",
		"get_p50_ms", "get_p99_ms", "criteria_runs", "requests", "duplicates"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("engine JSON lacks %q: %s", k, out)
		}
	}
	if doc["target"] != "engine" || doc["loans"] != 12.0 || doc["duplicates"] != 0.0 || doc["count"] != 2.0 {
		t.Errorf("engine JSON: %s", out)
	}
	if !strings.Contains(errs, "wrote the chart to "+chart) {
		t.Errorf("no word of where the chart went: %q", errs)
	}
	if _, err := os.Stat(chart); err != nil {
		t.Error(err)
	}

	fresh := testdb.Fresh(t, "sqlite")
	for _, target := range []string{"items", "engine"} {
		bad := filepath.Join(t.TempDir(), "no-such-folder", "run.svg")
		_, errs, code = run(t, "--db", fresh, "bench", "--target", target, "--rows", "5", "--chart", bad)
		if code != 2 || !strings.Contains(errs, "does not exist") {
			t.Errorf("--target %s --chart %s: exit %d, %q; want exit 2 naming the missing folder", target, bad, code, errs)
		}
	}
	if _, err := os.Stat(strings.TrimPrefix(fresh, "sqlite:")); err == nil {
		t.Errorf("a refused bench created the database file %s", fresh)
	}
	_, errs, code = run(t, "--db", dsn, "bench", "--target", "engine", "--batch", "5")
	if code != 2 || !strings.Contains(errs, "--batch") {
		t.Errorf("--target engine --batch: exit %d, %q", code, errs)
	}
	_, errs, code = run(t, "--db", dsn, "bench", "--count", "5")
	if code != 2 || !strings.Contains(errs, "--target engine") {
		t.Errorf("--count without --target engine: exit %d, %q", code, errs)
	}
}

// The engine and CLI benches refuse a database that holds tasks of its
// users: exit 2, a one-line message naming --allow-user-tasks. With it the
// engine bench runs and leaves the users' task and no bench task or table.
// The item bench creates no task: the flag does not go with it.
func TestBenchRefusesUserTasks(t *testing.T) {
	dsn := testdb.Fresh(t, "sqlite")
	if out, errs, code := run(t, "--db", dsn, "migrate", "up"); code != 0 {
		t.Fatalf("migrate up: exit %d\n%s%s", code, out, errs)
	}
	d, db := testdb.Open(t, dsn)
	testdb.CreateLoans(t, d, db, 3)
	if out, errs, code := run(t, "--db", dsn, "task", "create", "payments", "--source", "loan", "--key", "id", "--where", "eligible = 1"); code != 0 {
		t.Fatalf("task create: exit %d\n%s%s", code, out, errs)
	}
	for _, target := range []string{"engine", "cli"} {
		_, errs, code := run(t, "--db", dsn, "bench", "--target", target, "--rows", "5", "--duration", "1s")
		if code != 2 || !strings.Contains(errs, "--allow-user-tasks") || !strings.Contains(errs, "payments") ||
			strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("bench --target %s on a database with a user task: exit %d, %q; want exit 2 naming --allow-user-tasks", target, code, errs)
		}
	}
	_, errs, code := run(t, "--db", dsn, "bench", "--allow-user-tasks", "--rows", "5")
	if code != 2 || !strings.Contains(errs, "--allow-user-tasks goes with --target engine or cli") {
		t.Errorf("bench --target items --allow-user-tasks: exit %d, %q", code, errs)
	}
	out, errs, code := run(t, "--db", dsn, "--output", "json", "bench", "--target", "engine", "--allow-user-tasks", "--workers", "2", "--rows", "6", "--no-raw")
	if code != 0 || !strings.Contains(out, `"loans": 6`) {
		t.Fatalf("bench --target engine --allow-user-tasks: exit %d\n%s%s", code, out, errs)
	}
	if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_task"); n != 1 {
		t.Errorf("%d tasks after the bench, want the users' one alone", n)
	}
	if n := testdb.Objects(t, d, db, "loanq_bench"); n != 0 {
		t.Errorf("%d bench objects left after the bench", n)
	}
}

// `loanq sql` prints the bench's own catalogue after the engine's, with the
// DDL that makes and drops its objects, and the migration that removed them
// from the schema: what the bench sends is as visible as what the engine
// sends.
func TestSQLPrintsTheBenchCatalogue(t *testing.T) {
	out, errs, code := run(t, "sql", "--dialect", "oracle")
	if code != 0 {
		t.Fatalf("sql --dialect oracle: exit %d\n%s", code, errs)
	}
	for _, want := range []string{
		"-- BenchClaimSkip: bench claim, strategy skip",
		"BEGIN loanq_bench_claim(:1, 'skip'); END;",
		"-- BenchCreate3: bench: create its own objects before a run\nCREATE OR REPLACE PROCEDURE loanq_bench_claim",
		"-- BenchDrop2: bench: drop its own objects after a run",
		"-- migration 00014_bench_out_of_schema.sql",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("sql --dialect oracle lacks %q", want)
		}
	}
	out, _, _ = run(t, "sql", "--dialect", "sqlite")
	if !strings.Contains(out, "-- BenchClaimSkip: bench claim, strategy skip: lock up to K ready items, passing over held ones\n-- not used on sqlite:") {
		t.Errorf("sql --dialect sqlite does not say the row-lock bench claims are not used")
	}
}
