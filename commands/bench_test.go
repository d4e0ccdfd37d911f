package commands_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/loanq/loanq/internal/testdb"
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
	var one struct {
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
	if err := json.Unmarshal([]byte(out), &one); err != nil {
		t.Fatalf("bench JSON: %v\n%s", err, out)
	}
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
