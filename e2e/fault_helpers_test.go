package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// proc is a loanq process running in the background.
type proc struct {
	cmd    *exec.Cmd
	out    bytes.Buffer
	errb   bytes.Buffer
	done   chan struct{}
	res    result
	killed bool // the test sent it SIGKILL
	hung   bool // the generous timeout of startProc ended it
	user   string
	cancel context.CancelFunc
}

// startProc starts loanq in the background. A process still running after
// limit is killed and reported as hung by wait.
func startProc(t *testing.T, dsn, user string, limit time.Duration, args ...string) *proc {
	t.Helper()
	return startProcWith(t, nil, dsn, user, limit, args...)
}

// startProcWith is startProc with a change to the command before it starts
// (running it in a network namespace, for instance).
func startProcWith(t *testing.T, wrap func(*exec.Cmd), dsn, user string, limit time.Duration, args ...string) *proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	p := &proc{done: make(chan struct{}), user: user, cancel: cancel}
	p.cmd = command(ctx, dsn, user, args...)
	if wrap != nil {
		wrap(p.cmd)
	}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.errb
	if err := p.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting loanq %v: %v", args, err)
	}
	go func() {
		defer close(p.done)
		defer cancel()
		err := p.cmd.Wait()
		p.res = result{stdout: p.out.String(), stderr: p.errb.String()}
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			p.res.code = ee.ExitCode()
			if ctx.Err() != nil {
				p.hung = true
			}
		default:
			p.res.code = -1
			p.res.stderr += err.Error()
		}
	}()
	return p
}

// wait returns the finished process's result.
func (p *proc) wait() result {
	<-p.done
	return p.res
}

// running reports whether the process has not exited yet.
func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// cleanFailure fails the test unless r is the answer docs/commands.md's exit codes
// ask of a failure the caller should retry: exit 1, one line on stderr
// starting with "loanq: ", no panic, no stack trace, and a message that says
// what failed.
func cleanFailure(t *testing.T, what string, r result) {
	t.Helper()
	msg := strings.TrimRight(r.stderr, "\n")
	if r.code != 1 {
		t.Errorf("%s: exit %d, want 1\nstdout: %s\nstderr: %s", what, r.code, r.stdout, r.stderr)
	}
	if strings.Contains(msg, "panic") || strings.Contains(msg, "goroutine ") {
		t.Errorf("%s: stack trace or panic:\n%s", what, r.stderr)
	}
	if strings.Count(msg, "\n") != 0 || !strings.HasPrefix(msg, "loanq: ") {
		t.Errorf("%s: want one line starting with \"loanq: \", got:\n%s", what, r.stderr)
	}
	if !mentionsConnection(msg) {
		t.Errorf("%s: the message does not say that the database or its connection failed:\n%s", what, msg)
	}
}

// mentionsConnection: the message names the database connection (or the
// server ending it) as what failed, so the caller knows a retry is the cure.
func mentionsConnection(msg string) bool {
	m := strings.ToLower(msg)
	for _, w := range []string{"connection", "connect", "database", "server", "eof", "broken pipe", "shutdown", "terminat"} {
		if strings.Contains(m, w) {
			return true
		}
	}
	return false
}

// failureKind shortens a failure message to what went wrong, for the logs.
func failureKind(msg string) string {
	msg = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(msg), "loanq: "))
	if i := strings.LastIndex(msg, " (once the database answers again"); i > 0 {
		msg = msg[:i] // the hint, the same for every failure
	}
	// "serving request 17: running the criteria query of task t: <cause>"
	if i := strings.LastIndex(msg, ": "); i >= 0 && i+2 < len(msg) {
		cause := msg[i+2:]
		if len(cause) > 12 {
			msg = cause
		}
	}
	for _, digit := range "0123456789" {
		msg = strings.ReplaceAll(msg, string(digit), "#")
	}
	if len(msg) > 100 {
		msg = msg[:100]
	}
	return msg
}

// auditExcept runs the invariant audit and fails on any finding but skip.
func auditExcept(t *testing.T, e *engine, skip string) {
	t.Helper()
	findings, err := e.Admin().Audit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range findings {
		if f.Check != skip && f.Count != 0 {
			t.Errorf("audit %s: %d (%s)", f.Check, f.Count, f.Purpose)
		}
	}
}

// pendingIDs lists the task's pending requests.
func pendingIDs(t *testing.T, d drivers.Driver, e *engine, taskID int64) []int64 {
	t.Helper()
	rows, err := e.DB.Query(testdb.Rebind(d, "SELECT id FROM loanq_work_request WHERE task_id = ? AND status = 'pending' ORDER BY id"), taskID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// recheckAll runs `loanq work status ID --wait` for every pending request of
// the task (docs/algorithm.md, step 7) and fails unless each is served.
func recheckAll(t *testing.T, dsn string, d drivers.Driver, e *engine, taskID int64) int {
	t.Helper()
	ids := pendingIDs(t, d, e, taskID)
	for _, id := range ids {
		r := loanq(t, dsn, "recheck", append([]string{"--output", "json", "work", "status", strconv.FormatInt(id, 10), "--wait"}, fastRecheck...)...)
		if r.code != 0 {
			t.Fatalf("recheck of pending request %d: exit %d\n%s", id, r.code, r.stderr)
		}
		if got := decodeKeys(t, r); got.Status == "pending" { // any key kind
			t.Fatalf("request %d still pending after `work status --wait`: %+v", id, got)
		}
	}
	if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work_request WHERE task_id = ? AND status = 'pending'", taskID); n != 0 {
		t.Fatalf("%d requests of task %d still pending after the recheck", n, taskID)
	}
	return len(ids)
}

// lockFree fails unless the task lock is free: for a row lock, a NOWAIT probe
// from another session gets the row; for the lease, another caller could take
// it (it has no owner or its expiry has passed). A lease left by a killed
// holder expires after the task's lease-ttl: the check waits for that,
// generously.
func lockFree(t *testing.T, d drivers.Driver, e *engine, taskID int64, s drivers.Strategy) {
	t.Helper()
	if s != drivers.Lease {
		// A SIGKILLed holder's backend ends once it reads the EOF of the
		// closed socket: on a loaded machine that can take a moment.
		deadline := time.Now().Add(10 * time.Second)
		for rowLockHeld(t, context.Background(), d, e, taskID) {
			if time.Now().After(deadline) {
				t.Fatalf("the row lock of task %d is still held 10 s after every caller ended", taskID)
			}
			time.Sleep(50 * time.Millisecond)
		}
		return
	}
	deadline := time.Now().Add(time.Minute)
	for !leaseTakeable(t, d, e, taskID) {
		if time.Now().After(deadline) {
			t.Fatalf("the lease of task %d is neither free nor expired a minute after every caller ended", taskID)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// leaseTakeable says whether a caller could take the task's lease now: the
// driver's own LeaseAcquire, sent in a transaction that is rolled back, so
// the probe leaves the lease as it found it.
func leaseTakeable(t *testing.T, d drivers.Driver, e *engine, taskID int64) bool {
	t.Helper()
	ctx := context.Background()
	tx, err := e.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	res, err := d.Statements().LeaseAcquire.Exec(ctx, tx, engineio.LeaseTakeParams{TaskID: taskID, Owner: "lease-probe", TTLMS: 1000})
	if err != nil {
		t.Fatalf("probing the lease of task %d: %v", taskID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// engine is an engine with the database it was made over: the tests read
// and change tables around it, which production code cannot (dispatch's
// engine keeps its database to itself).
type engine struct {
	*dispatch.Engine
	DB     *sql.DB
	Driver drivers.Driver
}

func newEngine(db *sql.DB, d drivers.Driver) *engine { return &engine{dispatch.New(db, d), db, d} }

var requestIDRE = regexp.MustCompile(`request (\d+)`)

// requestIDOf reads the request id a failure message names.
func requestIDOf(t *testing.T, msg string) int64 {
	t.Helper()
	m := requestIDRE.FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("the failure does not name its request, so the caller cannot recheck it:\n%s", msg)
	}
	id, _ := strconv.ParseInt(m[1], 10, 64)
	return id
}

// pipelineLoans is the loan ids `loanq pipeline --task TASK` shows the user.
func pipelineLoans(t *testing.T, dsn, user, task string) []int64 {
	t.Helper()
	r := mustOK(t, dsn, user, "--output", "json", "pipeline", "--task", task)
	var p struct {
		User string `json:"user"`
		Work []struct {
			Task   string `json:"task"`
			LoanID int64  `json:"loan_id"`
		} `json:"work"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &p); err != nil {
		t.Fatalf("pipeline output is not the JSON of docs/json.md: %v\n%s", err, r.stdout)
	}
	out := []int64{}
	for _, w := range p.Work {
		if w.Task != task {
			t.Fatalf("pipeline --task %s shows work of task %s", task, w.Task)
		}
		out = append(out, w.LoanID)
	}
	sort.Slice(out, func(a, b int) bool { return out[a] < out[b] })
	return out
}
