package dispatch_test

import (
	"context"
	"fmt"
	"github.com/loanq/loanq/loankey"
	"strings"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/testkit/testdb"
	"github.com/loanq/loanq/problem"
)

// borrowerLoans makes a source with columns to show: ids 1..n, a borrower
// (loan 2's holds markup and URL metacharacters, loan 3's is NULL) and an
// amount.
func borrowerLoans(t *testing.T, f *fixture, n int) {
	t.Helper()
	tb := f.d.Tables()
	testdb.Exec(t, f.d, f.db, fmt.Sprintf("CREATE TABLE borrower_loan (id %s PRIMARY KEY, kind %s, borrower %s, amount DECIMAL(12,2))",
		tb.BigInt, strings.ReplaceAll(tb.Text, "%d", "20"), strings.ReplaceAll(tb.Text, "%d", "100")))
	for i := 1; i <= n; i++ {
		var borrower any = fmt.Sprintf("Borrower %d", i)
		switch i {
		case 2:
			borrower = `<b onmouseover="x">Bo & Co/é?</b>`
		case 3:
			borrower = nil
		}
		kind := []string{"big", "bank", "call"}[i%3]
		testdb.Exec(t, f.d, f.db, "INSERT INTO borrower_loan (id, kind, borrower, amount) VALUES (?, ?, ?, ?)", i, kind, borrower, fmt.Sprintf("%d.50", 1000*i))
	}
}

// TestLoanDetails: --show and --link are checked when a task is created or
// changed (a column not in the source, a placeholder that is not {key} or
// a shown column: bad input, nothing stored), and every answer that hands
// out or lists loans carries each loan's shown columns and link, read from
// the source: work get, work status, pipeline.
func TestLoanDetails(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		f := setup(t, dsn, 0)
		borrowerLoans(t, f, 6)
		before := snapshot(t, f)
		for _, bad := range []dispatch.TaskSpec{
			{Name: "bad-col", Source: "borrower_loan", Where: "1 = 1", Show: []string{"borrower", "nosuch"}},
			{Name: "bad-link", Source: "borrower_loan", Where: "1 = 1", Show: []string{"borrower"}, Link: "https://los.example/{amount}"},
			{Name: "bad-scheme", Source: "borrower_loan", Where: "1 = 1", Link: "ftp://los.example/{key}"},
			{Name: "bad-priority", Source: "borrower_loan", Where: "1 = 1", Priority: dispatch.MaxPriority + 1},
		} {
			bad.CreatedBy = "admin"
			if _, _, err := f.e.Admin().CreateTask(ctx, bad); problem.KindOf(err) != problem.Usage {
				t.Errorf("%s: %v, want bad input", bad.Name, err)
			}
		}
		if after := snapshot(t, f); after != before {
			t.Errorf("refused tasks changed the database: %s → %s", before, after)
		}
		task := f.task(t, dispatch.TaskSpec{Name: "verify", Source: "borrower_loan", Where: "kind IS NOT NULL", Order: "id",
			Show: []string{"borrower", "amount"}, Link: "https://los.example/loans/{key}?b={borrower}", Priority: 3})
		if task.Priority != 3 || strings.Join(task.Show, ",") != "borrower,amount" || task.Link != "https://los.example/loans/{key}?b={borrower}" {
			t.Fatalf("stored task: priority %d show %v link %q", task.Priority, task.Show, task.Link)
		}
		req, err := f.e.Get(ctx, "verify", "ann", 3, fast)
		if err != nil {
			t.Fatal(err)
		}
		if len(req.Work) != 3 {
			t.Fatalf("work get: %d work items for %d loans", len(req.Work), len(req.Loans))
		}
		want := map[string]struct{ borrower, link string }{
			"1": {"Borrower 1", "https://los.example/loans/1?b=Borrower%201"},
			"2": {`<b onmouseover="x">Bo & Co/é?</b>`, "https://los.example/loans/2?b=%3Cb%20onmouseover%3D%22x%22%3EBo%20%26%20Co%2F%C3%A9%3F%3C%2Fb%3E"},
			"3": {"", "https://los.example/loans/3?b="},
		}
		check := func(what string, key loankey.Key, d dispatch.Details, link *string) {
			t.Helper()
			w, ok := want[key.String()]
			if !ok {
				t.Errorf("%s: unexpected loan %s", what, key)
				return
			}
			if len(d) != 2 || d[0].Column != "borrower" || d[1].Column != "amount" {
				t.Fatalf("%s: loan %s details %+v", what, key, d)
			}
			got := ""
			if d[0].Value != nil {
				got = *d[0].Value
			}
			if got != w.borrower || (key.String() == "3") != (d[0].Value == nil) {
				t.Errorf("%s: loan %s borrower %q, want %q", what, key, got, w.borrower)
			}
			if d[1].Value == nil || !strings.HasPrefix(*d[1].Value, key.String()+"000.5") {
				t.Errorf("%s: loan %s amount %v", what, key, d[1].Value)
			}
			if link == nil || *link != w.link {
				t.Errorf("%s: loan %s link %v, want %s", what, key, link, w.link)
			}
		}
		for i, it := range req.Work {
			if it.Task != "verify" || it.RequestID != req.ID || it.LoanID != req.Loans[i] {
				t.Errorf("work get item %d: %+v", i, it)
			}
			check("work get", it.LoanID, it.Details, it.Link)
		}
		st, err := f.e.Status(ctx, req.ID, false, fast)
		if err != nil || len(st.Work) != 3 {
			t.Fatalf("work status: %v, %+v", err, st)
		}
		for _, it := range st.Work {
			check("work status", it.LoanID, it.Details, it.Link)
		}
		pipe, err := f.e.Pipeline(ctx, "ann", "")
		if err != nil || len(pipe) != 3 {
			t.Fatalf("pipeline: %v, %d items", err, len(pipe))
		}
		for _, it := range pipe {
			check("pipeline", it.LoanID, it.Details, it.Link)
		}
		// Update: dropping a column the link uses is refused; clearing
		// both works, and the answers then carry empty details, no link.
		empty := []string{}
		if _, err := f.e.Admin().UpdateTask(ctx, "verify", dispatch.TaskChange{Show: &empty}); problem.KindOf(err) != problem.Usage {
			t.Errorf("update dropping a linked column: %v, want bad input", err)
		}
		nolink := ""
		up, err := f.e.Admin().UpdateTask(ctx, "verify", dispatch.TaskChange{Show: &empty, Link: &nolink})
		if err != nil || len(up.Show) != 0 || up.Link != "" || up.Priority != 3 {
			t.Fatalf("update clearing show and link: %v %+v", err, up)
		}
		pipe, _ = f.e.Pipeline(ctx, "ann", "verify")
		for _, it := range pipe {
			if len(it.Details) != 0 || it.Link != nil {
				t.Errorf("pipeline after clearing: %+v", it)
			}
		}
	})
}

// TestWorkNextAcrossTasks: work next asks the tasks by priority, then the
// task waiting longest; fills a count across tasks; passes over a task
// whose lock another caller holds while another task has work (answering
// at once, not after the holder); waits for it only when it is the one
// with work, and says which task each loan came from.
func TestWorkNextAcrossTasks(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		f := setup(t, dsn, 0)
		borrowerLoans(t, f, 12) // 4 big, 4 bank, 4 call
		f.task(t, dispatch.TaskSpec{Name: "big", Source: "borrower_loan", Where: "kind = 'big'", Order: "id", Priority: 10, Show: []string{"borrower"}})
		f.task(t, dispatch.TaskSpec{Name: "bank", Source: "borrower_loan", Where: "kind = 'bank'", Order: "id", Priority: 5})
		f.task(t, dispatch.TaskSpec{Name: "call", Source: "borrower_loan", Where: "kind = 'call'", Order: "id", Priority: 5,
			QueryDelay: 1500 * time.Millisecond})
		opt := dispatch.NextOptions{Backoff: fast.Backoff, Timeout: time.Minute}
		ans, err := f.e.Next(ctx, "ann", 6, opt)
		if err != nil {
			t.Fatal(err)
		}
		tasks := func(a *dispatch.NextAnswer) string {
			var s []string
			for _, w := range a.Work {
				s = append(s, w.Task)
			}
			return strings.Join(s, ",")
		}
		// bank and call tie on priority; neither was ever asked, so the
		// older (bank, created first) comes first.
		if got := tasks(ans); got != "big,big,big,big,bank,bank" || ans.Status != dispatch.StatusAssigned {
			t.Fatalf("work next 6: %s (%s)", got, ans.Status)
		}
		if len(ans.Work[0].Details) != 1 || ans.Work[4].Details == nil || len(ans.Work[4].Details) != 0 {
			t.Errorf("details: big %+v, bank %+v", ans.Work[0].Details, ans.Work[4].Details)
		}
		for _, w := range ans.Work {
			if n := f.count(t, `SELECT COUNT(*) FROM loanq_work w JOIN loanq_task k ON k.id = w.task_id
				WHERE k.name = ? AND w.loan_id = ? AND w.user_name = 'ann' AND w.disposition IS NULL`, w.Task, w.LoanID.String()); n != 1 {
				t.Errorf("loan %s of %s is not ann's active work in the database", w.LoanID, w.Task)
			}
		}
		// call is now the task waiting longest among the priority-5 ones
		// (bank was just asked), but its holder is busy for 1.5 s: bob's
		// work next passes over it and takes bank's last two at once.
		hold := make(chan error, 1)
		go func() {
			_, err := f.engine(t).Get(ctx, "call", "cy", 1, fast)
			hold <- err
		}()
		time.Sleep(400 * time.Millisecond) // cy holds call's lock in its query
		start := time.Now()
		ans, err = f.e.Next(ctx, "bob", 3, opt)
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if got := tasks(ans); got != "bank,bank" || ans.Status != dispatch.StatusPartial {
			t.Errorf("bob's work next with call busy: %q (%s), tried %+v", got, ans.Status, ans.Tried)
		}
		if took > time.Second {
			t.Errorf("bob waited %s for a busy task while another had work", took)
		}
		busy := false
		for _, tr := range ans.Tried {
			busy = busy || (tr.Task == "call" && tr.Status == dispatch.StatusBusy)
		}
		if !busy {
			t.Errorf("bob's answer does not say call was busy: %+v", ans.Tried)
		}
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_work_request WHERE user_name = 'bob' AND status = 'pending'"); n != 0 {
			t.Errorf("bob left %d pending request(s) behind", n)
		}
		if err := <-hold; err != nil {
			t.Fatal(err)
		}
		// Now only call has work: dee's work next waits for it when busy.
		go func() {
			_, err := f.engine(t).Get(ctx, "call", "cy", 1, fast)
			hold <- err
		}()
		time.Sleep(400 * time.Millisecond)
		noWait := opt
		noWait.NoWait = true
		ans, err = f.e.Next(ctx, "dee", 1, noWait)
		if problem.KindOf(err) != problem.Busy || ans == nil || ans.Status != dispatch.StatusBusy {
			t.Errorf("dee's work next --no-wait with only a busy task: %v %+v, want busy", err, ans)
		}
		ans, err = f.e.Next(ctx, "dee", 1, opt)
		if err != nil || tasks(ans) != "call" {
			t.Errorf("dee's waiting work next: %v %+v", err, ans)
		}
		if err := <-hold; err != nil {
			t.Fatal(err)
		}
		// Everything handed out: empty, exit 0.
		f.e.Next(ctx, "eve", 10, opt)
		ans, err = f.e.Next(ctx, "eve", 1, opt)
		if err != nil || ans.Status != dispatch.StatusEmpty || len(ans.Tried) != 3 {
			t.Errorf("work next with no work left: %v %+v", err, ans)
		}
		f.audit(t)
	})
}
