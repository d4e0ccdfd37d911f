package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/testkit/testdb"
	"github.com/loanq/loanq/loankey"
)

// batchDoc is the JSON of a disposition of several loans (docs/json.md).
type batchDoc struct {
	Task          string  `json:"task"`
	User          string  `json:"user"`
	Disposition   string  `json:"disposition"`
	ReturnAfterMS int64   `json:"return_after_ms"`
	Reason        string  `json:"reason"`
	Count         int     `json:"count"`
	Loans         []int64 `json:"loans"`
}

// `loanq disposition TASK LOAN… ACTION` and `… -` (stdin) through the
// binary: several loans in one call, all or nothing (another's loan, one
// not active, a key twice, too many: exit 2, the loans named, nothing
// changed), one line or one document, one history event per loan; one
// LOAN prints as it always did.
func TestBatchDisposition(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, e := prepare(t, dsn, 30)
		mustOK(t, dsn, "admin", "task", "create", "t", "--where", "eligible = 1", "--order", "id")
		mustOK(t, dsn, "admin", "task", "create", "why", "--where", "eligible = 1", "--order", "id DESC",
			"--reasons", "never=fraud,duplicate", "--require-reason", "never")
		ana := decode(t, mustOK(t, dsn, "ana", "-o", "json", "work", "get", "t", "--count", "8"))
		bob := decode(t, mustOK(t, dsn, "bob", "-o", "json", "work", "get", "t", "--count", "2"))
		if len(ana.Loans) != 8 || len(bob.Loans) != 2 {
			t.Fatalf("gets: ana %v, bob %v", ana.Loans, bob.Loans)
		}
		a := func(i ...int) []string {
			var out []string
			for _, n := range i {
				out = append(out, itoa64(ana.Loans[n]))
			}
			return out
		}
		state := func() string {
			return fmt.Sprintf("active=%d disposed=%d events=%d",
				testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work WHERE disposition IS NULL"),
				testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work WHERE disposition IS NOT NULL"),
				testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_history"))
		}
		refused := func(stdin string, args []string, want ...string) {
			t.Helper()
			before := state()
			r := loanqStdin(t, dsn, "ana", stdin, args...)
			if r.code != 2 {
				t.Fatalf("loanq %v: exit %d, want 2\n%s%s", args, r.code, r.stdout, r.stderr)
			}
			for _, w := range want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("loanq %v: %q; want it to say %q", args, r.stderr, w)
				}
			}
			if after := state(); after != before {
				t.Fatalf("loanq %v refused, yet changed the database: %s → %s", args, before, after)
			}
		}
		disp := func(loans []string, tail ...string) []string {
			return append(append([]string{"disposition", "t"}, loans...), tail...)
		}
		other := itoa64(bob.Loans[0])
		refused("", disp(append(a(0, 1), other), "complete"), "nothing was dispositioned: 1 of the 3 loans is not your active work in task t",
			"loan "+other+" in task t is assigned to bob, not to ana")
		refused("", disp(a(0, 1, 0), "complete"), "loan "+a(0)[0]+" is named twice")
		refused("", disp(append(a(0), "987654"), "complete"), "loan 987654 has never been assigned in task t")
		refused("", disp(append(a(0), "-"), "complete"), "goes alone")
		refused(strings.Repeat("1\n", 2), disp([]string{"-"}, "complete"), "loan 1 is named twice")
		var lines strings.Builder
		for i := range dispatch.MaxDisposeMany + 1 {
			fmt.Fprintf(&lines, "%d\n", i+1)
		}
		refused(lines.String(), disp([]string{"-"}, "complete"), "more than 1000 loans on stdin")
		refused(other+"\n", disp([]string{"-"}, "complete"), "assigned to bob")

		// Several on the command line: one line.
		r := mustOK(t, dsn, "ana", disp(a(0, 1), "complete")...)
		if r.stdout != "complete: 2 loans of task t (ana)\n" {
			t.Errorf("text of a batch: %q", r.stdout)
		}
		// Not active any more: refused whole.
		refused("", disp(a(2, 0), "complete"), "loan "+a(0)[0]+" in task t is not active: its last assignment (to ana) was already dispositioned complete")
		// From stdin, blank lines and spaces around keys ignored; JSON.
		r = loanqStdin(t, dsn, "ana", "\n "+a(2)[0]+" \n\n"+a(3)[0]+"\n", "-o", "json", "disposition", "t", "-", "return", "--after", "1h")
		var doc batchDoc
		if err := json.Unmarshal([]byte(r.stdout), &doc); r.code != 0 || err != nil || doc.Count != 2 || fmt.Sprint(doc.Loans) != fmt.Sprint([]int64{ana.Loans[2], ana.Loans[3]}) ||
			doc.Disposition != "return" || doc.ReturnAfterMS != 3600000 || doc.User != "ana" || doc.Task != "t" {
			t.Fatalf("stdin batch: exit %d, %+v (%v)\n%s%s", r.code, doc, err, r.stdout, r.stderr)
		}
		// An empty stdin (a drained queue's empty answer) changes nothing.
		before := state()
		if r = loanqStdin(t, dsn, "ana", "\n", "disposition", "t", "-", "complete"); r.code != 0 || r.stdout != "complete: 0 loans of task t (ana)\n" || state() != before {
			t.Errorf("empty stdin: exit %d %q %q", r.code, r.stdout, r.stderr)
		}
		if r = loanqStdin(t, dsn, "ana", "", "disposition", "nope", "-", "complete"); r.code != 2 || !strings.Contains(r.stderr, "unknown task") {
			t.Errorf("empty stdin, unknown task: exit %d %q", r.code, r.stderr)
		}
		// One LOAN: as before, text and JSON.
		if r = mustOK(t, dsn, "ana", disp(a(4), "complete")...); r.stdout != "loan "+a(4)[0]+" in task t: complete\n" {
			t.Errorf("one loan: %q", r.stdout)
		}
		r = mustOK(t, dsn, "ana", append([]string{"-o", "json"}, disp(a(5), "never")...)...)
		if want := "{\n  \"task\": \"t\",\n  \"loan_id\": " + a(5)[0] + ",\n  \"user\": \"ana\",\n  \"disposition\": \"never\"\n}\n"; r.stdout != want {
			t.Errorf("one loan's JSON: %s", r.stdout)
		}
		// One history event per loan disposed of.
		for _, l := range a(0, 1, 2, 3, 4, 5) {
			if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_history h JOIN loanq_work w ON w.id = h.work_id WHERE w.loan_id = ? AND h.event = 'disposed'", l); n != 1 {
				t.Errorf("loan %s: %d disposed events, want 1", l, n)
			}
		}

		// The reason rule holds for each loan: none, or one the task does
		// not declare, refuses the batch; a declared one is kept on all.
		why := decode(t, mustOK(t, dsn, "ana", "-o", "json", "work", "get", "why", "--count", "3"))
		wl := []string{itoa64(why.Loans[0]), itoa64(why.Loans[1]), itoa64(why.Loans[2])}
		wdisp := func(tail ...string) []string { return append(append([]string{"disposition", "why"}, wl...), tail...) }
		refused("", wdisp("never"), "task why requires a reason for never")
		refused("", wdisp("never", "--reason", "typo"), `reason "typo" is not one of task why's codes`)
		mustOK(t, dsn, "ana", wdisp("never", "--reason", "fraud")...)
		if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work WHERE reason = 'fraud' AND disposition = 'never'"); n != 3 {
			t.Errorf("%d loans kept the reason, want 3", n)
		}
		audit(t, e)
	})
}

// Callers in separate OS processes (`work get --count N -o json` piped,
// keys one per line, into `disposition T - never`) and in this process
// (engines of their own) drain one task together: no loan is active twice
// (the database's one-active-row index and the audit), every loan is
// disposed of exactly once, and every work row has its two history events.
func TestBatchDispositionDrain(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		const loans = 90
		d, e := prepare(t, dsn, loans)
		mustOK(t, dsn, "admin", "task", "create", "drain", "--where", "eligible = 1", "--order", "priority")
		var wg sync.WaitGroup
		var mu sync.Mutex
		var fails []string
		fail := func(format string, args ...any) {
			mu.Lock()
			fails = append(fails, fmt.Sprintf(format, args...))
			mu.Unlock()
		}
		for p := range 3 { // processes: each get and each disposition a loanq process
			wg.Add(1)
			go func() {
				defer wg.Done()
				user := fmt.Sprintf("proc%d", p)
				for range loans {
					r := loanq(t, dsn, user, "-o", "json", "work", "get", "drain", "--count", fmt.Sprint(4+p*3), "--timeout", "1m")
					var req request
					if err := json.Unmarshal([]byte(r.stdout), &req); r.code != 0 || err != nil {
						fail("%s: work get: exit %d %v %s", user, r.code, err, r.stderr)
						return
					}
					if len(req.Loans) == 0 {
						return
					}
					var in strings.Builder
					for _, l := range req.Loans {
						fmt.Fprintf(&in, "%d\n", l)
					}
					if r := loanqStdin(t, dsn, user, in.String(), "disposition", "drain", "-", "never"); r.code != 0 {
						fail("%s: disposition of %v: exit %d %s", user, req.Loans, r.code, r.stderr)
						return
					}
				}
			}()
		}
		for g := range 2 { // goroutines, each an engine of its own
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, db := testdb.Open(t, dsn)
				en := dispatch.New(db, d)
				user := fmt.Sprintf("goroutine%d", g)
				ctx := context.Background()
				for range loans {
					r, err := en.Get(ctx, "drain", user, 3+g*2, dispatch.GetOptions{Timeout: time.Minute})
					if err != nil {
						fail("%s: get: %v", user, err)
						return
					}
					if len(r.Loans) == 0 {
						return
					}
					ks := loankey.Texts(r.Loans)
					if _, err := en.DisposeMany(ctx, "drain", ks, user, dispatch.Never, 0, false, dispatch.DispositionNote{}); err != nil {
						fail("%s: dispose of %v: %v", user, ks, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		for _, f := range fails {
			t.Error(f)
		}
		for q, want := range map[string]int64{
			"SELECT COUNT(*) FROM loanq_work":                             loans,
			"SELECT COUNT(DISTINCT loan_id) FROM loanq_work":              loans,
			"SELECT COUNT(*) FROM loanq_work WHERE disposition = 'never'": loans,
			"SELECT COUNT(*) FROM loanq_work WHERE disposition IS NULL":   0,
			"SELECT COUNT(*) FROM loanq_history WHERE event = 'assigned'": loans,
			"SELECT COUNT(*) FROM loanq_history WHERE event = 'disposed'": loans,
			"SELECT COUNT(DISTINCT work_id) FROM loanq_history":           loans,
		} {
			if n := testdb.Int(t, d, e.DB, q); n != want {
				t.Errorf("%s: %d, want %d", q, n, want)
			}
		}
		// Both kinds of caller took part.
		if n := testdb.Int(t, d, e.DB, "SELECT COUNT(DISTINCT user_name) FROM loanq_work"); n < 2 {
			t.Errorf("%d callers got loans, want several", n)
		}
		audit(t, e)
	})
}
