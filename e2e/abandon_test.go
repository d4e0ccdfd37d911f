package e2e

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// Abandoned requests (docs/algorithm.md): a request nobody waits for any
// more is never served. These tests stand for a caller silent past the
// bound by moving its request's last sign of life back (testdb.AgeRequest)
// instead of waiting a minute.

// aliveBound is drivers.RequestAlive, the silence after which a pending
// request expires.
const aliveBound = time.Minute

// pendingID returns the id of user's pending request of the task once it is
// logged (read with the test's own SQL, whatever the schema's version).
func pendingID(t *testing.T, d drivers.Driver, db *sql.DB, taskID int64, user string, running func() bool) int64 {
	t.Helper()
	q := testdb.Rebind(d, "SELECT id FROM loanq_work_request WHERE task_id = ? AND user_name = ? AND status = 'pending'")
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var id int64
		err := db.QueryRowContext(context.Background(), q, taskID, user).Scan(&id)
		if err == nil {
			return id
		}
		if !errors.Is(err, sql.ErrNoRows) {
			t.Fatal(err)
		}
		if !running() {
			t.Fatalf("%s's caller ended before its request was logged", user)
		}
	}
	t.Fatalf("no pending request of %s after a minute", user)
	return 0
}

// lockedTask creates task name with the dialect's first lock strategy and
// holds its lock as a holder in its criteria query would (holdTaskLock);
// release gives it back, once (at the test's end if not before).
func lockedTask(t *testing.T, dsn string, d drivers.Driver, e *engine, name string) (task *dispatch.Task, release func()) {
	t.Helper()
	s := d.Capabilities().Strategies[0]
	mustOK(t, dsn, "admin", "task", "create", name, "--where", "eligible = 1", "--order", "priority", "--lock", string(s))
	task, err := e.Task(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	hold := holdTaskLock(t, d, e.DB, task.ID, s)
	release = func() { once.Do(hold) }
	t.Cleanup(release)
	return task, release
}

// requestState is a request's status as stored and how many work rows
// (loans) it has.
func requestState(t *testing.T, d drivers.Driver, db *sql.DB, id int64) (status string, loans int64) {
	t.Helper()
	if err := db.QueryRowContext(context.Background(), testdb.Rebind(d, "SELECT status FROM loanq_work_request WHERE id = ?"), id).Scan(&status); err != nil {
		t.Fatal(err)
	}
	return status, testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work WHERE request_id = ?", id)
}

// ageRequest moves request id's last sign of life back by ago; a schema
// without one (a loanq before "Abandoned requests") is said and left as is,
// so that the test goes on to show what that loanq does.
func ageRequest(t *testing.T, d drivers.Driver, db *sql.DB, id int64, ago time.Duration) {
	t.Helper()
	if err := testdb.AgeRequest(d, db, id, ago); err != nil {
		t.Errorf("moving request %d's last sign of life back: %v", id, err)
	}
}

// An API client that hangs up while its POST …/requests waits (the task
// lock is held) cancels its request, as Ctrl-C does for `work get`: the
// request ends cancelled and the next round does not assign to it.
func TestAPIClientGoneCancelsItsRequest(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, e := prepare(t, dsn, 20)
		ctx := context.Background()
		tok, err := e.Admin().CreateToken(ctx, "ana", "processor", "admin", 0)
		if err != nil {
			t.Fatal(err)
		}
		ana := apiClient{url: startServe(t, dsn, "--api", "--auth", "token").url, token: tok.Token}
		task, release := lockedTask(t, dsn, d, e, "hangup")

		call, hangUp := context.WithCancel(ctx)
		defer hangUp()
		answered := make(chan error, 1)
		go func() {
			a, err := ana.call(call, "POST", "/api/v1/tasks/hangup/requests", map[string]any{"count": 2, "wait_ms": 50000})
			if err == nil {
				err = errors.New("answered " + strconv.Itoa(a.status) + ": " + string(a.body))
			}
			answered <- err
		}()
		waiting := true
		id := pendingID(t, d, e.DB, task.ID, "ana", func() bool { return waiting })
		time.Sleep(200 * time.Millisecond) // well inside its wait
		hangUp()
		if err := <-answered; !errors.Is(err, context.Canceled) {
			t.Fatalf("the POST the client hung up on: %v", err)
		}
		waiting = false

		status := "pending"
		for deadline := time.Now().Add(15 * time.Second); status == "pending" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			status, _ = requestState(t, d, e.DB, id)
		}
		if status != "cancelled" {
			t.Errorf("request %d of the client that hung up: %s 15 s later, want cancelled", id, status)
		}
		release()
		mustOK(t, dsn, "bob", append([]string{"work", "get", "hangup"}, fastRecheck...)...)
		if status, loans := requestState(t, d, e.DB, id); loans != 0 {
			t.Errorf("a later round served request %d of the client that hung up: %s, %d loan(s) nobody takes", id, status, loans)
		}
		audit(t, e)
	})
}

// `work get` killed with SIGKILL while it waits leaves its request pending;
// a `work run` of the same user then neither serves that request (its loans
// would go to nobody: the runner does not run its command on them) nor
// shares it: it waits until the request is answered or, its caller gone and
// silent past the bound, expired, and asks for its own loans. Every loan the
// user was given went through the runner's command and was dispositioned,
// and the runner exits 0.
func TestKilledWorkGetIsNotServedToWorkRun(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, e := prepare(t, dsn, 20)
		task, release := lockedTask(t, dsn, d, e, "killed")
		get := startProc(t, dsn, "uma", 2*time.Minute, append([]string{"--output", "json", "work", "get", "killed", "--count", "1"}, fastRecheck...)...)
		old := pendingID(t, d, e.DB, task.ID, "uma", get.running)
		time.Sleep(200 * time.Millisecond) // waiting, rechecking
		if err := get.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		get.wait()

		ran := filepath.Join(t.TempDir(), "ran")
		run := startProc(t, dsn, "uma", 2*time.Minute, "work", "run", "killed", "--max-loans", "1", "--concurrency", "1", "--",
			"sh", "-c", `printf '%s\n' "$LOANQ_LOAN_ID" >> "$0"; exit 65`, ran)
		time.Sleep(1500 * time.Millisecond) // the runner has met uma's pending request
		if !run.running() {
			r := run.wait()
			t.Fatalf("work run ended while the task lock was held: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		ageRequest(t, d, e.DB, old, 2*aliveBound)
		release()
		res := run.wait()
		if res.code != 0 {
			t.Fatalf("work run: exit %d\n%s%s", res.code, res.stdout, res.stderr)
		}

		status, loans := requestState(t, d, e.DB, old)
		if loans != 0 || (status != "expired" && status != "cancelled") {
			t.Errorf("the killed work get's request %d: %s with %d loan(s); want it expired (or cancelled) and never served", old, status, loans)
		}
		if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work WHERE task_id = ? AND user_name = 'uma' AND disposition IS NULL", task.ID); n != 0 {
			t.Errorf("uma still holds %d loan(s) that work run never ran its command on", n)
		}
		text, err := os.ReadFile(ran)
		if err != nil {
			t.Fatal(err)
		}
		byCommand := strings.Fields(string(text))
		if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work WHERE task_id = ? AND user_name = 'uma'", task.ID); n != int64(len(byCommand)) {
			t.Errorf("uma was assigned %d loan(s); work run's command ran on %v", n, byCommand)
		}
		for _, loan := range byCommand {
			if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work WHERE task_id = ? AND user_name = 'uma' AND loan_id = ? AND disposition = 'never'", task.ID, loan); n != 1 {
				t.Errorf("loan %s, run by work run's command (exit 65): %d work rows of uma dispositioned never, want 1", loan, n)
			}
		}
		audit(t, e)
	})
}

// A script that got exit 75 keeps its request alive by rechecking
// (`work status ID`, the SPEC's 5 s, 10 s, 20 s): a recheck within the bound
// finds it pending (exit 75) and renews it; one after a longer silence
// finds it expired (exit 1, status expired), asking again logs a new
// request instead of attaching to it, and no later round serves it.
func TestUnrecheckedRequestExpires(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, e := prepare(t, dsn, 20)
		_, release := lockedTask(t, dsn, d, e, "quiet")
		r := loanq(t, dsn, "uma", "--output", "json", "work", "get", "quiet", "--no-wait", "--count", "2")
		if r.code != 75 {
			t.Fatalf("work get --no-wait with the lock held: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		id := decode(t, r).RequestID
		recheck := func() result {
			return loanq(t, dsn, "uma", "--output", "json", "work", "status", strconv.FormatInt(id, 10))
		}

		ageRequest(t, d, e.DB, id, aliveBound-10*time.Second)
		if r := recheck(); r.code != 75 || decode(t, r).Status != "pending" {
			t.Errorf("a recheck 50 s after the last: exit %d %s, want 75 pending\n%s", r.code, r.stdout, r.stderr)
		}
		ageRequest(t, d, e.DB, id, 2*aliveBound)
		r = recheck()
		if r.code != 1 || decode(t, r).Status != "expired" || !strings.Contains(r.stderr, "expired") {
			t.Errorf("a recheck 2 min after the last: exit %d %s, want 1 and status expired\n%s", r.code, r.stdout, r.stderr)
		}
		again := loanq(t, dsn, "uma", "--output", "json", "work", "get", "quiet", "--no-wait")
		if again.code != 75 || decode(t, again).RequestID == id {
			t.Errorf("asking again after the request expired: exit %d %s; want a new pending request\n%s", again.code, again.stdout, again.stderr)
		} else {
			mustOK(t, dsn, "uma", "work", "cancel", strconv.FormatInt(decode(t, again).RequestID, 10))
		}

		release()
		mustOK(t, dsn, "bob", append([]string{"work", "get", "quiet"}, fastRecheck...)...)
		if status, loans := requestState(t, d, e.DB, id); loans != 0 || status == "pending" {
			t.Errorf("request %d, unrechecked past the bound: %s with %d loan(s) after a later round; want it never served", id, status, loans)
		}
		audit(t, e)
	})
}
