package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/loanq/loanq/internal/testkit/testdb"
)

// `task create --hold-limit`: stored and shown (text and JSON); without it
// the limit in force is derived from the task's measured criteria-query time
// (4 x the slowest of the ten latest runs, at least 30 s); bad values are
// refused with exit 2 and change nothing.
func TestHoldLimitOption(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, e := prepare(t, dsn, 5)
		mustOK(t, dsn, "admin", "task", "create", "bounded", "--where", "eligible = 1", "--hold-limit", "90s")
		mustOK(t, dsn, "admin", "task", "create", "derived", "--where", "eligible = 1")
		show := func(name string) map[string]any {
			t.Helper()
			r := mustOK(t, dsn, "admin", "--output", "json", "task", "show", name)
			var out struct {
				Task map[string]any `json:"task"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
				t.Fatalf("task show JSON: %v\n%s", err, r.stdout)
			}
			return out.Task
		}
		if got := show("bounded"); got["hold_limit_ms"] != float64(90000) || got["hold_limit_in_force_ms"] != float64(90000) || got["hold_limit_derived"] != false {
			t.Errorf("task with --hold-limit 90s: %v", got)
		}
		if got := show("derived"); got["hold_limit_ms"] != nil || got["hold_limit_in_force_ms"] != float64(30000) || got["hold_limit_derived"] != true {
			t.Errorf("task without --hold-limit, no runs yet: %v", got)
		}
		// A slow run measured: 20 s, so 80 s.
		id := taskID(t, e, "derived")
		testdb.Exec(t, d, e.DB, "INSERT INTO loanq_query_run (task_id, strategy, holder, started_at, duration_ms, rows_found, requests_served, loans_assigned) SELECT id, lock_strategy, 'test', created_at, 20000, 0, 0, 0 FROM loanq_task WHERE id = ?", id)
		if got := show("derived"); got["hold_limit_in_force_ms"] != float64(80000) {
			t.Errorf("derived hold limit after a 20 s run: %v, want 80000", got["hold_limit_in_force_ms"])
		}
		if r := mustOK(t, dsn, "admin", "task", "show", "bounded"); !strings.Contains(r.stdout, "hold limit:") {
			t.Errorf("task show does not print the hold limit:\n%s", r.stdout)
		}
		for _, bad := range [][]string{
			{"--hold-limit", "0s"}, {"--hold-limit", "-5s"}, {"--hold-limit", "500ms"}, {"--hold-limit", "25h"},
			{"--hold-limit", "soon"}, {"--hold-limit", "2s", "--query-delay", "3s"},
		} {
			r := loanq(t, dsn, "admin", append([]string{"task", "create", "bad", "--where", "eligible = 1"}, bad...)...)
			if r.code != 2 || !strings.Contains(r.stderr, "hold-limit") {
				t.Errorf("task create %v: exit %d, want 2 naming --hold-limit\n%s", bad, r.code, r.stderr)
			}
		}
		if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_task WHERE name = 'bad'"); n != 0 {
			t.Errorf("a refused task was stored")
		}
	})
}
