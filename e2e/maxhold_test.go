package e2e

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

func sorted(ids []int64) string {
	s := append([]int64(nil), ids...)
	sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
	return fmt.Sprint(s)
}

// --max-hold: work older than the hold is returned to the queue by the next
// caller that serves the task, for every strategy of the dialect; the
// history keeps who held it, since when, and that it expired.
func TestMaxHoldReturnsAbandonedWork(t *testing.T) {
	// No t.Parallel: with --max-hold 2s, the second caller must ask within
	// two seconds of the first's assignment (1s was too short for a
	// process's start once under make test's load: the hold had passed).
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, e := prepare(t, dsn, 40)
		for _, s := range d.Capabilities().Strategies {
			t.Run(string(s), func(t *testing.T) {
				name := "maxhold-" + string(s)
				mustOK(t, dsn, "admin", "task", "create", name, "--where", "eligible = 1", "--order", "priority",
					"--lock", string(s), "--max-hold", "2s")
				task, err := e.Task(context.Background(), name)
				if err != nil {
					t.Fatal(err)
				}
				if task.MaxHold != 2*time.Second {
					t.Fatalf("max hold stored as %s", task.MaxHold)
				}
				gone := decode(t, mustOK(t, dsn, "gone", "--output", "json", "work", "get", name, "--count", "2"))
				if len(gone.Loans) != 2 {
					t.Fatalf("gone got %v", gone.Loans)
				}
				// Within the hold nothing is returned: the next caller gets
				// other loans.
				early := decode(t, mustOK(t, dsn, "early", "--output", "json", "work", "get", name, "--count", "1"))
				if len(early.Loans) != 1 || early.Loans[0] == gone.Loans[0] || early.Loans[0] == gone.Loans[1] {
					t.Fatalf("early got %v while gone holds %v (within the max hold)", early.Loans, gone.Loans)
				}
				// Past the hold (database clock), the next caller gets them.
				deadline := time.Now().Add(time.Minute)
				for len(activeOlderThan(t, e, name, "gone", 2500*time.Millisecond)) != 2 {
					if time.Now().After(deadline) {
						t.Fatal("the database clock did not pass the max hold in a minute")
					}
					time.Sleep(100 * time.Millisecond)
				}
				next := decode(t, mustOK(t, dsn, "next", "--output", "json", "work", "get", name, "--count", "2"))
				if sorted(next.Loans) != sorted(gone.Loans) {
					t.Fatalf("next got %v, want the expired %v back (highest priority)", next.Loans, gone.Loans)
				}
				// History: gone's rows end as expired, with their assigned_at.
				if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work WHERE task_id = ? AND user_name = 'gone' AND disposition = 'expired' AND disposed_at IS NOT NULL AND disposed_at >= assigned_at", task.ID); n != 2 {
					t.Fatalf("%d expired history rows of gone, want 2", n)
				}
				if items := pipelineLoans(t, dsn, "gone", name); len(items) != 0 {
					t.Errorf("gone's pipeline still shows %v", items)
				}
				r := loanq(t, dsn, "gone", "disposition", name, strconv.FormatInt(gone.Loans[0], 10), "complete")
				if r.code != 2 || !strings.Contains(r.stderr, "assigned to next") {
					t.Errorf("disposition of an expired loan now next's: exit %d, want 2 naming next\n%s", r.code, r.stderr)
				}
				audit(t, e)
			})
		}
	})
}

// activeOlderThan is user's active work of the task assigned at least age ago
// by the database clock, as the supervisor view (`loanq work list`) reads it.
func activeOlderThan(t *testing.T, e *engine, task, user string, age time.Duration) []dispatch.ActiveItem {
	t.Helper()
	items, err := e.Admin().WorkList(context.Background(), dispatch.WorkFilter{Task: task, User: user, OlderThan: age})
	if err != nil {
		t.Fatal(err)
	}
	return items
}

// `work reclaim`: a supervisor returns work by hand; --dry-run changes nothing.
func TestWorkReclaim(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, e := prepare(t, dsn, 20)
		mustOK(t, dsn, "admin", "task", "create", "rc", "--where", "eligible = 1", "--order", "priority")
		task, err := e.Task(context.Background(), "rc")
		if err != nil {
			t.Fatal(err)
		}
		a := decode(t, mustOK(t, dsn, "ann", "--output", "json", "work", "get", "rc", "--count", "2"))
		mustOK(t, dsn, "bob", "work", "get", "rc")
		before := snapshot(t, e.DB)

		r := mustOK(t, dsn, "sam", "--output", "json", "work", "reclaim", "rc", "--of", "ann", "--dry-run")
		if !strings.Contains(r.stdout, `"dry_run": true`) || strings.Count(r.stdout, `"loan_id"`) != 2 {
			t.Fatalf("dry run lists:\n%s", r.stdout)
		}
		if r := mustOK(t, dsn, "sam", "--output", "json", "work", "reclaim", "rc", "--older-than", "1h"); strings.Count(r.stdout, `"loan_id"`) != 0 {
			t.Fatalf("nothing is an hour old, yet:\n%s", r.stdout)
		}
		for _, bad := range [][]string{
			{"work", "reclaim", "no-such-task"},
			{"work", "reclaim", "rc", "--older-than", "-1s"},
			{"work", "reclaim", "rc", "--older-than", "soon"},
			{"work", "reclaim", "rc", "--of", " ann"},
			{"work", "reclaim"},
			{"task", "create", "mh-bad", "--where", "eligible = 1", "--max-hold", "0s"},
			{"task", "create", "mh-bad", "--where", "eligible = 1", "--max-hold", "-5m"},
			{"task", "create", "mh-bad", "--where", "eligible = 1", "--max-hold", "500ms"},
			{"task", "create", "mh-bad", "--where", "eligible = 1", "--max-hold", "forever"},
		} {
			if r := loanq(t, dsn, "sam", bad...); r.code != 2 || strings.Contains(r.stderr, "panic") {
				t.Errorf("loanq %v: exit %d, want 2\n%s", bad, r.code, r.stderr)
			}
		}
		if after := snapshot(t, e.DB); after != before {
			t.Fatalf("a dry run or bad input changed the database:\nbefore %s\nafter  %s", before, after)
		}

		r = mustOK(t, dsn, "sam", "--output", "json", "work", "reclaim", "rc", "--of", "ann")
		if strings.Count(r.stdout, `"loan_id"`) != 2 || !strings.Contains(r.stdout, `"reclaimed_by": "sam"`) {
			t.Fatalf("reclaim printed:\n%s", r.stdout)
		}
		if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work WHERE task_id = ? AND user_name = 'ann' AND disposition = 'reclaimed' AND disposed_by = 'sam'", task.ID); n != 2 {
			t.Fatalf("%d reclaimed history rows naming sam, want 2", n)
		}
		if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work WHERE task_id = ? AND user_name = 'bob' AND disposition IS NULL", task.ID); n != 1 {
			t.Fatalf("bob's work was touched: %d active", n)
		}
		c := decode(t, mustOK(t, dsn, "cy", "--output", "json", "work", "get", "rc", "--count", "2"))
		if sorted(c.Loans) != sorted(a.Loans) {
			t.Fatalf("cy got %v, want ann's reclaimed %v back", c.Loans, a.Loans)
		}
		audit(t, e)
	})
}
