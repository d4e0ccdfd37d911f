package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loanq/loanq/internal/testkit/testdb"
)

// exitFor is the exit status the test command of `work run` gives loan id,
// and wantDisposition what loanq must make of it.
func exitFor(id int64) int { return []int{75, 65, 3, 0}[id%4] }

var wantDisposition = map[int]string{75: "return", 65: "never", 3: "return", 0: "complete"}

// Several `work run` processes on one task, each running two commands at
// once: every eligible loan is processed exactly once (the commands record
// the loans they got), each exit status becomes its disposition in the
// database, and --until-empty ends every runner with exit 0.
func TestWorkRunProcessesEveryLoanOnce(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		const loans = 24
		d, e := prepare(t, dsn, loans)
		// Completed loans leave the criteria (as a processed loan would in an
		// application); never and return (after 1h) keep them out anyway.
		mustOK(t, dsn, "admin", "task", "create", "runs", "--order", "priority",
			"--where", "eligible = 1 AND "+d.Dialect().KeyAsText("src.id")+" NOT IN (SELECT loan_id FROM loanq_work WHERE disposition = 'complete')")
		dir := t.TempDir()
		script := `echo "$LOANQ_LOAN_ID {} $LOANQ_TASK $LOANQ_USER $LOANQ_REQUEST_ID" >> ` + dir + `/got.$LOANQ_USER; sleep 0.05; ` +
			`case $(( LOANQ_LOAN_ID % 4 )) in 0) exit 75;; 1) exit 65;; 2) exit 3;; *) exit 0;; esac`
		const procs = 3
		var wg sync.WaitGroup
		res := make([]result, procs)
		for i := 0; i < procs; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				res[i] = loanq(t, dsn, fmt.Sprintf("r%d", i), "--output", "json", "work", "run", "runs",
					"--until-empty", "--concurrency", "2", "--count", "2", "--retry-after", "1h", "--", "sh", "-c", script)
			}(i)
		}
		wg.Wait()
		seen := map[int64]string{}
		for i, r := range res {
			if r.code != 0 {
				t.Fatalf("runner %d: exit %d\n%s%s", i, r.code, r.stdout, r.stderr)
			}
			user := fmt.Sprintf("r%d", i)
			for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
				if line == "" {
					continue
				}
				var o struct {
					Task        string `json:"task"`
					LoanID      int64  `json:"loan_id"`
					ExitCode    int    `json:"exit_code"`
					Disposition string `json:"disposition"`
					DurationMS  *int64 `json:"duration_ms"`
				}
				if err := json.Unmarshal([]byte(line), &o); err != nil || o.Task != "runs" || o.DurationMS == nil {
					t.Fatalf("runner %d: not a JSON line of work run: %q (%v)", i, line, err)
				}
				if prev, dup := seen[o.LoanID]; dup {
					t.Fatalf("loan %d processed twice (by %s and %s)", o.LoanID, prev, user)
				}
				seen[o.LoanID] = user
				if o.ExitCode != exitFor(o.LoanID) || o.Disposition != wantDisposition[o.ExitCode] {
					t.Fatalf("loan %d: exit %d → %s; want exit %d → %s", o.LoanID, o.ExitCode, o.Disposition, exitFor(o.LoanID), wantDisposition[exitFor(o.LoanID)])
				}
			}
			// The command saw its loan, {} replaced, and the environment.
			data, _ := os.ReadFile(filepath.Join(dir, "got."+user))
			for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
				f := strings.Fields(l)
				if l == "" {
					continue
				}
				if len(f) != 5 || f[0] != f[1] || f[2] != "runs" || f[3] != user {
					t.Fatalf("command of %s saw %q", user, l)
				}
				if id, _ := strconv.ParseInt(f[0], 10, 64); seen[id] != user {
					t.Fatalf("command of %s ran loan %s, which its runner did not report", user, f[0])
				}
			}
		}
		if len(seen) != loans {
			ids := make([]int64, 0, len(seen))
			for id := range seen {
				ids = append(ids, id)
			}
			sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
			t.Fatalf("%d loans processed, want all %d: %v", len(seen), loans, ids)
		}
		// The database agrees: one assignment per loan, disposed as mapped.
		for id := int64(1); id <= loans; id++ {
			n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work WHERE loan_id = ?", fmt.Sprint(id))
			kind := map[string]int64{"complete": 0, "return": 1, "never": 2}[wantDisposition[exitFor(id)]]
			got := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work WHERE loan_id = ? AND disposition = ?", fmt.Sprint(id), []string{"complete", "return", "never"}[kind])
			if n != 1 || got != 1 {
				t.Fatalf("loan %d: %d assignment(s), %d with disposition %s", id, n, got, wantDisposition[exitFor(id)])
			}
		}
		audit(t, e)
	})
}

// SIGTERM while a command runs: no new work, the command gets --grace, then
// SIGTERM, its loan is returned at once (assignable again), exit 0. A
// --loan-timeout that passes counts as a failure and returns the loan after
// --retry-after.
func TestWorkRunSignalAndTimeout(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, e := prepare(t, dsn, 5)
		mustOK(t, dsn, "admin", "task", "create", "sig", "--where", "eligible = 1", "--order", "priority")
		started := filepath.Join(t.TempDir(), "started")
		p := startProc(t, dsn, "robot", 2*time.Minute, "--output", "json", "work", "run", "sig", "--grace", "200ms", "--",
			"sh", "-c", `echo $LOANQ_LOAN_ID > `+started+`; exec sleep 60`)
		waitForFile(t, started, p)
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		r := p.wait()
		if r.code != 0 || !strings.Contains(r.stdout, `"loan_id":1,`) || !strings.Contains(r.stdout, `"disposition":"return"`) {
			t.Fatalf("SIGTERM to work run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work WHERE disposition IS NULL"); n != 0 {
			t.Fatalf("%d loans still active after SIGTERM", n)
		}
		// Returned with --after 0s: the next caller gets it again.
		if got := decode(t, mustOK(t, dsn, "ana", "--output", "json", "work", "get", "sig")); len(got.Loans) != 1 || got.Loans[0] != 1 {
			t.Fatalf("after the interrupted run, work get answered %+v, want loan 1 back", got)
		}

		r = loanq(t, dsn, "robot", "work", "run", "sig", "--max-loans", "1", "--loan-timeout", "300ms", "--retry-after", "1h", "--", "sleep", "60")
		if r.code != 0 || !strings.Contains(r.stdout, "loan 2: exit 143 -> return after 1h0m0s") || !strings.Contains(r.stdout, "failure: --loan-timeout") {
			t.Fatalf("--loan-timeout: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		r = loanq(t, dsn, "robot", "work", "run", "sig", "--max-failures", "1", "--retry-after", "1h", "--", "false")
		if r.code != 1 || !strings.Contains(r.stderr, "stopped after 1 failures") || strings.Count(r.stdout, "\n") != 1 {
			t.Fatalf("--max-failures 1: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
}

// Bad input: exit 2, nothing changed in the database.
func TestWorkRunBadInput(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		_, e := prepare(t, dsn, 5)
		mustOK(t, dsn, "admin", "task", "create", "t", "--where", "eligible = 1")
		before := snapshot(t, e.DB)
		for _, c := range []badInput{
			{"no task", "a", []string{"work", "run"}, 2, "needs a task"},
			{"no command", "a", []string{"work", "run", "t"}, 2, "no command"},
			{"unknown task", "a", []string{"work", "run", "nosuch", "--", "true"}, 2, "unknown task"},
			{"bad task name", "a", []string{"work", "run", "t;x", "--", "true"}, 2, "task"},
			{"unknown program", "a", []string{"work", "run", "t", "--", "no-such-program-xyz"}, 2, "cannot run"},
			{"count zero", "a", []string{"work", "run", "t", "--count", "0", "--", "true"}, 2, "--count"},
			{"concurrency zero", "a", []string{"work", "run", "t", "--concurrency", "0", "--", "true"}, 2, "--concurrency"},
			{"concurrency huge", "a", []string{"work", "run", "t", "--concurrency", "1000", "--", "true"}, 2, "--concurrency"},
			{"max-loans negative", "a", []string{"work", "run", "t", "--max-loans", "-1", "--", "true"}, 2, "--max-loans"},
			{"max-failures negative", "a", []string{"work", "run", "t", "--max-failures", "-1", "--", "true"}, 2, "--max-failures"},
			{"retry-after negative", "a", []string{"work", "run", "t", "--retry-after", "-1s", "--", "true"}, 2, "--retry-after"},
			{"retry-after too long", "a", []string{"work", "run", "t", "--retry-after", "100h", "--", "true"}, 2, "--retry-after"},
			{"loan-timeout malformed", "a", []string{"work", "run", "t", "--loan-timeout", "soon", "--", "true"}, 2, "--loan-timeout"},
			{"grace negative", "a", []string{"work", "run", "t", "--grace", "-1s", "--", "true"}, 2, "--grace"},
			{"user empty", "", []string{"work", "run", "t", "--", "true"}, 2, "user"},
		} {
			check(t, c, loanq(t, dsn, c.user, c.args...))
		}
		if after := snapshot(t, e.DB); after != before {
			t.Fatal("bad input to work run changed the database")
		}
	})
}
