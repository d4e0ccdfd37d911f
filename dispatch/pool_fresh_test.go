package dispatch_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// The freshness bound of the candidate pool (docs/algorithm.md,
// "Freshness"): a loan that becomes eligible at the top of the criteria
// order after a refill waits at most one --prefetch-ttl, or until the next
// refill. Before the TTL the pool's candidates are served (the pool does not
// see the new loan); once the candidates are older than the TTL they are not
// claimed, the next get runs the criteria query and the new loan comes
// first. A refill (what `task refill --every` and `serve --refill` run) puts
// a newer top loan at the head of the pool at once.
func TestPoolFreshnessBound(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 60)
		ctx := context.Background()
		const ttl = time.Second
		// Loans 59 and 60 wait, ineligible, to become the top of the order.
		testdb.Exec(t, f.d, f.db, "UPDATE loan SET eligible = 0, priority = 0 WHERE id = 60")
		testdb.Exec(t, f.d, f.db, "UPDATE loan SET eligible = 0, priority = -1 WHERE id = 59")
		task := f.task(t, dispatch.TaskSpec{Name: "heavy", Prefetch: 20, PrefetchTTL: ttl})
		runs := func() int64 { return f.count(t, "SELECT COUNT(*) FROM loanq_query_run WHERE task_id = ?", task.ID) }

		filled := time.Now()
		if r, err := f.e.Get(ctx, "heavy", "ana", 1, fast); err != nil || fmt.Sprint(r.Loans) != "[1]" {
			t.Fatalf("first get: %+v, %v", r, err)
		}
		returned := time.Now()
		if n := poolSize(t, f, task); n != 20 {
			t.Fatalf("pool after the first run: %d, want 20 (loans 2..21)", n)
		}
		testdb.Exec(t, f.d, f.db, "UPDATE loan SET eligible = 1 WHERE id = 60")

		// Within the TTL: the pool serves what it holds, not the new loan.
		r, err := f.e.Get(ctx, "heavy", "bob", 1, fast)
		if within := time.Since(filled); within >= ttl {
			t.Fatalf("the second get returned %s after the refill, past the %s TTL: too slow to test the bound", within, ttl)
		}
		if err != nil || fmt.Sprint(r.Loans) != "[2]" {
			t.Fatalf("get within the TTL: %+v, %v; want loan 2 from the pool", r, err)
		}
		if n := runs(); n != 1 {
			t.Fatalf("%d criteria runs within the TTL, want 1: the get did not come from the pool", n)
		}

		// Past the TTL: the candidates are stale, the new top loan comes first.
		// The candidates were written before the first get returned: by
		// then plus the TTL (and a margin for this loaded machine's clock
		// reads), none is fresh.
		time.Sleep(time.Until(returned.Add(ttl)))
		for poolSize(t, f, task) != 0 {
			if time.Since(returned) > ttl+time.Second {
				t.Fatalf("%d candidates still fresh %s after the refill (TTL %s)", poolSize(t, f, task), time.Since(returned), ttl)
			}
			time.Sleep(20 * time.Millisecond)
		}
		r, err = f.e.Get(ctx, "heavy", "carl", 2, fast)
		if err != nil || fmt.Sprint(r.Loans) != "[60 3]" {
			t.Fatalf("get past the TTL: %+v, %v; want 60 (newly eligible, top) then 3", r, err)
		}
		if n := runs(); n != 2 {
			t.Errorf("%d criteria runs past the TTL, want 2", n)
		}
		if n := poolSize(t, f, task); n != 20 {
			t.Errorf("pool after the run past the TTL: %d, want 20 fresh candidates", n)
		}

		// A refill, within the new TTL, puts a newer top loan first.
		testdb.Exec(t, f.d, f.db, "UPDATE loan SET eligible = 1 WHERE id = 59")
		if out, err := f.e.Refill(ctx, task, true); err != nil || out.Refused != "" {
			t.Fatalf("refill: %+v, %v", out, err)
		}
		r, err = f.e.Get(ctx, "heavy", "dora", 1, fast)
		if err != nil || fmt.Sprint(r.Loans) != "[59]" {
			t.Fatalf("get after the refill: %+v, %v; want loan 59 (newly eligible, top) from the refilled pool", r, err)
		}
		if hits := f.count(t, "SELECT COUNT(*) FROM loanq_work_request WHERE pooled = 1 AND id = ?", r.ID); hits != 1 {
			t.Errorf("the get after the refill is not a pool hit")
		}
		f.audit(t)
	})
}
