package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// holdTaskLock takes the task lock the way a holder in the middle of its
// criteria query has it: the lease (owned by a process of another host, so
// nobody takes it over) or the task row FOR UPDATE in an open transaction.
// The returned func releases it.
func holdTaskLock(t *testing.T, d drivers.Driver, db *sql.DB, taskID int64, s drivers.Strategy) func() {
	t.Helper()
	ctx := context.Background()
	st := d.Statements()
	if s == drivers.Lease {
		const owner = "elsewhere.example:1"
		if _, err := st.LeaseAcquire.Exec(ctx, db, engineio.LeaseTakeParams{TaskID: taskID, Owner: owner, TTLMS: int64(time.Hour / time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
		lease, err := st.LeaseToken.One(ctx, db, engineio.LeaseOwnerParams{TaskID: taskID, Owner: owner})
		if err != nil {
			t.Fatal(err)
		}
		token := lease.Token
		return func() {
			if _, err := st.LeaseRelease.Exec(ctx, db, engineio.LeaseFenceParams{TaskID: taskID, Owner: owner, Token: token}); err != nil {
				t.Fatal(err)
			}
		}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.LockWait.One(ctx, tx, engineio.TaskParams{TaskID: taskID}); err != nil {
		t.Fatal(err)
	}
	return func() { _ = tx.Rollback() }
}

// requestsOf counts a user's requests of a task: all, and pending ones.
func requestsOf(t *testing.T, d drivers.Driver, db *sql.DB, taskID int64, user string) (all, pending int64) {
	t.Helper()
	all = testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work_request WHERE task_id = ? AND user_name = ?", taskID, user)
	pending = testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work_request WHERE task_id = ? AND user_name = ? AND status = 'pending'", taskID, user)
	return all, pending
}

// waitPending returns the id of user's pending request once it is logged.
func waitPending(t *testing.T, d drivers.Driver, db *sql.DB, taskID int64, user string, p *proc) int64 {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		r, err := d.Statements().RequestPendingFor.One(context.Background(), db, engineio.TaskUserParams{TaskID: taskID, User: user})
		if err == nil {
			return r.ID
		}
		if err != sql.ErrNoRows {
			t.Fatal(err)
		}
		if !p.running() {
			t.Fatalf("%s ended before its request was logged: %+v", user, p.wait())
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no pending request of %s after a minute", user)
	return 0
}

// A signal on a waiting `work get` cancels its request: exit 130 (SIGINT) or
// 143 (SIGTERM), status cancelled, never served; the other pending requests
// are served by the next holder as usual.
func TestSignalCancelsWaitingRequest(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, e := prepare(t, dsn, 40)
		strategies := []drivers.Strategy{drivers.Lease}
		if s := d.Capabilities().Strategies[0]; s != drivers.Lease {
			strategies = append(strategies, s)
		}
		for _, s := range strategies {
			for _, sig := range []struct {
				name string
				sig  syscall.Signal
				code int
			}{{"SIGINT", syscall.SIGINT, 130}, {"SIGTERM", syscall.SIGTERM, 143}} {
				t.Run(string(s)+"/"+sig.name, func(t *testing.T) {
					name := "cancel-" + string(s) + "-" + strings.ToLower(sig.name)
					mustOK(t, dsn, "admin", "task", "create", name, "--where", "eligible = 1", "--order", "priority", "--lock", string(s))
					task, err := e.Task(context.Background(), name)
					if err != nil {
						t.Fatal(err)
					}
					release := holdTaskLock(t, d, e.DB, task.ID, s)
					released := false
					defer func() {
						if !released {
							release()
						}
					}()
					// Another user's request, left pending while the lock is held.
					r := loanq(t, dsn, "other", "--output", "json", "work", "get", name, "--no-wait")
					if r.code != 75 {
						t.Fatalf("other: exit %d, want 75 (lock held)\n%s%s", r.code, r.stdout, r.stderr)
					}
					otherID := decode(t, r).RequestID

					p := startProc(t, dsn, "waiter", 2*time.Minute, append([]string{"--output", "json", "work", "get", name, "--count", "2"}, fastRecheck...)...)
					id := waitPending(t, d, e.DB, task.ID, "waiter", p)
					if err := p.cmd.Process.Signal(sig.sig); err != nil {
						t.Fatal(err)
					}
					res := p.wait()
					if res.code != sig.code {
						t.Fatalf("waiter after %s: exit %d, want %d\n%s%s", sig.name, res.code, sig.code, res.stdout, res.stderr)
					}
					if got := decode(t, res); got.RequestID != id || got.Status != dispatch.StatusCancelled {
						t.Fatalf("waiter printed %+v, want request %d cancelled", got, id)
					}
					if !strings.Contains(res.stderr, "cancelled") || strings.Contains(res.stderr, "context canceled") {
						t.Errorf("the message should say the request was cancelled, in words:\n%s", res.stderr)
					}

					// The holder goes on: the next caller serves every pending
					// request, the cancelled one excepted.
					release()
					released = true
					mustOK(t, dsn, "holder", append([]string{"work", "get", name}, fastRecheck...)...)
					for id, want := range map[int64]string{otherID: dispatch.StatusAssigned, id: dispatch.StatusCancelled} {
						req, err := e.Request(context.Background(), id)
						if err != nil {
							t.Fatal(err)
						}
						if req.Status != want {
							t.Errorf("request %d (%s): %s, want %s", id, req.User, req.Status, want)
						}
						if want == dispatch.StatusCancelled && len(req.Loans) != 0 {
							t.Errorf("cancelled request %d was given loans %v", id, req.Loans)
						}
					}
					if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work WHERE task_id = ? AND user_name = 'waiter'", task.ID); n != 0 {
						t.Errorf("the cancelled waiter holds %d loans", n)
					}
					audit(t, e)
				})
			}
		}
	})
}

// `work cancel`: only the requester cancels; twice changes nothing; a served
// request is printed as served. Asking twice attaches to the pending request.
func TestWorkCancelAndAttach(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, e := prepare(t, dsn, 40)
		s := d.Capabilities().Strategies[0]
		mustOK(t, dsn, "admin", "task", "create", "attach", "--where", "eligible = 1", "--order", "priority", "--lock", string(s))
		task, err := e.Task(context.Background(), "attach")
		if err != nil {
			t.Fatal(err)
		}
		release := holdTaskLock(t, d, e.DB, task.ID, s)

		// Asking twice: one request, the second call attaches and says so.
		first := loanq(t, dsn, "ann", "--output", "json", "work", "get", "attach", "--no-wait", "--count", "2")
		second := loanq(t, dsn, "ann", "--output", "json", "work", "get", "attach", "--no-wait", "--count", "2")
		if first.code != 75 || second.code != 75 {
			t.Fatalf("exit %d and %d, want 75 twice\n%s\n%s", first.code, second.code, first.stderr, second.stderr)
		}
		id := decode(t, first).RequestID
		if got := decode(t, second).RequestID; got != id {
			t.Fatalf("second work get logged request %d, want to attach to %d", got, id)
		}
		if !strings.Contains(second.stderr, fmt.Sprintf("attached to your pending request %d", id)) {
			t.Errorf("the second call does not say it attached:\n%s", second.stderr)
		}
		if all, pending := requestsOf(t, d, e.DB, task.ID, "ann"); all != 1 || pending != 1 {
			t.Fatalf("ann has %d requests (%d pending), want 1", all, pending)
		}

		// Someone else's request: bad input, nothing changed.
		r := loanq(t, dsn, "bob", "work", "cancel", strconv.FormatInt(id, 10))
		if r.code != 2 || !strings.Contains(r.stderr, "only the user who asked") {
			t.Fatalf("bob cancelling ann's request: exit %d, want 2\n%s", r.code, r.stderr)
		}
		for _, bad := range [][]string{{"work", "cancel"}, {"work", "cancel", "x"}, {"work", "cancel", "0"}, {"work", "cancel", "999999"}} {
			if r := loanq(t, dsn, "ann", bad...); r.code != 2 {
				t.Errorf("loanq %v: exit %d, want 2\n%s", bad, r.code, r.stderr)
			}
		}
		if _, pending := requestsOf(t, d, e.DB, task.ID, "ann"); pending != 1 {
			t.Fatal("a refused cancel changed the request")
		}
		r = mustOK(t, dsn, "ann", "--output", "json", "work", "cancel", strconv.FormatInt(id, 10))
		if got := decode(t, r); got.Status != dispatch.StatusCancelled || got.RequestID != id {
			t.Fatalf("work cancel printed %+v", got)
		}
		r = mustOK(t, dsn, "ann", "work", "cancel", strconv.FormatInt(id, 10))
		if !strings.Contains(r.stderr, "already cancelled") {
			t.Errorf("cancelling twice should say so:\n%s", r.stderr)
		}
		// After a cancel, asking again logs a new request.
		third := loanq(t, dsn, "ann", "--output", "json", "work", "get", "attach", "--no-wait")
		if third.code != 75 || decode(t, third).RequestID == id {
			t.Fatalf("work get after the cancel: exit %d, %s", third.code, third.stdout)
		}

		// Many callers of one user at once, processes and goroutines: one
		// pending request, every caller names it.
		const procs, routines = 6, 6
		ids := make([]int64, procs+routines)
		var wg sync.WaitGroup
		for i := 0; i < procs; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				r := loanq(t, dsn, "crowd", "--output", "json", "work", "get", "attach", "--no-wait")
				if r.code != 75 {
					t.Errorf("crowd process %d: exit %d\n%s", i, r.code, r.stderr)
					return
				}
				ids[i] = decode(t, r).RequestID
			}(i)
		}
		for i := 0; i < routines; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				_, db := testdb.Open(t, dsn)
				req, err := newEngine(db, d).Get(context.Background(), "attach", "crowd", 1, dispatch.GetOptions{NoWait: true})
				if req == nil {
					t.Errorf("crowd goroutine %d: %v", i, err)
					return
				}
				ids[procs+i] = req.ID
			}(i)
		}
		wg.Wait()
		for i, got := range ids {
			if got != ids[0] {
				t.Errorf("crowd caller %d got request %d, caller 0 got %d", i, got, ids[0])
			}
		}
		if all, pending := requestsOf(t, d, e.DB, task.ID, "crowd"); all != 1 || pending != 1 {
			t.Fatalf("crowd has %d requests (%d pending), want exactly 1", all, pending)
		}

		// Served before the cancel: printed as served, exit 0, said on stderr.
		release()
		r = mustOK(t, dsn, "crowd", "--output", "json", "work", "status", strconv.FormatInt(ids[0], 10), "--wait")
		if got := decode(t, r); got.Status != dispatch.StatusAssigned {
			t.Fatalf("crowd's request after the release: %+v", got)
		}
		r = mustOK(t, dsn, "crowd", "--output", "json", "work", "cancel", strconv.FormatInt(ids[0], 10))
		if got := decode(t, r); got.Status != dispatch.StatusAssigned || len(got.Loans) != 1 {
			t.Fatalf("cancel of a served request printed %+v", got)
		}
		if !strings.Contains(r.stderr, "served before it could be cancelled") {
			t.Errorf("cancel of a served request should say so:\n%s", r.stderr)
		}
		audit(t, e)
	})
}

// `work run` never attaches: several runner processes of ONE user (a farm of
// robots under one account) each log their own request, so no two of them
// are handed the same answer, and every loan is processed exactly once.
func TestWorkRunSameUserNeverShares(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		const loans = 24
		d, e := prepare(t, dsn, loans)
		mustOK(t, dsn, "admin", "task", "create", "farm", "--order", "priority",
			"--where", "eligible = 1 AND "+d.Dialect().KeyAsText("src.id")+" NOT IN (SELECT loan_id FROM loanq_work WHERE disposition = 'complete')")
		const procs = 4
		var wg sync.WaitGroup
		res := make([]result, procs)
		for i := 0; i < procs; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				res[i] = loanq(t, dsn, "robot", "--output", "json", "work", "run", "farm",
					"--until-empty", "--concurrency", "2", "--count", "2", "--", "sh", "-c", "sleep 0.02")
			}(i)
		}
		wg.Wait()
		seen := map[string]int{}
		for i, r := range res {
			if r.code != 0 {
				t.Fatalf("runner %d: exit %d\n%s%s", i, r.code, r.stdout, r.stderr)
			}
			for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
				if i := strings.Index(line, `"loan_id":`); i >= 0 {
					id := strings.TrimSpace(strings.SplitN(line[i+len(`"loan_id":`):], ",", 2)[0])
					seen[id]++
				}
			}
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("loan %s processed %d times", id, n)
			}
		}
		if len(seen) != loans {
			t.Errorf("%d loans processed, want %d", len(seen), loans)
		}
		if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work WHERE disposition = 'complete'"); n != loans {
			t.Errorf("%d assignments completed, want %d (one per loan)", n, loans)
		}
		audit(t, e)
	})
}

// A holder interrupted while it serves (here in its criteria query) rolls
// back: nothing is assigned by it, it says the pending requests stay pending
// (not that the database failed), its own request is cancelled, and another
// caller's pending request is served afterwards as usual.
func TestSignalWhileServing(t *testing.T) {
	// No t.Parallel: the signal must come while the holder is in its query, 2 s after the lock is seen held; a loaded machine could delay the holder past that.
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, e := prepare(t, dsn, 20)
		strategies := []drivers.Strategy{drivers.Lease}
		if s := d.Capabilities().Strategies[0]; s != drivers.Lease {
			strategies = append(strategies, s)
		}
		for _, s := range strategies {
			t.Run(string(s), func(t *testing.T) {
				name := "serving-" + string(s)
				mustOK(t, dsn, "admin", "task", "create", name, "--where", "eligible = 1", "--order", "priority",
					"--lock", string(s), "--query-delay", "1m")
				task, err := e.Task(context.Background(), name)
				if err != nil {
					t.Fatal(err)
				}
				release := holdTaskLock(t, d, e.DB, task.ID, s)
				r := loanq(t, dsn, "other", "--output", "json", "work", "get", name, "--no-wait")
				release()
				if r.code != 75 {
					t.Fatalf("other: exit %d, want 75\n%s", r.code, r.stderr)
				}
				otherID := decode(t, r).RequestID

				p := startProc(t, dsn, "holder", 2*time.Minute, "--output", "json", "work", "get", name)
				deadline := time.Now().Add(time.Minute)
				for !lockHeld(t, d, e, task.ID, s) {
					if !p.running() || time.Now().After(deadline) {
						t.Fatalf("the holder never took the lock: %+v", p.wait())
					}
					time.Sleep(10 * time.Millisecond)
				}
				// The NOWAIT probe of lockHeld takes the lock for an instant:
				// a holder that tried right then was told busy and queued, and
				// is granted the lock a moment later. Give it that moment, so
				// that it is serving (its 1-minute query) when the signal comes:
				// 500 ms was once too short in a full make test (the holder was
				// still waiting), and 2 s of a 1-minute query costs nothing.
				time.Sleep(2 * time.Second)
				if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
					t.Fatal(err)
				}
				res := p.wait()
				if res.code != 130 {
					t.Fatalf("holder after SIGINT: exit %d, want 130\n%s%s", res.code, res.stdout, res.stderr)
				}
				msg := strings.ToLower(res.stderr)
				if !strings.Contains(msg, "interrupted while serving") || !strings.Contains(msg, "stay pending") ||
					strings.Contains(msg, "database") || strings.Contains(msg, "context canceled") {
					t.Errorf("the holder should say it was interrupted and the requests stay pending:\n%s", res.stderr)
				}
				if got := decode(t, res); got.Status != dispatch.StatusCancelled {
					t.Errorf("the holder's own request: %+v, want cancelled", got)
				}
				if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work WHERE task_id = ?", task.ID); n != 0 {
					t.Fatalf("the interrupted holder assigned %d loans", n)
				}
				if ids := pendingIDs(t, d, e, task.ID); len(ids) != 1 || ids[0] != otherID {
					t.Fatalf("pending after the interrupt: %v, want other's %d only", ids, otherID)
				}
				lockFree(t, d, e, task.ID, s)
				mustOK(t, dsn, "admin", "task", "update", name, "--query-delay", "0s")
				got := decode(t, mustOK(t, dsn, "other", append([]string{"--output", "json", "work", "status", strconv.FormatInt(otherID, 10), "--wait"}, fastRecheck...)...))
				if got.Status != dispatch.StatusAssigned || len(got.Loans) != 1 {
					t.Fatalf("other's request after the interrupted holder: %+v", got)
				}
				audit(t, e)
			})
		}
	})
}
