package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/loanq/loanq/internal/testkit/testdb"
)

// `loanq prune`: bad input exits 2 and changes nothing; --dry-run counts
// and changes nothing; the prune removes the old closed request with its
// loans and keeps the one whose loan is 'never'; the cron recipe
// `loanq lock run prune -- loanq prune` runs.
func TestPrune(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, e := prepare(t, dsn, 10)
		mustOK(t, dsn, "admin", "task", "create", "old", "--where", "eligible = 1", "--order", "priority")
		a := decode(t, mustOK(t, dsn, "ann", "--output", "json", "work", "get", "old", "--count", "2"))
		for _, l := range a.Loans {
			mustOK(t, dsn, "ann", "disposition", "old", fmt.Sprint(l), "complete")
		}
		c := decode(t, mustOK(t, dsn, "cat", "--output", "json", "work", "get", "old", "--count", "2"))
		mustOK(t, dsn, "cat", "disposition", "old", fmt.Sprint(c.Loans[0]), "complete")
		mustOK(t, dsn, "cat", "disposition", "old", fmt.Sprint(c.Loans[1]), "never")
		old := d.Dialect().NowMinusMillis("17280000000") // 200 days
		testdb.Exec(t, d, e.DB, "UPDATE loanq_work_request SET created_at = "+old+", served_at = "+old)
		testdb.Exec(t, d, e.DB, "UPDATE loanq_work SET assigned_at = "+old+", disposed_at = "+old)
		before := snapshot(t, e.DB)

		for _, args := range [][]string{
			{"prune", "--older-than", "1h"},
			{"prune", "--older-than", "-5d"},
			{"prune", "--older-than", "soon"},
			{"prune", "--batch", "0"},
			{"prune", "--batch", "20000"},
			{"prune", "--task", "nope"},
			{"prune", "--task", "bad name"},
			{"prune", "old"},
		} {
			if r := loanq(t, dsn, "admin", args...); r.code != 2 || !strings.Contains(r.stderr, "loanq: ") {
				t.Errorf("loanq %v: exit %d, want 2 with a message\n%s", args, r.code, r.stderr)
			}
		}
		var dry struct {
			DryRun  bool             `json:"dry_run"`
			Removed map[string]int64 `json:"removed"`
		}
		r := mustOK(t, dsn, "admin", "--output", "json", "prune", "--dry-run")
		if err := json.Unmarshal([]byte(r.stdout), &dry); err != nil {
			t.Fatalf("prune --dry-run JSON: %v\n%s", err, r.stdout)
		}
		if !dry.DryRun || dry.Removed["loanq_work_request"] != 1 || dry.Removed["loanq_work"] != 2 {
			t.Errorf("prune --dry-run counted %+v, want ann's request and its 2 loans", dry)
		}
		if after := snapshot(t, e.DB); after != before {
			t.Fatalf("bad input or --dry-run changed the database:\nbefore %s\nafter  %s", before, after)
		}

		r = mustOK(t, dsn, "admin", "prune", "--batch", "1")
		for _, want := range []string{"loanq_work_request            1 rows", "loanq_work                    2 rows"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("prune printed:\n%s\nwant a line %q", r.stdout, want)
			}
		}
		if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work_request WHERE id = ?", a.RequestID); n != 0 {
			t.Errorf("ann's old request is still there")
		}
		if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work WHERE request_id = ?", c.RequestID); n != 2 {
			t.Errorf("cat's request has %d work rows left, want both (one is 'never')", n)
		}
		audit(t, e)

		// The cron recipe: one node at a time, the lock's command is the prune.
		r = mustOK(t, dsn, "admin", "lock", "run", "prune", "--", binary, "--db", dsn, "prune")
		if !strings.Contains(r.stdout, "loanq_work_request            0 rows") {
			t.Errorf("lock run prune -- loanq prune printed:\n%s", r.stdout)
		}
		// The never loan stays out of the queue.
		g := decode(t, mustOK(t, dsn, "bob", "--output", "json", "work", "get", "old", "--count", "10"))
		for _, l := range g.Loans {
			if l == c.Loans[1] {
				t.Errorf("loan %d, dispositioned never, was handed out after the prune", l)
			}
		}
	})
}
