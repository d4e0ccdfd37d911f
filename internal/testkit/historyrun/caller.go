package historyrun

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/testkit/history"
	"github.com/loanq/loanq/problem"
)

// answer is what a get, status or cancel was told.
type answer struct {
	Request int64
	Status  string
	Loans   []string
}

// outcome classifies an error the way history does: nil is OK, a definite
// refusal is Fail, anything else Info (it may have been applied).
type outcome struct {
	typ history.Type
	err error
}

// client is how a caller reaches loanq: the engine in-process, or the
// loanq binary.
type client interface {
	get(ctx context.Context, count int, noWait bool) (answer, outcome)
	status(ctx context.Context, id int64) (answer, outcome)
	cancel(ctx context.Context, id int64) (answer, outcome)
	dispose(ctx context.Context, loan, action string) outcome
	// disposeMany ends several loans with one call, all or nothing
	// (`disposition TASK LOAN… ACTION`, DisposeMany).
	disposeMany(ctx context.Context, loans []string, action string) outcome
	via() string
}

// caller is one processor: it loops get → work each loan → dispose until
// the deadline, recording every operation.
type caller struct {
	user     string
	cl       client
	log      *history.Log
	d        drivers.Driver
	db       *sql.DB // the source table's changes and the database clock
	source   string
	rng      *rand.Rand
	bigShare float64
	deadline time.Time
	// stagger: the caller's first get comes after a random pause up to
	// this long (processors do not all arrive at one instant).
	stagger time.Duration
	// gate, when set, bounds the gets (and their status and cancel calls)
	// that the callers of one process have in loanq at once: an
	// application node runs at most as many as its connection pool can
	// carry. A caller waiting on the task lock holds a connection, and a
	// round needs a second one besides its transaction; with more waiting
	// callers than connections a `wait` round can wait for a connection
	// that its own waiters hold. Dispositions and changes, one short
	// statement each, are not gated.
	gate chan struct{}
}

// slot takes one of the process's call slots; the returned func gives it
// back.
func (c *caller) slot(ctx context.Context) func() {
	if c.gate == nil {
		return func() {}
	}
	select {
	case c.gate <- struct{}{}:
		return func() { <-c.gate }
	case <-ctx.Done():
		return func() {}
	}
}

var requestRE = regexp.MustCompile(`request (\d+)`)

// requestIn finds the request an error message names (a request left
// pending by a failed serve, or committed before a lost answer).
func requestIn(msg string) int64 {
	if m := requestRE.FindStringSubmatch(msg); m != nil {
		id, _ := strconv.ParseInt(m[1], 10, 64)
		return id
	}
	return 0
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}

func (c *caller) now() time.Time { return dbNow(context.Background(), c.d, c.db) }

// run loops until the deadline; ctx ends it at once (a hard stop).
func (c *caller) run(ctx context.Context) {
	if c.stagger > 0 {
		sleep(ctx, time.Duration(c.rng.Int64N(int64(c.stagger))))
	}
	for time.Now().Before(c.deadline) && ctx.Err() == nil {
		count := 1
		if c.rng.Float64() < c.bigShare {
			count = 30
		}
		noWait := c.rng.Float64() < 0.08
		loans := c.get(ctx, count, noWait)
		if len(loans) == 0 {
			// Nothing now: do not spin on an empty task.
			sleep(ctx, time.Duration(20+c.rng.IntN(40))*time.Millisecond)
			continue
		}
		if len(loans) > 1 && c.rng.IntN(2) == 0 {
			c.workBatch(ctx, loans)
			continue
		}
		for _, l := range loans {
			if !time.Now().Before(c.deadline) {
				break // the end: what is left stays in the caller's pipeline
			}
			c.work(ctx, l)
		}
	}
}

// workBatch works the loans of one answer as a script draining a queue
// does: most are changed so that they stop matching, then all are completed
// with one call. Each loan's disposition is logged as an operation of its
// own, with the call's times and outcome: the call is all or nothing. A
// refused batch (one of its loans no longer the caller's active work) is
// followed by a call per loan, which ends those still held.
func (c *caller) workBatch(ctx context.Context, loans []string) {
	if !time.Now().Before(c.deadline) {
		return
	}
	for _, l := range loans {
		if c.rng.Float64() < 0.75 {
			c.change(ctx, l)
		}
	}
	for try := 0; try < 8; try++ {
		ops := make([]*history.Op, len(loans))
		for i, l := range loans {
			ops[i] = c.log.Invoke(history.Op{Caller: c.user, Kind: history.Dispose, Loan: l, Count: len(loans), Action: "complete", Via: c.cl.via(), Invoke: time.Now()})
		}
		out := c.cl.disposeMany(ctx, loans, "complete")
		for _, op := range ops {
			op.Err = errText(out.err)
			op.Complete = time.Now()
			c.log.Complete(op, out.typ)
		}
		switch {
		case out.typ == history.Fail && ctx.Err() == nil:
			for _, l := range loans {
				c.work(ctx, l)
			}
			return
		case out.typ != history.Info || ctx.Err() != nil:
			return
		}
		sleep(ctx, 100*time.Millisecond) // may not have been applied: again
	}
}

// get asks for count loans and follows the request until it is answered:
// status --wait after a busy answer or a failure that names the request,
// sometimes a cancel instead.
func (c *caller) get(ctx context.Context, count int, noWait bool) []string {
	done := c.slot(ctx)
	if !time.Now().Before(c.deadline) {
		done() // the end came while this caller waited for its turn
		return nil
	}
	op := c.log.Invoke(history.Op{Caller: c.user, Kind: history.Get, Count: count, Via: c.cl.via(), Invoke: time.Now(), DBInvoke: c.now()})
	ans, out := c.cl.get(ctx, count, noWait)
	c.finish(op, ans, out)
	done()
	id := ans.Request
	if out.typ != history.OK {
		if id = requestIn(errText(out.err)); id == 0 {
			// Rolled back, or not known: nothing to follow. A failing
			// database (a restart) is not asked again at once.
			sleep(ctx, time.Duration(200+c.rng.IntN(200))*time.Millisecond)
			return nil
		}
	} else if ans.Status != dispatch.StatusPending {
		return ans.Loans
	}
	// Pending (busy), or a failure that left the request logged.
	if out.typ == history.OK && c.rng.IntN(2) == 0 {
		done := c.slot(ctx)
		op := c.log.Invoke(history.Op{Caller: c.user, Kind: history.Cancel, Request: id, Via: c.cl.via(), Invoke: time.Now(), DBInvoke: c.now()})
		ans, out := c.cl.cancel(ctx, id)
		c.finish(op, ans, out)
		done()
		if out.typ == history.OK && ans.Status != dispatch.StatusPending {
			return ans.Loans // cancelled (none), or served first (its loans)
		}
	}
	// Follow it until answered: a failing database is retried for a while.
	for try := 0; try < 40 && ctx.Err() == nil; try++ {
		done := c.slot(ctx)
		op := c.log.Invoke(history.Op{Caller: c.user, Kind: history.Get, Request: id, Via: c.cl.via(), Invoke: time.Now(), DBInvoke: c.now()})
		ans, out := c.cl.status(ctx, id)
		c.finish(op, ans, out)
		done()
		if out.typ == history.OK && ans.Status != dispatch.StatusPending {
			return ans.Loans
		}
		if out.typ == history.Fail {
			return nil
		}
		sleep(ctx, 250*time.Millisecond)
	}
	return nil
}

func (c *caller) finish(op *history.Op, ans answer, out outcome) {
	op.DBComplete = c.now()
	op.Complete = time.Now()
	if ans.Request != 0 {
		op.Request = ans.Request
	}
	op.Status, op.Loans, op.Err = ans.Status, ans.Loans, errText(out.err)
	if op.Request == 0 {
		op.Request = requestIn(op.Err)
	}
	c.log.Complete(op, out.typ)
}

// work "works" a loan: most of the time the worker's change makes it stop
// matching (done = 1, its own transaction) and the loan is completed; else
// completed unchanged (it comes back), returned at once, or never.
func (c *caller) work(ctx context.Context, loan string) {
	p := c.rng.Float64()
	action := "complete"
	switch {
	case p < 0.75:
		c.change(ctx, loan)
	case p < 0.85:
	case p < 0.95:
		action = "return"
	default:
		action = "never"
	}
	for try := 0; try < 8; try++ {
		op := c.log.Invoke(history.Op{Caller: c.user, Kind: history.Dispose, Loan: loan, Action: action, Via: c.cl.via(), Invoke: time.Now()})
		out := c.cl.dispose(ctx, loan, action)
		op.Err = errText(out.err)
		op.Complete = time.Now()
		c.log.Complete(op, out.typ)
		if out.typ != history.Info || ctx.Err() != nil {
			return
		}
		sleep(ctx, 100*time.Millisecond) // may not have been applied: again
	}
}

func (c *caller) change(ctx context.Context, loan string) {
	op := c.log.Invoke(history.Op{Caller: c.user, Kind: history.Change, Loan: loan, Via: "sql", Invoke: time.Now()})
	_, err := c.db.ExecContext(ctx, fmt.Sprintf("UPDATE %s SET done = 1 WHERE id = %s", c.source, loan))
	typ := history.OK
	if err != nil {
		typ = history.Info
	} else {
		op.DBComplete = c.now() // after the commit: the change is visible by then
	}
	op.Err, op.Complete = errText(err), time.Now()
	c.log.Complete(op, typ)
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// Backoff is the callers' recheck schedule: short, the tests' pace.
var Backoff = []time.Duration{20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond}

const getTimeout = 60 * time.Second

// engineClient calls dispatch in this process.
type engineClient struct {
	e    *dispatch.Engine
	task string
	user string
}

func (ec *engineClient) via() string { return "engine" }

func engineOutcome(err error) outcome {
	switch {
	case err == nil:
		return outcome{typ: history.OK}
	case problem.KindOf(err) == problem.Usage:
		return outcome{typ: history.Fail, err: err}
	}
	return outcome{typ: history.Info, err: err}
}

func answerOf(r *dispatch.Request) answer {
	if r == nil {
		return answer{}
	}
	a := answer{Request: r.ID, Status: r.Status}
	for _, k := range r.Loans {
		a.Loans = append(a.Loans, k.String())
	}
	return a
}

func (ec *engineClient) get(ctx context.Context, count int, noWait bool) (answer, outcome) {
	r, err := ec.e.Get(ctx, ec.task, ec.user, count, dispatch.GetOptions{NoWait: noWait, Timeout: getTimeout, Backoff: Backoff})
	if problem.KindOf(err) == problem.Busy && r != nil {
		return answerOf(r), outcome{typ: history.OK} // pending: an answer
	}
	return answerOf(r), engineOutcome(err)
}

func (ec *engineClient) status(ctx context.Context, id int64) (answer, outcome) {
	r, err := ec.e.Status(ctx, id, true, dispatch.GetOptions{Timeout: getTimeout, Backoff: Backoff})
	if problem.KindOf(err) == problem.Busy && r != nil {
		return answerOf(r), outcome{typ: history.OK}
	}
	return answerOf(r), engineOutcome(err)
}

func (ec *engineClient) cancel(ctx context.Context, id int64) (answer, outcome) {
	r, err := ec.e.Cancel(ctx, id, ec.user)
	return answerOf(r), engineOutcome(err)
}

func (ec *engineClient) dispose(ctx context.Context, loan, action string) outcome {
	_, err := ec.e.Dispose(ctx, ec.task, loan, ec.user, action, 0, action == dispatch.Return)
	return engineOutcome(err)
}

func (ec *engineClient) disposeMany(ctx context.Context, loans []string, action string) outcome {
	_, err := ec.e.DisposeMany(ctx, ec.task, loans, ec.user, action, 0, action == dispatch.Return, dispatch.DispositionNote{})
	return engineOutcome(err)
}

// cliClient runs the loanq binary, one process per call.
type cliClient struct {
	binary, dsn, task, user string
}

func (cc *cliClient) via() string { return "cli" }

func (cc *cliClient) run(ctx context.Context, args ...string) (stdout, stderr string, code int, err error) {
	full := append([]string{"--db", cc.dsn, "--user", cc.user}, args...)
	cmd := exec.CommandContext(ctx, cc.binary, full...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LOANQ_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Dir = os.TempDir()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code, err = ee.ExitCode(), nil
	}
	return out.String(), strings.TrimSpace(errb.String()), code, err
}

// cliAnswer reads the JSON of work get/status/cancel (docs/json.md); loans
// of an integer task are numbers.
func cliAnswer(stdout string) (answer, error) {
	var j struct {
		RequestID int64             `json:"request_id"`
		Status    string            `json:"status"`
		Loans     []json.RawMessage `json:"loans"`
	}
	if err := json.Unmarshal([]byte(stdout), &j); err != nil {
		return answer{}, fmt.Errorf("not the JSON of docs/json.md: %v: %q", err, stdout)
	}
	a := answer{Request: j.RequestID, Status: j.Status}
	for _, l := range j.Loans {
		a.Loans = append(a.Loans, strings.Trim(string(l), `"`))
	}
	return a, nil
}

// cliOutcome maps the exit code: 0 (and 75, pending, with its JSON) OK, 2
// Fail, anything else Info.
func (cc *cliClient) request(ctx context.Context, args ...string) (answer, outcome) {
	stdout, stderr, code, err := cc.run(ctx, args...)
	if err != nil {
		return answer{}, outcome{typ: history.Info, err: err}
	}
	switch code {
	case 0, 75:
		a, err := cliAnswer(stdout)
		if err != nil {
			return a, outcome{typ: history.Info, err: err}
		}
		return a, outcome{typ: history.OK}
	case 2:
		return answer{}, outcome{typ: history.Fail, err: fmt.Errorf("exit 2: %s", stderr)}
	}
	return answer{}, outcome{typ: history.Info, err: fmt.Errorf("exit %d: %s", code, stderr)}
}

func backoffFlag() string {
	var parts []string
	for _, b := range Backoff {
		parts = append(parts, b.String())
	}
	return strings.Join(parts, ",")
}

func (cc *cliClient) get(ctx context.Context, count int, noWait bool) (answer, outcome) {
	args := []string{"-o", "json", "work", "get", cc.task, "--count", strconv.Itoa(count), "--backoff", backoffFlag(), "--timeout", getTimeout.String()}
	if noWait {
		args = append(args, "--no-wait")
	}
	return cc.request(ctx, args...)
}

func (cc *cliClient) status(ctx context.Context, id int64) (answer, outcome) {
	return cc.request(ctx, "-o", "json", "work", "status", strconv.FormatInt(id, 10), "--wait", "--backoff", backoffFlag(), "--timeout", getTimeout.String())
}

func (cc *cliClient) cancel(ctx context.Context, id int64) (answer, outcome) {
	return cc.request(ctx, "-o", "json", "work", "cancel", strconv.FormatInt(id, 10))
}

func (cc *cliClient) dispose(ctx context.Context, loan, action string) outcome {
	return cc.disposeMany(ctx, []string{loan}, action)
}

func (cc *cliClient) disposeMany(ctx context.Context, loans []string, action string) outcome {
	args := append(append([]string{"disposition", cc.task}, loans...), action)
	if action == dispatch.Return {
		args = append(args, "--after", "0s")
	}
	_, stderr, code, err := cc.run(ctx, args...)
	switch {
	case err != nil:
		return outcome{typ: history.Info, err: err}
	case code == 0:
		return outcome{typ: history.OK}
	case code == 2:
		return outcome{typ: history.Fail, err: fmt.Errorf("exit 2: %s", stderr)}
	}
	return outcome{typ: history.Info, err: fmt.Errorf("exit %d: %s", code, stderr)}
}
