package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// stopHoldLimit is the hold limit of the stopped-holder tests: longer than
// their 2 s query delay, short enough to keep the test quick.
const stopHoldLimit = 4 * time.Second

// A holder stopped with SIGSTOP in the middle of its criteria query — a hung
// node, a paused VM, a long GC pause — keeps its session idle inside the lock
// transaction. The task's hold limit makes the server end that session: the
// lock is free again within the limit, a waiting caller is served, and the
// holder, resumed after the limit with SIGCONT, fails with exit 1 and one
// line that says why, having committed nothing; its own request was served by
// the other caller. PostgreSQL: idle_in_transaction_session_timeout; MariaDB:
// idle_transaction_timeout. SQLite has no row-lock strategy (its lease TTL
// bounds a holder, tested in the lease tests). PostgreSQL again through
// PgBouncer in transaction pooling mode: the limit is on the server
// connection the holder's transaction has.
func TestFaultHolderStopped(t *testing.T) {
	// Parallel: each stops its own holder on its own database; the server ends
	// the session after the hold limit, and the bound it checks (twice the hold
	// limit and 10 s) has room for a loaded machine.
	t.Parallel()
	for _, dialect := range []string{"postgres", "mysql", testdb.PgBouncer} {
		t.Run(dialect, func(t *testing.T) {
			// Parallel: each stops its own holder on its own database; the
			// bound it checks (twice the hold limit and 10 s) has room for it.
			t.Parallel()
			for _, s := range []drivers.Strategy{drivers.Skip, drivers.NoWait, drivers.Wait} {
				t.Run(string(s), func(t *testing.T) { holderStopped(t, testdb.Fresh(t, dialect), s) })
			}
		})
	}
}

func holderStopped(t *testing.T, dsn string, s drivers.Strategy) {
	d, e := prepare(t, dsn, 20)
	mustOK(t, dsn, "admin", "task", "create", "stall", "--where", "eligible = 1", "--order", "priority",
		"--query-delay", "2s", "--hold-limit", stopHoldLimit.String(), "--max-hold", "off", "--lock", string(s))
	id := taskID(t, e, "stall")
	holder := startProc(t, dsn, "doomed", 3*time.Minute,
		append([]string{"--output", "json", "work", "get", "stall", "--count", "2"}, fastRecheck...)...)
	waitUntilLocked(t, d, e, id, s)
	waitHoldLimitSet(t, d, e)
	if err := holder.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	defer holder.cmd.Process.Signal(syscall.SIGCONT) // never leave a stopped process behind
	// The demo query delay is turned off for the next callers: it is not what
	// is tested, and the stopped holder has read its task already.
	testdb.Exec(t, d, e.DB, "UPDATE loanq_task SET query_delay_ms = 0 WHERE id = ?", id)

	servedWithinHoldLimit(t, dsn, "stall", stopped, fmt.Sprintf("%s/%s: the holder was stopped", d.Name(), s))

	// Resumed after the bound, the holder finds its session gone.
	if err := holder.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	hr := holder.wait()
	if holder.hung {
		t.Fatal("the resumed holder hung")
	}
	endedByHoldLimit(t, dsn, d, e, id, s, hr, "holder resumed after its session was ended")
}

// servedWithinHoldLimit runs a caller that waits: it is served once the
// server has ended the stalled holder's session, within the bound.
func servedWithinHoldLimit(t *testing.T, dsn string, task string, stalled time.Time, what string) {
	t.Helper()
	r := mustOK(t, dsn, "patient", "--output", "json", "work", "get", task, "--count", "1",
		"--backoff", "100ms", "--timeout", "1m")
	served := time.Since(stalled)
	if got := decode(t, r); got.Status != "assigned" || len(got.Loans) != 1 {
		t.Fatalf("the waiting caller: %+v", got)
	}
	t.Logf("%s: task served again %.1fs later (hold limit %s)", what, served.Seconds(), stopHoldLimit)
	// The bound: the limit counts from the holder's last statement, before
	// the fault; a generous margin covers the recheck and a loaded machine.
	if bound := 2*stopHoldLimit + 10*time.Second; served > bound {
		t.Errorf("the task was served again only after %s, want within %s", served, bound)
	}
}

// endedByHoldLimit checks the stalled holder's answer once it can act again
// — exit 1, one line naming the hold limit — and what it left: nothing
// committed, its request served by the waiting caller, no request pending,
// audit clean, lock free.
func endedByHoldLimit(t *testing.T, dsn string, d drivers.Driver, e *engine, id int64, s drivers.Strategy, hr result, what string) {
	t.Helper()
	cleanFailure(t, what, hr)
	if !strings.Contains(hr.stderr, "hold limit") {
		t.Errorf("%s: the message does not say that the hold limit ended its session:\n%s", what, hr.stderr)
	}
	if strings.Contains(hr.stderr, "server running") {
		t.Errorf("%s: the message blames the server:\n%s", what, hr.stderr)
	}
	t.Logf("%s said: %s", what, strings.TrimSpace(hr.stderr))
	holderReq := requestIDOf(t, hr.stderr)
	// Its request was served by the waiting caller, oldest first.
	r := mustOK(t, dsn, "doomed", "--output", "json", "work", "status", strconv.FormatInt(holderReq, 10))
	if got := decode(t, r); got.Status != "assigned" || len(got.Loans) != 2 || got.User != "doomed" {
		t.Fatalf("the holder's request: %+v", got)
	}
	if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work WHERE task_id = ?", id); n != 3 {
		t.Fatalf("%d work rows, want 3: the stalled holder must commit nothing", n)
	}
	if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work_request WHERE task_id = ? AND status = 'pending'", id); n != 0 {
		t.Fatalf("%d requests still pending", n)
	}
	audit(t, e)
	lockFree(t, d, e, id, s)
}

// waitHoldLimitSet returns once the holder has sent its hold limit, so that
// the stop lands in the criteria query and not in the one round trip between
// the lock and the limit. PostgreSQL shows a session's last statement: the
// hold limit itself, while the holder, idle in its transaction, sleeps the
// query delay that starts its criteria query (the tasks these tests make
// have --max-hold off: with a max hold, the round's check for abandoned
// work is the last statement before the delay); MariaDB's process list does
// not, and the round trips take well under the second waited here (the query
// delay is 2 s).
func waitHoldLimitSet(t *testing.T, d drivers.Driver, e *engine) {
	t.Helper()
	if d.Name() != "postgres" {
		time.Sleep(time.Second)
		return
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		err := e.DB.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM pg_stat_activity
WHERE datname = current_database() AND application_name = 'loanq' AND state = 'idle in transaction'
  AND query = $1`, d.Statements().HoldLimitSet.Text()).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the holder never set its hold limit")
}
