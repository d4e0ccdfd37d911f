package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/testkit/testdb"
	"github.com/loanq/loanq/loankey"
	"github.com/loanq/loanq/problem"
)

// loanKeys is loans as the key texts DisposeMany takes.
func loanKeys(loans ...int) []string {
	out := make([]string, len(loans))
	for i, l := range loans {
		out[i] = strconv.Itoa(l)
	}
	return out
}

// historyState is every work row of the database with its history
// events, for a before/after comparison.
func historyState(t *testing.T, f *fixture) string {
	return fmt.Sprintf("%s events=%d disposed=%d", snapshot(t, f),
		f.count(t, "SELECT COUNT(*) FROM loanq_history"),
		f.count(t, "SELECT COUNT(*) FROM loanq_work WHERE disposition IS NOT NULL"))
}

// Several loans of a task in one call: all of them, or (one of them not
// the caller's active work, a key twice, too many, none) nothing, with
// exit 2 and a message naming the loans and why in Dispose's words. Each
// loan ends with its own history event, and a return's time applies to
// each.
func TestDisposeMany(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 9)
		ctx := context.Background()
		f.task(t, dispatch.TaskSpec{Name: "batch", Order: "id"})
		if r, err := f.e.Get(ctx, "batch", "oliver", 6, fast); err != nil || fmt.Sprint(r.Loans) != "[1 2 3 4 5 6]" {
			t.Fatalf("get: %+v, %v", r, err)
		}
		if r, err := f.e.Get(ctx, "batch", "tracy", 2, fast); err != nil || fmt.Sprint(r.Loans) != "[7 8]" {
			t.Fatalf("get: %+v, %v", r, err)
		}
		refused := func(loans []string, want ...string) error {
			t.Helper()
			before := historyState(t, f)
			_, err := f.e.DisposeMany(ctx, "batch", loans, "oliver", dispatch.Complete, 0, false, dispatch.DispositionNote{})
			if err == nil || problem.ExitCode(err) != problem.ExitUsage {
				t.Fatalf("dispose %v: %v (exit %d); want exit 2", loans, err, problem.ExitCode(err))
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("dispose %v: %q; want it to say %q", loans, err, w)
				}
			}
			if after := historyState(t, f); after != before {
				t.Fatalf("a refused batch changed the database:\nbefore %s\nafter  %s", before, after)
			}
			return err
		}
		// One loan of the list is someone else's: nothing changes, and the
		// message names it, its holder, and how many were refused.
		err := refused(loanKeys(1, 2, 7), "nothing was dispositioned: 1 of the 3 loans is not your active work in task batch",
			"loan 7 in task batch is assigned to tracy, not to oliver")
		var nd *dispatch.NotDisposedError
		if !errors.As(err, &nd) || !nd.Others() || len(nd.Refused) != 1 || nd.Refused[0].Loan != "7" {
			t.Fatalf("refusal %#v; want a NotDisposedError naming loan 7 as someone else's", err)
		}
		if strings.Contains(nd.APIText(), "tracy") || !strings.Contains(nd.APIText(), "loan 7 is not yours") {
			t.Errorf("API text %q names the holder or not the loan", nd.APIText())
		}
		err = refused(loanKeys(9, 1, 8, 10), "3 of the 4 loans", "loan 9 has never been assigned in task batch", "loan 8 in task batch is assigned to tracy",
			"loan 10 has never been assigned")
		if !errors.As(err, &nd) || len(nd.Refused) != 3 || nd.Refused[0].Loan != "9" {
			t.Errorf("refusal %v: %+v", err, nd)
		}
		refused([]string{"1", "2", "1"}, "loan 1 is named twice")
		refused([]string{"1", "01"}, "name the same loan 1 of task batch")
		refused([]string{}, "no loan given")
		refused(make([]string, dispatch.MaxDisposeMany+1), "1001 loans: one disposition takes at most 1000")
		refused([]string{"1", "x"}, `invalid loan id "x" for task batch`)
		// More refusals than are explained one by one: counted.
		many := loanKeys(1, 11, 12, 13, 14, 15, 16, 17, 18)
		refused(many, "8 of the 9 loans", "loan 15 has never been assigned", "and 3 more")

		// All of them: one history event each, in the order given.
		before := f.count(t, "SELECT COUNT(*) FROM loanq_history WHERE event = 'disposed'")
		d, err := f.e.DisposeMany(ctx, "batch", loanKeys(3, 1, 2), "oliver", dispatch.Complete, 0, false, dispatch.DispositionNote{})
		if err != nil || d.Count != 3 || fmt.Sprint(d.Loans) != "[3 1 2]" || d.Task != "batch" || d.User != "oliver" || d.Disposition != dispatch.Complete {
			t.Fatalf("dispose 3 1 2: %+v, %v", d, err)
		}
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_history WHERE event = 'disposed'"); n != before+3 {
			t.Errorf("%d disposed events after disposing of 3 loans, want %d", n, before+3)
		}
		for _, l := range []string{"1", "2", "3"} {
			if n := f.count(t, "SELECT COUNT(*) FROM loanq_history h JOIN loanq_work w ON w.id = h.work_id WHERE w.loan_id = ? AND h.event = 'disposed'", l); n != 1 {
				t.Errorf("loan %s: %d disposed events, want 1", l, n)
			}
		}
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_work WHERE user_name = 'oliver' AND disposition IS NULL"); n != 3 {
			t.Fatalf("oliver has %d active loans, want 3 (4, 5, 6)", n)
		}
		// Not active any more: refused whole, 4 stays active.
		refused(loanKeys(4, 1), "loan 1 in task batch is not active: its last assignment (to oliver) was already dispositioned complete")

		// A return: its time from the database clock, for each loan.
		d, err = f.e.DisposeMany(ctx, "batch", loanKeys(4, 5), "oliver", dispatch.Return, 2*time.Hour, true, dispatch.DispositionNote{Note: "both"})
		if err != nil || d.AfterMS != (2*time.Hour).Milliseconds() || d.AfterSecs != 7200 || d.Note != "both" {
			t.Fatalf("return 4 5: %+v, %v", d, err)
		}
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_work WHERE loan_id IN ('4', '5') AND disposition = 'return' AND note = 'both' AND return_at > disposed_at"); n != 2 {
			t.Errorf("%d of loans 4 and 5 returned with the note and a later return time, want 2", n)
		}
		// One loan in the list disposes of it as Dispose does.
		if d, err := f.e.DisposeMany(ctx, "batch", loanKeys(6), "oliver", dispatch.Never, 0, false, dispatch.DispositionNote{}); err != nil || d.Count != 1 {
			t.Fatalf("dispose 6: %+v, %v", d, err)
		}
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_work WHERE user_name = 'oliver' AND disposition IS NULL"); n != 0 {
			t.Errorf("oliver has %d active loans, want 0", n)
		}
		// An unknown task is one, as for one loan.
		if _, err := f.e.DisposeMany(ctx, "nope", loanKeys(1), "oliver", dispatch.Complete, 0, false, dispatch.DispositionNote{}); !strings.Contains(fmt.Sprint(err), `unknown task "nope"`) {
			t.Errorf("unknown task: %v", err)
		}
		f.audit(t)
	})
}

// The reason rule of migration 00019 holds for each row of a batch: a
// required reason missing, or a code the task does not declare, refuses
// the whole batch (nothing changed, the task's codes named); a declared
// code is kept on every loan.
func TestDisposeManyReasons(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 4)
		ctx := context.Background()
		f.task(t, dispatch.TaskSpec{Name: "why", Order: "id", Reasons: dispatch.Reasons{
			Codes: map[string][]string{dispatch.Never: {"fraud", "duplicate"}}, Required: []string{dispatch.Never}}})
		if _, err := f.e.Get(ctx, "why", "oliver", 3, fast); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ reason, want string }{
			{"", "task why requires a reason for never: add --reason with one of fraud, duplicate"},
			{"typo", `reason "typo" is not one of task why's codes for never: use one of fraud, duplicate`},
		} {
			before := historyState(t, f)
			_, err := f.e.DisposeMany(ctx, "why", loanKeys(1, 2, 3), "oliver", dispatch.Never, 0, false, dispatch.DispositionNote{Reason: c.reason})
			if problem.ExitCode(err) != problem.ExitUsage || !strings.Contains(fmt.Sprint(err), c.want) {
				t.Errorf("reason %q: %v; want exit 2 saying %q", c.reason, err, c.want)
			}
			if after := historyState(t, f); after != before {
				t.Fatalf("reason %q: a refused batch changed the database:\nbefore %s\nafter  %s", c.reason, before, after)
			}
		}
		d, err := f.e.DisposeMany(ctx, "why", loanKeys(1, 2, 3), "oliver", dispatch.Never, 0, false, dispatch.DispositionNote{Reason: "fraud"})
		if err != nil || d.Reason != "fraud" {
			t.Fatalf("never with a declared reason: %+v, %v", d, err)
		}
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_work WHERE reason = 'fraud' AND disposition = 'never'"); n != 3 {
			t.Errorf("%d loans kept the reason, want 3", n)
		}
	})
}

// Text and UUID keys: the list is compared with loanq's text loan_id
// column whatever the task's kind (InLoanIDs), keys that look alike stay
// distinct ("007" and "7"), and a UUID given in upper case is the stored
// lower-case one.
func TestDisposeManyKeysOfAnyType(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 0)
		ctx := context.Background()
		for _, kind := range keyKinds {
			kt := makeKeyTable(t, f, kind, 4)
			name := "many-" + kind.String()
			f.task(t, kt.spec(name, ""))
			r, err := f.e.Get(ctx, name, "oliver", 3, fast)
			if err != nil || len(r.Loans) != 3 {
				t.Fatalf("%s get: %+v, %v", kind, r, err)
			}
			given := []string{r.Loans[0].String(), r.Loans[1].String(), r.Loans[2].String()}
			if kind == loankey.UUID {
				given[0] = strings.ToUpper(given[0])
			}
			d, err := f.e.DisposeMany(ctx, name, given, "oliver", dispatch.Complete, 0, false, dispatch.DispositionNote{})
			if err != nil || d.Count != 3 || d.Loans[0].String() != r.Loans[0].String() || d.Loans[0].Integer {
				t.Fatalf("%s: dispose %v: %+v, %v", kind, given, d, err)
			}
			if n := f.count(t, "SELECT COUNT(*) FROM loanq_work w JOIN loanq_task t ON t.id = w.task_id WHERE t.name = ? AND w.disposition IS NULL", name); n != 0 {
				t.Errorf("%s: %d loans still active", kind, n)
			}
		}
		f.audit(t)
	})
}

// Many callers drain one task, each with its own engine (its own pool,
// as another node would have), by work get --count N + one DisposeMany of
// what it got: every loan is handed out and disposed of exactly once, none
// is active twice, and each work row has its two history events.
func TestDisposeManyDrainConcurrently(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		const loans, callers = 120, 6
		f := setup(t, dsn, loans)
		ctx := context.Background()
		f.task(t, dispatch.TaskSpec{Name: "drain"})
		var wg sync.WaitGroup
		errs := make([]error, callers)
		got := make([]int, callers)
		for i := range callers {
			e := f.engine(t)
			wg.Add(1)
			go func() {
				defer wg.Done()
				user := fmt.Sprintf("p%d", i)
				for {
					r, err := e.Get(ctx, "drain", user, 1+i%4*3, fast)
					if err != nil {
						errs[i] = err
						return
					}
					if len(r.Loans) == 0 {
						return
					}
					ks := loankey.Texts(r.Loans)
					// never: a disposed loan is not handed out again, so the
					// task drains.
					if _, err := e.DisposeMany(ctx, "drain", ks, user, dispatch.Never, 0, false, dispatch.DispositionNote{}); err != nil {
						errs[i] = err
						return
					}
					got[i] += len(ks)
				}
			}()
		}
		wg.Wait()
		sum := 0
		for i := range callers {
			if errs[i] != nil {
				t.Fatalf("caller %d: %v", i, errs[i])
			}
			sum += got[i]
		}
		if sum != loans {
			t.Errorf("callers disposed of %d loans, want %d", sum, loans)
		}
		for q, want := range map[string]int64{
			"SELECT COUNT(*) FROM loanq_work":                             loans,
			"SELECT COUNT(DISTINCT loan_id) FROM loanq_work":              loans,
			"SELECT COUNT(*) FROM loanq_work WHERE disposition = 'never'": loans,
			"SELECT COUNT(*) FROM loanq_history WHERE event = 'assigned'": loans,
			"SELECT COUNT(*) FROM loanq_history WHERE event = 'disposed'": loans,
			"SELECT COUNT(DISTINCT work_id) FROM loanq_history":           loans,
			"SELECT COUNT(*) FROM loanq_work WHERE disposition IS NULL":   0,
		} {
			if n := f.count(t, q); n != want {
				t.Errorf("%s: %d, want %d", q, n, want)
			}
		}
		f.audit(t)
	})
}

// A batch of 50 dispositions is one transaction of one statement: BEGIN,
// DisposeLoans, COMMIT, and one commit, where 50 Dispose calls are 50
// autocommit statements (counted as in TestEngineLoopRoundTrips); a batch
// of one is that one statement, as Dispose sends.
func TestDisposeManyRoundTrips(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 52)
		ctx := context.Background()
		f.task(t, dispatch.TaskSpec{Name: "rt"})
		r, err := f.e.Get(ctx, "rt", "ruth", 52, fast)
		if err != nil || len(r.Loans) != 52 {
			t.Fatalf("get: %+v, %v", r, err)
		}
		cdb, c := countingDB(t, f.db)
		e := dispatch.New(cdb, f.d)
		// Warm: the first disposition of an engine reads the task.
		if _, err := e.DisposeMany(ctx, "rt", []string{r.Loans[0].String()}, "ruth", dispatch.Complete, 0, false, dispatch.DispositionNote{}); err != nil {
			t.Fatal(err)
		}
		c.reset()
		if _, err := e.DisposeMany(ctx, "rt", []string{r.Loans[1].String()}, "ruth", dispatch.Complete, 0, false, dispatch.DispositionNote{}); err != nil {
			t.Fatal(err)
		}
		if got, _ := c.total(); got != 1 || c.commits != 1 {
			t.Errorf("a batch of one: %d round trips and %d commits, want 1 (the UPDATE alone) and 1\n%s", got, c.commits, c.breakdown(1))
		}
		c.reset()
		var ks []string
		for _, l := range r.Loans[2:] {
			ks = append(ks, l.String())
		}
		if d, err := e.DisposeMany(ctx, "rt", ks, "ruth", dispatch.Complete, 0, false, dispatch.DispositionNote{}); err != nil || d.Count != 50 {
			t.Fatalf("dispose 50: %+v, %v", d, err)
		}
		got, prepares := c.total()
		t.Logf("50 dispositions: %d round trips, %d commits, %d prepares\n%s", got, c.commits, prepares, c.breakdown(1))
		if got != 3 || c.commits != 1 {
			t.Errorf("50 dispositions in one call: %d round trips and %d commits, want 3 (BEGIN, the UPDATE, COMMIT) and 1", got, c.commits)
		}
	})
}
