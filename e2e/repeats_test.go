package e2e

import (
	"strings"
	"sync"
	"testing"

	"github.com/loanq/loanq/internal/testkit/testdb"
)

// cameBack is the start of the explanation `work run` prints once when a
// loan it completed comes straight back.
const cameBack = "came back right after this runner completed it"

// A command that completes loans without changing what the criteria read
// gets the same loan back at once (a completed loan that still matches is
// eligible again, by design). `work run` says so once on stderr and, with
// --max-repeats K (default 3), stops with exit 3 once a loan has come back
// K times in a row; --max-repeats 0 never stops. A command that does change
// the data (the loan leaves the criteria) triggers nothing.
func TestWorkRunMaxRepeats(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, e := prepare(t, dsn, 3)
		mustOK(t, dsn, "admin", "task", "create", "spin", "--where", "eligible = 1", "--order", "priority")
		lines := func(s string) []string { return strings.Split(strings.TrimSpace(s), "\n") }

		// Default --max-repeats 3: loan 1 (first by priority) runs, comes
		// back 3 times (run each time), then the loop stops.
		r := loanq(t, dsn, "robot", "work", "run", "spin", "--", "true")
		if r.code != 3 || strings.Count(r.stderr, cameBack) != 1 ||
			!strings.Contains(r.stderr, "loanq: stopped: loan 1 came back 3 times in a row after this runner completed it (--max-repeats 3)") ||
			!strings.Contains(r.stderr, "still matches the criteria of task spin") {
			t.Fatalf("work run of a command that changes nothing: exit %d, want 3 with one explanation\n%s%s", r.code, r.stdout, r.stderr)
		}
		got := lines(r.stdout)
		if len(got) != 4 {
			t.Fatalf("want 4 runs of loan 1 (once, then 3 times back):\n%s", r.stdout)
		}
		for _, l := range got {
			if !strings.HasPrefix(l, "loan 1: exit 0 -> complete") {
				t.Fatalf("want 4 runs of loan 1 (once, then 3 times back):\n%s", r.stdout)
			}
		}
		if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work WHERE loan_id = '1' AND disposition = 'complete'"); n != 4 {
			t.Fatalf("%d completions of loan 1, want 4", n)
		}
		if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work WHERE disposition IS NULL"); n != 0 {
			t.Fatalf("%d loans still active after the stop", n)
		}

		// --max-repeats 1: stop at the first come-back (2 runs); JSON
		// output keeps stdout to the JSON lines.
		r = loanq(t, dsn, "robot", "--output", "json", "work", "run", "spin", "--max-repeats", "1", "--", "true")
		if r.code != 3 || len(lines(r.stdout)) != 2 || strings.Count(r.stderr, cameBack) != 1 || !strings.Contains(r.stderr, "loan 1 came back once in a row after this runner completed it (--max-repeats 1)") {
			t.Fatalf("--max-repeats 1: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		for _, l := range lines(r.stdout) {
			if !strings.HasPrefix(l, `{"task":"spin","loan_id":1,`) {
				t.Fatalf("--max-repeats 1, JSON: %q is not the JSON line of loan 1", l)
			}
		}

		// --max-repeats 0: no limit; the explanation still comes, once.
		r = loanq(t, dsn, "robot", "work", "run", "spin", "--max-repeats", "0", "--max-loans", "8", "--", "true")
		if r.code != 0 || len(lines(r.stdout)) != 8 || strings.Count(r.stderr, cameBack) != 1 || !strings.Contains(r.stderr, "--max-repeats 0") {
			t.Fatalf("--max-repeats 0 --max-loans 8: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}

		// A loan returned (exit 75) ends its streak: a command that
		// completes only every other time has its loan come back once in a
		// row at most, and --max-repeats 2 never stops it. Each run flips a
		// file: exit 0, 75, 0, 75, …
		flip := t.TempDir() + "/flip"
		r = loanq(t, dsn, "robot", "work", "run", "spin", "--retry-after", "0s", "--max-repeats", "2", "--max-loans", "6", "--",
			"sh", "-c", `if [ -e `+flip+` ]; then rm `+flip+`; exit 75; else touch `+flip+`; fi`)
		if r.code != 0 || len(lines(r.stdout)) != 6 || strings.Contains(r.stderr, "stopped") {
			t.Fatalf("alternating complete/return with --max-repeats 2: exit %d, want 0 after 6 loans\n%s%s", r.code, r.stdout, r.stderr)
		}

		// Two runners on the 3 loans: loans move between them, each still
		// sees loans it completed come back, and both stop.
		var wg sync.WaitGroup
		res := make([]result, 2)
		for i := range res {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				res[i] = loanq(t, dsn, "robot", "work", "run", "spin", "--concurrency", "2", "--", "true")
			}(i)
		}
		wg.Wait()
		for i, r := range res {
			if r.code != 3 || strings.Count(r.stderr, cameBack) != 1 {
				t.Fatalf("runner %d of 2: exit %d, want 3\n%s%s", i, r.code, r.stdout, r.stderr)
			}
		}

		// Completed loans that leave the criteria never come back: no
		// explanation, exit 0 at the end of the work.
		mustOK(t, dsn, "admin", "task", "create", "done", "--order", "priority",
			"--where", "eligible = 1 AND "+d.Dialect().KeyAsText("src.id")+" NOT IN (SELECT loan_id FROM loanq_work WHERE disposition = 'complete')")
		r = loanq(t, dsn, "robot", "work", "run", "done", "--until-empty", "--max-repeats", "1", "--", "true")
		if r.code != 0 || strings.Contains(r.stderr, "came back") {
			t.Fatalf("a task whose completed loans leave the criteria: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		audit(t, e)

		before := snapshot(t, e.DB)
		check(t, badInput{"max-repeats negative", "robot", []string{"work", "run", "spin", "--max-repeats", "-1", "--", "true"}, 2, "--max-repeats"},
			loanq(t, dsn, "robot", "work", "run", "spin", "--max-repeats", "-1", "--", "true"))
		if after := snapshot(t, e.DB); after != before {
			t.Fatal("work run --max-repeats -1 changed the database")
		}
	})
}
