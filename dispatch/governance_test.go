package dispatch_test

import (
	"context"
	"fmt"
	"github.com/loanq/loanq/loankey"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/internal/testkit/testdb"
	"github.com/loanq/loanq/problem"
)

// Entitlements (docs/governance.md): a task with an allow list is worked
// only by the users and groups it names; group changes and --allow-clear
// take effect at the next get; WorkableTasks lists what a user may work.
func TestEntitlements(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		f := setup(t, dsn, 20)
		f.task(t, dispatch.TaskSpec{Name: "open"})
		f.task(t, dispatch.TaskSpec{Name: "big", Governance: dispatch.GovernanceChange{Allow: []string{"@seniors", "carl"}}})

		notAllowed := func(user string) {
			t.Helper()
			_, err := f.e.Get(ctx, "big", user, 1, fast)
			if !dispatch.IsNotAllowed(err) || problem.KindOf(err) != problem.Usage {
				t.Fatalf("%s's get of big: %v, want not allowed (bad input)", user, err)
			}
			if want := "user " + user + " is not allowed to work task big; ask an admin: loanq task update big --allow " + user; !strings.Contains(err.Error(), want) {
				t.Errorf("message %q does not say %q", err, want)
			}
			if err := f.e.Admin().MayWork(ctx, "big", user); !dispatch.IsNotAllowed(err) {
				t.Errorf("MayWork(big, %s): %v, want not allowed", user, err)
			}
		}
		allowed := func(user string) {
			t.Helper()
			req, err := f.e.Get(ctx, "big", user, 1, fast)
			if err != nil || req.Assigned != 1 {
				t.Fatalf("%s's get of big: %+v, %v; want 1 loan", user, req, err)
			}
		}
		workable := func(user string, want ...string) {
			t.Helper()
			ts, err := f.e.WorkableTasks(ctx, user)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, x := range ts {
				got = append(got, x.Name)
			}
			if !slices.Equal(got, want) {
				t.Errorf("WorkableTasks(%s) = %v, want %v", user, got, want)
			}
		}

		notAllowed("ana")
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_work_request WHERE user_name = 'ana'"); n != 0 {
			t.Errorf("a refused get logged %d request(s)", n)
		}
		workable("ana", "open")
		allowed("carl") // by name
		workable("carl", "big", "open")

		if _, err := f.e.Admin().GroupAdd(ctx, "seniors", []string{"ana"}, "admin"); err != nil {
			t.Fatal(err)
		}
		allowed("ana") // through the group
		workable("ana", "big", "open")
		if _, err := f.e.Admin().GroupRemove(ctx, "seniors", []string{"ana"}); err != nil {
			t.Fatal(err)
		}
		notAllowed("ana")

		// A pending request of a user who lost the right after asking: a
		// recheck (work status) says so instead of serving it, and the
		// next round answers it empty (the database would refuse its work
		// rows) while it serves the others.
		if _, err := f.e.Admin().GroupAdd(ctx, "seniors", []string{"dora"}, "admin"); err != nil {
			t.Fatal(err)
		}
		big, err := f.e.Task(ctx, "big")
		if err != nil {
			t.Fatal(err)
		}
		doraID, err := f.d.Statements().RequestInsert.InsertID(ctx, f.db, engineio.RequestInsertParams{TaskID: big.ID, User: "dora", Requested: 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.e.Admin().GroupRemove(ctx, "seniors", []string{"dora"}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.e.Status(ctx, doraID, true, fast); !dispatch.IsNotAllowed(err) {
			t.Errorf("work status of dora's pending request after she left seniors: %v, want not allowed", err)
		}
		allowed("carl")
		if r, err := f.e.Request(ctx, doraID); err != nil || r.Status != dispatch.StatusEmpty || r.Assigned != 0 {
			t.Errorf("dora's request after carl's round: %+v %v, want empty", r, err)
		}

		if _, err := f.e.Admin().UpdateTask(ctx, "big", dispatch.TaskChange{UpdatedBy: "admin", Governance: dispatch.GovernanceChange{AllowClear: true}}); err != nil {
			t.Fatal(err)
		}
		allowed("ana") // --allow-clear: everyone
		workable("ana", "big", "open")
		if big, err = f.e.Task(ctx, "big"); err != nil {
			t.Fatal(err)
		}
		if gov, err := f.e.Admin().TaskGovernance(ctx, big); err != nil || len(gov.Allow) != 0 {
			t.Errorf("after --allow-clear the allow list is %v (%v)", gov.Allow, err)
		}
		f.audit(t)
	})
}

// Four eyes in a round (docs/governance.md): one criteria query serves
// both requesters; the loan ana worked in maker goes to bob, and ana gets
// the first loan she did not work.
func TestFourEyesRoundGivesTheLoanToTheOtherRequester(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		f := setup(t, dsn, 20)
		f.task(t, dispatch.TaskSpec{Name: "maker"})
		strategy := f.d.Capabilities().Strategies[0] // skip, or lease on SQLite: a round
		checker := f.task(t, dispatch.TaskSpec{Name: "checker", Lock: strategy, Governance: dispatch.GovernanceChange{NotWorkedIn: []string{"maker"}}})
		workAndComplete(t, f, "maker", "ana", 3) // loans 1, 2, 3

		// bob asks while ana's round runs, after its query: the round serves
		// both (step 5 of docs/algorithm.md).
		e := f.engine(t)
		var bobID int64
		e.SetAfterQuery(func() {
			if bobID != 0 {
				return
			}
			id, err := f.d.Statements().RequestInsert.InsertID(ctx, f.db, engineio.RequestInsertParams{TaskID: checker.ID, User: "bob", Requested: 1})
			if err != nil {
				t.Error(err)
			}
			bobID = id
		})
		ana, err := e.Get(ctx, "checker", "ana", 1, fast)
		if err != nil {
			t.Fatal(err)
		}
		if got := keys(ana.Loans); !slices.Equal(got, []string{"4"}) {
			t.Errorf("ana got %v in checker, want [4]: she worked 1, 2 and 3 in maker", got)
		}
		bob, err := f.e.Request(ctx, bobID)
		if err != nil {
			t.Fatal(err)
		}
		if got := keys(bob.Loans); bob.Status != dispatch.StatusAssigned || !slices.Equal(got, []string{"1"}) {
			t.Errorf("bob's request: %s %v, want assigned [1] in ana's round (the loan ana may not have)", bob.Status, got)
		}
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_query_run WHERE task_id = ? AND requests_served = 2", checker.ID); n != 1 {
			t.Errorf("%d criteria-query runs served both requests, want 1", n)
		}
		f.audit(t)
	})
}

// A task's four-eyes rule holds on every way of serving it: rounds of each
// strategy, rows claims, pool claims; when the first candidates are all
// loans the user worked in the named task, the round or claim looks
// further (the query fetches more) instead of answering short or leaving
// the request pending.
func TestFourEyesEveryStrategyLooksPastWorkedLoans(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		f := setup(t, dsn, 40)
		f.task(t, dispatch.TaskSpec{Name: "maker"})
		workAndComplete(t, f, "maker", "ana", 15) // loans 1-15: more than a round's first query fetches for 1
		type variant struct {
			name string
			spec dispatch.TaskSpec
		}
		var vs []variant
		for _, s := range f.d.Capabilities().Strategies {
			vs = append(vs, variant{string(s), dispatch.TaskSpec{Lock: s}})
		}
		vs = append(vs, variant{"pool", dispatch.TaskSpec{Prefetch: 20}})
		for _, v := range vs {
			spec := v.spec
			spec.Name = "checker-" + v.name
			spec.Governance = dispatch.GovernanceChange{NotWorkedIn: []string{"maker"}}
			task := f.task(t, spec)
			if spec.Prefetch > 0 {
				if _, err := f.e.Refill(ctx, task, true); err != nil {
					t.Fatal(err)
				}
			}
			o := fast
			o.Timeout = 20 * time.Second // a request left pending fails here, not after minutes
			ana, err := f.e.Get(ctx, spec.Name, "ana", 2, o)
			if err != nil {
				t.Fatalf("%s: ana's get: %v", v.name, err)
			}
			if got := keys(ana.Loans); !slices.Equal(got, []string{"16", "17"}) {
				t.Errorf("%s: ana got %v (%s), want [16 17]: she worked 1-15 in maker", v.name, got, ana.Status)
			}
			bob, err := f.e.Get(ctx, spec.Name, "bob", 2, o)
			if err != nil {
				t.Fatalf("%s: bob's get: %v", v.name, err)
			}
			if got := keys(bob.Loans); !slices.Equal(got, []string{"1", "2"}) {
				t.Errorf("%s: bob got %v, want [1 2]: nobody else worked them", v.name, got)
			}
		}
		f.audit(t)
	})
}

// explain shows the four-eyes rule where it is applied: in a rows claim's
// criteria (for the explaining user), after a round's criteria query.
func TestFourEyesExplainShowsTheRule(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		f := setup(t, dsn, 10)
		f.task(t, dispatch.TaskSpec{Name: "maker"})
		for _, s := range f.d.Capabilities().Strategies {
			name := "checker-" + string(s)
			f.task(t, dispatch.TaskSpec{Name: name, Lock: s, Governance: dispatch.GovernanceChange{NotWorkedIn: []string{"maker"}}})
			x, err := f.e.ExplainFor(ctx, name, 1, "o'neil")
			if err != nil {
				t.Fatal(err)
			}
			var all []string
			for _, st := range x.Statements {
				all = append(all, st.Purpose+"\n"+st.SQL)
			}
			text := strings.Join(all, "\n")
			if !strings.Contains(text, "loanq_task_not_worked_in") {
				t.Errorf("%s: explain does not show the four-eyes rule:\n%s", s, text)
			}
			if s == drivers.Rows && !strings.Contains(text, "loanq_w4.user_name = ") {
				t.Errorf("%s: the claim's criteria do not name the explaining user:\n%s", s, text)
			}
			if s != drivers.Rows && !strings.Contains(text, "four eyes (--not-worked-in)") {
				t.Errorf("%s: no four-eyes statement after the round's query:\n%s", s, text)
			}
		}
	})
}

// A user name with quotes and backslashes is carried safely in a claim's
// criteria (Dialect.TextLiteral): the rule applies to that user, and the
// claim runs.
func TestFourEyesOddUserNameInClaim(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		f := setup(t, dsn, 10)
		if !drivers.Supports(f.d, drivers.Rows) {
			t.Skip("no rows strategy")
		}
		f.task(t, dispatch.TaskSpec{Name: "maker"})
		f.task(t, dispatch.TaskSpec{Name: "checker", Lock: drivers.Rows, Governance: dispatch.GovernanceChange{NotWorkedIn: []string{"maker"}}})
		user := `o'ne\il'); --`
		workAndComplete(t, f, "maker", user, 1)
		got, err := f.e.Get(ctx, "checker", user, 1, fast)
		if err != nil {
			t.Fatal(err)
		}
		if k := keys(got.Loans); !slices.Equal(k, []string{"2"}) {
			t.Errorf("%q got %v, want [2]", user, k)
		}
	})
}

// workAndComplete gets n loans of task for user and completes them.
func workAndComplete(t *testing.T, f *fixture, task, user string, n int) {
	t.Helper()
	ctx := context.Background()
	req, err := f.e.Get(ctx, task, user, n, fast)
	if err != nil || req.Assigned != n {
		t.Fatalf("%s getting %d of %s: %+v %v", user, n, task, req, err)
	}
	for _, k := range req.Loans {
		if _, err := f.e.Dispose(ctx, task, k.String(), user, "complete", 0, false); err != nil {
			t.Fatal(err)
		}
	}
}

func keys(ks []loankey.Key) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = fmt.Sprint(k.String())
	}
	return out
}

// work next asks only the tasks a user may work: a task of higher priority
// whose allow list leaves the caller out is passed over without a request
// (none logged, nothing refused), while a user it lets in gets its loans
// first.
func TestWorkNextOnlyAsksWorkableTasks(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		f := setup(t, dsn, 20)
		f.task(t, dispatch.TaskSpec{Name: "open", Where: "id > 10", Order: "id"})
		f.task(t, dispatch.TaskSpec{Name: "big", Where: "id <= 10", Order: "id", Priority: 10,
			Governance: dispatch.GovernanceChange{Allow: []string{"carl"}}})
		opt := dispatch.NextOptions{Backoff: fast.Backoff, Timeout: 10 * time.Second}
		ans, err := f.e.Next(ctx, "ana", 2, opt)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range ans.Work {
			if w.Task != "open" {
				t.Errorf("ana's work next handed out loan %s of %s, which she may not work", w.LoanID, w.Task)
			}
		}
		for _, tried := range ans.Tried {
			if tried.Task == "big" {
				t.Errorf("ana's work next asked big: %+v", tried)
			}
		}
		if ans.Assigned != 2 {
			t.Errorf("ana's work next: %d loans, want 2 from open", ans.Assigned)
		}
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_work_request r JOIN loanq_task k ON k.id = r.task_id WHERE k.name = 'big'"); n != 0 {
			t.Errorf("work next logged %d request(s) in big for a user big does not allow", n)
		}
		ans, err = f.e.Next(ctx, "carl", 1, opt)
		if err != nil {
			t.Fatal(err)
		}
		if len(ans.Work) != 1 || ans.Work[0].Task != "big" {
			t.Errorf("carl's work next: %+v, want one loan of big (priority 10)", ans.Work)
		}
	})
}
