package e2e

import (
	"fmt"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// Cancel with a candidate pool (docs/algorithm.md, "The candidate pool":
// cancel and attach keep holding with a pool). The pool is empty and a holder runs the task's
// 3 s criteria query; meanwhile requests of the prefetch task wait. One is
// cancelled with `work cancel`, one by SIGINT on its waiting `work get`; one
// left by `work get --no-wait` is rechecked by `work status ID --wait`; one
// plain caller waits. After the holder's round, on the database: the
// cancelled requests are cancelled with no loans, the others are served, and
// the pool holds the first eligible loans nobody holds in the criteria order
// — what the cancelled requests would have had stays available, and the next
// get is served those from the pool.
func TestPoolCancelAndStatusWait(t *testing.T) {
	// No t.Parallel: four callers, a --no-wait caller and two cancels must all land inside the holder's 3 s criteria query.
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, e := prepare(t, dsn, 80)
		mustOK(t, dsn, "admin", "task", "create", "heavy", "--where", "eligible = 1", "--order", "priority",
			"--query-delay", "3s", "--prefetch", "20")
		id := taskID(t, e, "heavy")
		get := func(user string, count int, extra ...string) *proc {
			args := append([]string{"-o", "json", "work", "get", "heavy", "--count", strconv.Itoa(count)}, fastRecheck...)
			return startProc(t, dsn, user, 2*time.Minute, append(args, extra...)...)
		}
		started := time.Now()
		holder := get("holder", 1)
		waitPending(t, d, e.DB, id, "holder", holder)

		ann := get("ann", 3)
		annID := waitPending(t, d, e.DB, id, "ann", ann)
		sig := get("sig", 3)
		sigID := waitPending(t, d, e.DB, id, "sig", sig)
		carl := get("carl", 2)
		waitPending(t, d, e.DB, id, "carl", carl)
		left := loanq(t, dsn, "eve", "-o", "json", "work", "get", "heavy", "--count", "2", "--no-wait")
		if left.code != 75 {
			t.Fatalf("eve --no-wait while the query runs: exit %d, want 75\n%s%s", left.code, left.stdout, left.stderr)
		}
		eveID := decode(t, left).RequestID
		status := startProc(t, dsn, "eve", 2*time.Minute, append([]string{"-o", "json", "work", "status", strconv.FormatInt(eveID, 10), "--wait"}, fastRecheck...)...)

		cancelled := decode(t, mustOK(t, dsn, "ann", "-o", "json", "work", "cancel", strconv.FormatInt(annID, 10)))
		if cancelled.Status != dispatch.StatusCancelled || len(cancelled.Loans) != 0 {
			t.Fatalf("work cancel %d: %+v", annID, cancelled)
		}
		if err := sig.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		if r := sig.wait(); r.code != 130 || decode(t, r).Status != dispatch.StatusCancelled {
			t.Fatalf("sig after SIGINT: exit %d, want 130 and cancelled\n%s%s", r.code, r.stdout, r.stderr)
		}
		if r := ann.wait(); r.code == 0 && decode(t, r).Assigned != 0 {
			t.Fatalf("ann's waiting get after its request was cancelled: %s", r.stdout)
		}
		if time.Since(started) > 3*time.Second {
			t.Logf("the cancels landed %s after the holder started: the holder's 3 s query may have ended first", time.Since(started))
		}

		served := map[string]request{}
		for user, p := range map[string]*proc{"holder": holder, "carl": carl, "eve": status} {
			r := p.wait()
			if r.code != 0 {
				t.Fatalf("%s: exit %d\n%s%s", user, r.code, r.stdout, r.stderr)
			}
			got := decode(t, r)
			if got.Status != dispatch.StatusAssigned || got.User != user {
				t.Fatalf("%s: %+v, want assigned", user, got)
			}
			served[user] = got
		}
		if served["eve"].RequestID != eveID || served["eve"].Assigned != 2 {
			t.Errorf("work status %d --wait printed %+v, want the request served with 2 loans", eveID, served["eve"])
		}

		for _, rq := range []struct {
			user string
			id   int64
		}{{"ann", annID}, {"sig", sigID}} {
			req, err := e.Request(t.Context(), rq.id)
			if err != nil {
				t.Fatal(err)
			}
			if req.Status != dispatch.StatusCancelled || req.Assigned != 0 || len(req.Loans) != 0 {
				t.Errorf("%s's cancelled request %d: %+v", rq.user, rq.id, req)
			}
			if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work WHERE task_id = ? AND user_name = ?", id, rq.user); n != 0 {
				t.Errorf("%s, cancelled, holds %d loans", rq.user, n)
			}
		}
		if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work_request WHERE task_id = ? AND status = 'pending'", id); n != 0 {
			t.Errorf("%d requests still pending", n)
		}
		// Holder 1, carl 2, eve 2: five loans out, the first five in the
		// criteria order; the pool is the next 20.
		var out []int64
		for _, u := range []string{"holder", "carl", "eve"} {
			out = append(out, served[u].Loans...)
		}
		slices.Sort(out)
		if fmt.Sprint(out) != "[1 2 3 4 5]" {
			t.Errorf("loans handed out: %v, want the first five, 1..5", out)
		}
		want := make([]string, 20)
		for i := range want {
			want[i] = strconv.Itoa(6 + i)
		}
		if pool := poolKeys(t, d, e.DB, id); !slices.Equal(pool, want) {
			t.Errorf("pool after the cancels: %v\nwant %v", pool, want)
		}
		runs := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_query_run WHERE task_id = ?", id)
		next := decode(t, mustOK(t, dsn, "dave", "-o", "json", "work", "get", "heavy", "--count", "3"))
		if fmt.Sprint(next.Loans) != "[6 7 8]" {
			t.Errorf("the next get: %+v, want loans 6, 7, 8 from the pool", next)
		}
		if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_query_run WHERE task_id = ?", id); n != runs {
			t.Errorf("the next get ran the criteria query: it was not served from the pool")
		}
		if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work_request WHERE id = ? AND pooled = 1", next.RequestID); n != 1 {
			t.Errorf("the next get is not recorded as a pool hit")
		}
		audit(t, e)
	})
}
