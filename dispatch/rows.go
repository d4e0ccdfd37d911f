package dispatch

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/loanq/loanq/loankey"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/internal/pause"
	"github.com/loanq/loanq/problem"
)

// The rows strategy (docs/algorithm.md, "The rows strategy"): no task lock and
// no coalescing. Each caller serves its own request in one transaction:
//
//  1. on a capped task, lock the caller's (task, user) row in loanq_task_user
//     as the FIRST statement, then count the user's active work: the lock
//     serialises the cap check of one user of one task (two calls of the same
//     user would otherwise both count 4 of 5 and both assign), while callers
//     of other users never meet it;
//  2. run the criteria query locking up to n source rows, skipping rows other
//     callers hold (drivers.RowLocker);
//  3. a new request is logged here, inside the claim (serveRowsFresh): it
//     stays invisible until the commit, and a caller killed before it
//     leaves nothing pending — which is fine, since nobody holds its id;
//  4. insert a work row per locked loan that is still eligible, in one
//     statement that runs the criteria again over the locked keys
//     (assignLocked); a loan another caller assigned after the locking
//     read's snapshot is left out and replaced by running the claim again;
//  5. finish the request, log the run (requests_served 1), commit: one
//     commit per get.
//
// A request that must wait — its user has one pending already (attach), or
// loans other claimers hold may still come back (rowswait.go) — is rolled
// back and logged on its own, committed, before the caller waits: then
// another process of the user can attach to it, `work cancel` can cancel it
// and `work status ID --wait` can serve it. A caller killed while it claims
// for such a committed request loses nothing either: its transaction rolls
// back, its row locks go with it, and the request stays pending until
// `loanq work status ID --wait` serves it.

// errRowsLogFirst: the fresh claim rolled back because its request must be
// committed pending before anyone serves it (see above).
var errRowsLogFirst = errors.New("the request must be logged on its own first")

// serveRowsFresh serves a new request of a rows task with the claim that
// logs it (one commit). It returns nil and no error when the request must
// be logged on its own first: nothing was written, and the caller takes
// the usual path (logRequest, serveUntilDone).
func (e *Engine) serveRowsFresh(ctx context.Context, task *Task, user string, count int) (*Request, error) {
	rl, ok := e.driver.(drivers.RowLocker)
	if !ok {
		return nil, problem.Usagef("lock strategy rows is not available on %s: use one of %s", e.driver.Name(), strategyList(e.driver))
	}
	if err := e.ensureUserLock(ctx, task, user); err != nil {
		return nil, err
	}
	req := &Request{TaskID: task.ID, Task: task.Name, User: user, Requested: count}
	fc, finishing := e.driver.(drivers.FinishingClaimer) // rows finish one-statement (capabilities)
	var answer *Request
	err := drivers.RetryDeadlock(ctx, e.driver, 6, func() error {
		req.ID = 0
		if finishing {
			a, err := e.claimRowsFinishing(ctx, rl, fc, task, req)
			if err != nil || a != nil {
				answer = a
				return err
			}
			req.ID = 0 // rolled back: the statement-by-statement claim below
		}
		return e.claimRows(ctx, rl, task, req, true)
	})
	if errors.Is(err, errRowsLogFirst) || e.driver.IsDeadlock(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if answer != nil {
		return answer, nil
	}
	return e.readCommitted(ctx, req.ID)
}

// claimRowsFinishing is the claim transaction of a new rows request where
// one statement ends it (drivers.FinishingClaimer): the same steps as
// claimRows — the per-user lock first, abandoned work, the cap, the locking
// read, the request logged inside the claim — then that statement, which
// assigns the locked rows still eligible, finishes the request, logs the run
// and returns the answer, so nothing is read back after the commit.
//
// It returns the answer once committed; errRowsLogFirst when the request
// must be committed pending first (the user has one pending already, or
// loans other claimers hold may come back); and nil, nil, having rolled
// back and written nothing, when the claim is not the plain case this path
// serves — nothing to take (capped, or nothing left to lock), or a locked
// key lost to another caller after the locking read — for claimRows, which
// handles those, to run instead.
func (e *Engine) claimRowsFinishing(ctx context.Context, rl drivers.RowLocker, fc drivers.FinishingClaimer, task *Task, req *Request) (*Request, error) {
	tx, err := e.db.BeginTx(ctx, rl.RowsTxOptions())
	if err != nil {
		return nil, fmt.Errorf("beginning the claim transaction: %w", err)
	}
	defer tx.Rollback() // no-op after Commit
	allow, err := e.claimAllowance(ctx, tx, task, req)
	if err != nil || allow == 0 {
		return nil, err
	}
	started := time.Now()
	locked, err := rl.LockRows(ctx, tx, e.criteriaFor(task, req.User), task.ID, allow)
	if err != nil {
		return nil, fmt.Errorf("claiming rows of task %s: %w", task.Name, err)
	}
	if err := e.afterLockingRead(ctx, task); err != nil {
		return nil, err
	}
	if len(locked) == 0 {
		return nil, nil
	}
	if err := e.logInClaim(ctx, tx, req); err != nil {
		return nil, err
	}
	take := len(locked) // what the statement assigns, or it finishes nothing
	status := requestStatus(req.Requested, take)
	rows, err := fc.FinishingClaim(e.criteriaFor(task, req.User)).All(ctx, tx, engineio.FinishingClaimParams{
		TaskID: task.ID, User: req.User, RequestID: req.ID, IDs: loankey.JSON(task.KeyKind, locked),
		Assigned: take, Status: status, Holder: truncate(e.Holder, 100),
		StartedAgoMS: time.Since(started).Milliseconds(), DurationMS: time.Since(started).Milliseconds(), RowsFound: take})
	if err != nil {
		return nil, fmt.Errorf("assigning the claimed rows of task %s to %s: %w", task.Name, req.User, err)
	}
	if len(rows) != take {
		return nil, nil // a key was lost after the locking read: claimRows replaces it
	}
	if take < allow {
		// As in claimRows: are the loans this claim did not get held by
		// other claimers? Then the request must wait for them.
		if _, held, err := e.heldEligible(ctx, tx, task, req.User); err != nil || held {
			if err == nil {
				err = errRowsLogFirst
			}
			return nil, err
		}
	}
	if err := e.commit(tx, "the claim of task "+task.Name); err != nil {
		return nil, err
	}
	answer := &Request{ID: req.ID, TaskID: task.ID, Task: task.Name, User: req.User, Requested: req.Requested,
		Assigned: take, Status: status, CreatedAt: rows[0].CreatedAt.T, Loans: make([]loankey.Key, take)}
	for i, r := range rows {
		answer.Loans[i] = loankey.New(task.KeyKind, r.LoanID)
	}
	return answer, nil
}

// ensureUserLock creates the caller's (task, user) row of a capped task,
// outside the claim transaction: the row must exist before it can be
// locked. Idempotent; a concurrent first call may insert it too.
func (e *Engine) ensureUserLock(ctx context.Context, task *Task, user string) error {
	if task.MaxActive <= 0 {
		return nil
	}
	if _, err := e.sql().UserLockEnsure.Exec(ctx, e.db, engineio.TaskUserParams{TaskID: task.ID, User: user}); err != nil && !e.driver.IsUniqueViolation(err) {
		return fmt.Errorf("preparing the per-user lock of %s: %w", user, err)
	}
	return nil
}

// maxClaimRounds bounds how often one claim replaces loans it lost to others.
const maxClaimRounds = 10

// serveRows serves the caller's request with the rows strategy, retrying a
// deadlock victim's transaction (InnoDB may pick one when the order index is
// missing). The request is not read first: the caller knows who asked for
// how many (it logged the request, or read it in work status), and a request
// served meanwhile by someone else is found by the claim's RequestFinish,
// which then rolls the claim back. Only a request this call attached to is
// read, for its count.
func (e *Engine) serveRows(ctx context.Context, task *Task, own *ownRequest) error {
	rl, ok := e.driver.(drivers.RowLocker)
	if !ok {
		return problem.Usagef("lock strategy rows is not available on %s: use one of %s", e.driver.Name(), strategyList(e.driver))
	}
	req := &Request{ID: own.id, TaskID: task.ID, Task: task.Name, User: own.user, Requested: own.requested}
	if req.Requested == 0 {
		r, err := e.Request(ctx, own.id)
		if err != nil || r.Status != StatusPending {
			return err
		}
		req = r
	}
	if err := e.ensureUserLock(ctx, task, req.User); err != nil {
		return err
	}
	return drivers.RetryDeadlock(ctx, e.driver, 6, func() error { return e.claimRows(ctx, rl, task, req, false) })
}

// claimRows is one claim transaction. fresh: req is a new request, not yet
// logged; the claim logs it (req.ID set), and returns errRowsLogFirst
// instead of waiting when it must be logged on its own first.
func (e *Engine) claimRows(ctx context.Context, rl drivers.RowLocker, task *Task, req *Request, fresh bool) error {
	tx, err := e.db.BeginTx(ctx, rl.RowsTxOptions())
	if err != nil {
		return fmt.Errorf("beginning the claim transaction: %w", err)
	}
	defer tx.Rollback() // no-op after Commit
	allow, err := e.claimAllowance(ctx, tx, task, req)
	if err != nil {
		return err
	}
	run := QueryRun{Holder: e.Holder, Strategy: string(drivers.Rows), started: time.Now()}
	take := 0
	for round := 0; take < allow && round < maxClaimRounds; round++ {
		want := allow - take
		locked, err := rl.LockRows(ctx, tx, e.criteriaFor(task, req.User), task.ID, want)
		if err != nil {
			return fmt.Errorf("claiming rows of task %s: %w", task.Name, err)
		}
		if round == 0 {
			if err := e.afterLockingRead(ctx, task); err != nil {
				return err
			}
		}
		run.RowsFound += len(locked)
		if fresh && req.ID == 0 {
			// Logged after the locking read and its stand-in delay, right
			// before the work rows that name it: the entry it makes in the
			// one-pending-request index is held the shortest time (another
			// call of the same user inserting meanwhile waits for this
			// commit, then logs its own).
			if err := e.logInClaim(ctx, tx, req); err != nil {
				return err
			}
		}
		n, err := e.assignLocked(ctx, tx, task, locked, req)
		if err != nil {
			return err
		}
		take += n
		if len(locked) < want {
			break // nothing more to lock: the rest is assigned or held by others
		}
	}
	if take < allow {
		// Fewer than this caller may take: are the rest held by other
		// claimers (rowswait.go)? Then this answer would be false: roll
		// back, leave the request pending, and wait for them.
		_, held, err := e.heldEligible(ctx, tx, task, req.User)
		if err != nil {
			return err
		}
		if held && fresh {
			return errRowsLogFirst // committed pending first, then waited for
		}
		if held {
			return nil
		}
	}
	if fresh && req.ID == 0 { // nothing was locked (capped, or none left)
		if err := e.logInClaim(ctx, tx, req); err != nil {
			return err
		}
	}
	run.DurationMS = time.Since(run.started).Milliseconds()
	ok, err := e.finishRequest(ctx, tx, req.ID, take, requestStatus(req.Requested, take))
	if err != nil && !fresh {
		return fmt.Errorf("request %d: %w", req.ID, err) // committed pending before: name it
	}
	if err == nil && !ok && fresh {
		// The claim's own request, which nobody else can see, is no longer
		// taken for alive: the claim outlasted the abandoned-request bound
		// (a lock wait under heavy contention). Its caller is still here:
		// roll back and take the path of a request that must wait, logged
		// on its own and claimed for again. Returning nil would claim a
		// commit that did not happen.
		return errRowsLogFirst
	}
	if err != nil || !ok {
		return err // !ok: served meanwhile by another caller (work status): roll back ours
	}
	run.RequestsServed, run.LoansAssigned = 1, take
	if err := e.logRun(ctx, tx, task.ID, run, 0); err != nil {
		return fmt.Errorf("logging the claim: %w", err)
	}
	return e.commit(tx, "the claim of task "+task.Name)
}

// afterLockingRead follows a claim's first locking read: --query-delay
// stands for a heavy criteria query, and the claimed rows stay locked
// meanwhile, as they would; then the afterQuery test hook.
func (e *Engine) afterLockingRead(ctx context.Context, task *Task) error {
	if task.QueryDelay > 0 {
		if err := pause.For(ctx, task.QueryDelay); err != nil {
			return err
		}
	}
	hook(e.hooks.afterQuery)
	return nil
}

// claimAllowance begins a claim transaction: on a capped task it locks the
// caller's (task, user) row as the FIRST statement, ends abandoned work, and
// returns how many loans the request may take under the cap.
func (e *Engine) claimAllowance(ctx context.Context, tx *sql.Tx, task *Task, req *Request) (int, error) {
	allow := req.Requested
	if task.MaxActive > 0 {
		if _, err := e.sql().UserLock.One(ctx, tx, engineio.TaskUserParams{TaskID: task.ID, User: req.User}); err != nil {
			return 0, fmt.Errorf("locking the per-user cap of %s in task %s: %w", req.User, task.Name, err)
		}
	}
	// Abandoned work, inside the claim and after the per-user lock (which
	// stays the first statement): the count below and the claim see it
	// returned. Every claimer runs it; of two at once, the UPDATE's row
	// locks let one end a row and the other find it ended.
	if err := e.expire(ctx, tx, task); err != nil {
		return 0, err
	}
	if task.MaxActive > 0 {
		active, err := e.activeCount(ctx, tx, task, req.User)
		if err != nil {
			return 0, err
		}
		allow = underCap(allow, task.MaxActive, active)
	}
	return allow, nil
}

// logInClaim inserts a fresh rows request, pending, inside its claim
// transaction. A unique violation means the user has a pending request of
// the task already: the claim rolls back and the caller attaches to it.
func (e *Engine) logInClaim(ctx context.Context, tx *sql.Tx, req *Request) error {
	id, err := e.sql().RequestInsert.InsertID(ctx, tx, engineio.RequestInsertParams{TaskID: req.TaskID, User: req.User, Requested: req.Requested})
	if err != nil {
		if e.driver.IsUniqueViolation(err) {
			return errRowsLogFirst
		}
		return fmt.Errorf("logging the request: %w", err)
	}
	req.ID = id
	if e.hooks.loggedInClaim != nil {
		e.hooks.loggedInClaim(tx, id)
	}
	return nil
}

// assignLocked assigns those of the locked keys that are eligible still, in
// one statement (drivers.CriteriaClaim) whose SELECT runs the criteria again
// over them with a snapshot newer than the claim's: a row another caller
// assigned — and perhaps completed, returned or set to never — and committed
// after the claim's snapshot was taken, then let go of, may have been locked
// by the claim all the same; that statement sees the commit and leaves the
// row out. It returns how many it assigned.
//
// Rows claimers never collide on the one-active-row index (each holds the
// row locks of what it assigns), but a caller serving the task with another
// strategy (--lock) does not lock source rows. Where the dialect cannot skip
// such a row in the statement, the duplicate key undoes the statement only,
// and the keys are assigned one by one instead.
func (e *Engine) assignLocked(ctx context.Context, tx *sql.Tx, task *Task, locked []string, req *Request) (int, error) {
	n := 0
	// In runs under Oracle's bind limit (text keys), in order, so the work
	// ids follow the priority order still.
	for _, run := range keyChunks(task.KeyKind, locked) {
		got, err := e.assignLockedRun(ctx, tx, task, run, req)
		if err != nil {
			return 0, err
		}
		n += got
	}
	return n, nil
}

func (e *Engine) assignLockedRun(ctx context.Context, tx *sql.Tx, task *Task, locked []string, req *Request) (int, error) {
	// The keys in the source column's own type (numbers for an integer
	// task): the claim looks the rows up by the key's index.
	ids := loankey.JSON(task.KeyKind, locked)
	res, err := drivers.CriteriaClaim(e.driver.Dialect(), e.criteriaFor(task, req.User)).Exec(ctx, tx,
		engineio.ClaimParams{TaskID: task.ID, User: req.User, RequestID: req.ID, IDs: ids})
	if err == nil {
		n, err := res.RowsAffected()
		if err != nil {
			return 0, fmt.Errorf("assigning the claimed rows of task %s to %s: %w", task.Name, req.User, err)
		}
		return int(n), nil
	}
	if !e.driver.IsUniqueViolation(err) {
		return 0, fmt.Errorf("assigning the claimed rows of task %s to %s: %w", task.Name, req.User, err)
	}
	keys, err := drivers.ScanKeys(drivers.CriteriaRecheck(e.driver.Dialect(), e.criteriaFor(task, req.User)).Query(ctx, tx,
		engineio.RecheckParams{TaskID: task.ID, IDs: ids}))
	if err != nil {
		return 0, fmt.Errorf("checking the claimed rows of task %s again: %w", task.Name, err)
	}
	n := 0
	for _, loan := range keys {
		ok, err := e.insertClaimed(ctx, tx, task, loan, req)
		if err != nil {
			return 0, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// insertClaimed assigns one locked loan; false when another caller assigned
// it after this claim's snapshot (then the database's one-active-row
// constraint refuses it: no row inserted, or a unique violation that undoes
// this statement only).
func (e *Engine) insertClaimed(ctx context.Context, tx *sql.Tx, task *Task, loan string, req *Request) (bool, error) {
	res, err := e.sql().WorkInsertRows.Exec(ctx, tx, engineio.WorkInsertParams{TaskID: task.ID, LoanID: loan, User: req.User, RequestID: req.ID})
	if err != nil {
		if e.driver.IsUniqueViolation(err) {
			return false, nil
		}
		return false, fmt.Errorf("assigning loan %s to %s: %w", loan, req.User, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("assigning loan %s to %s: %w", loan, req.User, err)
	}
	return n == 1, nil
}

// checkLockable is `task create|update --lock rows`: the criteria must be
// lockable row by row, and one claim must not lock many more rows than it
// returns. It runs the claim once (one row, in a transaction rolled back)
// so the database itself says why not — FOR UPDATE refused with DISTINCT,
// GROUP BY, aggregates or such views — and asks drivers that accept a
// locking read of a view they cannot lock (LockableChecker). Then it runs
// `loanq explain`'s probe (a claim of ProbeCount rolled back, and a second
// session counting what it can still lock) and refuses a claim that locks
// more than WideLocks times what it returns, unless allowWide. It returns
// the probe's verdict, which the task keeps (task show).
func (st *store) checkLockable(ctx context.Context, t *Task, allowWide bool) (string, error) {
	rl, ok := st.driver.(drivers.RowLocker)
	if !ok {
		return "", problem.Usagef("lock strategy rows is not available on %s: use one of %s", st.driver.Name(), strategyList(st.driver))
	}
	tx, err := st.db.BeginTx(ctx, rl.RowsTxOptions())
	if err != nil {
		return "", fmt.Errorf("checking the criteria: %w", err)
	}
	defer tx.Rollback()
	cannot := func(reason string, err error) error {
		return &problem.Error{Kind: problem.Usage, Err: err,
			Msg:  fmt.Sprintf("the criteria of task %q cannot be locked row by row (--lock rows): %s", t.Name, reason),
			Hint: "lock rows needs a plain table, or a view over one table without DISTINCT, GROUP BY, aggregates or UNION; otherwise use --lock skip"}
	}
	if lc, ok := st.driver.(drivers.LockableChecker); ok {
		reason, err := lc.CheckLockable(ctx, tx, t.Source)
		if err != nil {
			return "", fmt.Errorf("checking the criteria: %w", err)
		}
		if reason != "" {
			return "", cannot(fmt.Sprintf("%s %s", t.Source, reason), nil)
		}
	}
	if _, err := rl.LockRows(ctx, tx, t.criteria(), 0, 1); err != nil {
		return "", cannot("the database refuses the locking query", err)
	}
	_ = tx.Rollback()
	// The rows probe reads only the driver: an engine over this store,
	// which serves nothing, gives explain its rows server.
	x, err := st.explainTask(ctx, t, rowsServer{&Engine{store: st}}, ProbeCount, "")
	if err != nil {
		return "", err
	}
	if x.Verdict == "warning" && !allowWide {
		fix := "create an index that serves --where and --order"
		if x.SuggestedIndex != "" {
			fix = "create the index that serves the order (a suggestion, from --where and --order): " + x.SuggestedIndex
		}
		return "", &problem.Error{Kind: problem.Usage,
			Msg: fmt.Sprintf("task %q with --lock rows: a claim of %d locks %d rows, more than %d times what it returns: concurrent callers would skip each other's locked rows and serialise (loanq explain shows the plan once the task exists)",
				t.Name, x.Probe.Claimed, x.Probe.RowsLocked, WideLocks),
			Hint: fix + "; or pass --allow-wide-locks to keep it as it is (task show then keeps the warning), or use --lock skip"}
	}
	return truncate(x.Message, 1000), nil
}

// ProbeCount is how many rows the probe of `task create|update --lock rows`
// claims.
const ProbeCount = 5

// keepVerdict stores the lock probe's verdict of task id ("": none, the
// task does not use rows).
func (a *Admin) keepVerdict(ctx context.Context, id int64, verdict string) error {
	if _, err := a.sql().TaskVerdictSet.Exec(ctx, a.db, drivers.TaskVerdictParams{ID: id,
		Verdict: sql.NullString{String: verdict, Valid: verdict != ""}}); err != nil {
		return fmt.Errorf("keeping the lock probe's verdict: %w", err)
	}
	return nil
}

// LockVerdict is the verdict of the task's last lock probe (`task create|
// update --lock rows`), "" when it was never probed.
func (a *Admin) LockVerdict(ctx context.Context, t *Task) (string, error) {
	v, err := a.sql().TaskVerdictGet.One(ctx, a.db, engineio.IDParams{ID: t.ID})
	if err != nil {
		return "", fmt.Errorf("reading the lock verdict of task %s: %w", t.Name, err)
	}
	return v.Verdict.String, nil
}
