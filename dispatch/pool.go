package dispatch

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/loanq/loanq/loankey"
	"strings"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/internal/pause"
	"github.com/loanq/loanq/problem"
)

// The candidate pool (docs/algorithm.md, "The candidate pool"). A task with
// --prefetch N keeps up to N candidate keys from its latest criteria run, in
// the criteria order, in loanq_pool. A `work get` of such a task first tries
// to be served from the pool, in one short transaction:
//
//  1. on a capped task, lock the caller's (task, user) row first (docs/algorithm.md, "The per-user cap"),
//     return abandoned work, count the user's active work;
//  2. log the request (pending, visible to nobody until the commit);
//  3. lock the first fresh pool rows nobody else is claiming
//     (drivers.ClaimPool: SKIP LOCKED; SQLite's single writer), assign those
//     still eligible in one statement that runs the criteria again over
//     their keys (assignLocked, as the rows strategy does), and delete every
//     claimed row, assigned or stale; repeat while the request is not full;
//  4. finish the request and commit: one commit per get.
//
// When the pool cannot fill the request, the transaction rolls back whole
// (nothing was assigned, nothing is pending) and the caller takes the usual
// path: the task lock or lease, coalescing, wake-ups. Every criteria run of
// a prefetch task refills the pool with what its round did not assign
// (takePool, refillPool), so without any refresher at most the caller that finds the
// pool empty waits for a query; `loanq task refill` and `serve --refill`
// keep it above its low mark so that nobody does.
//
// A pool row is a hint, never a promise: the recheck by key decides, so a
// candidate that stopped matching, was assigned in the task, was set to
// never or returned with a future time is dropped. The one-active-row index
// stays the last word.

// DefaultPrefetchTTL is how long a pooled candidate stays claimable.
const DefaultPrefetchTTL = 10 * time.Minute

// MaxPrefetch bounds a pool's size: a refill writes the whole pool in the
// lock holder's transaction.
const MaxPrefetch = 10000

// CheckPrefetchSize checks a --prefetch (0: no pool).
func CheckPrefetchSize(n int) error {
	if n < 0 || n > MaxPrefetch {
		return problem.Usagef("invalid --prefetch %d: give a pool size between 1 and %d, or 0 for no pool", n, MaxPrefetch)
	}
	return nil
}

// checkPrefetchTTL checks a --prefetch-ttl given (0, the default, is not).
func checkPrefetchTTL(ttl time.Duration) error {
	if ttl < time.Second || ttl > 24*time.Hour {
		return problem.Usagef("invalid --prefetch-ttl %s: give a duration between 1s and 24h", ttl)
	}
	return nil
}

func validatePrefetch(n *int, ttl *time.Duration, low *int) error {
	if err := CheckPrefetchSize(*n); err != nil {
		return err
	}
	if *n == 0 {
		*ttl, *low = 0, 0
		return nil
	}
	if *ttl != 0 {
		if err := checkPrefetchTTL(*ttl); err != nil {
			return err
		}
	}
	if *low < 0 || *low >= *n {
		return problem.Usagef("invalid --prefetch-low %d: give a low mark between 0 and %d (below --prefetch %d)", *low, *n-1, *n)
	}
	if *ttl == 0 {
		*ttl = DefaultPrefetchTTL
	}
	if *low == 0 {
		*low = *n / 4
	}
	return nil
}

// prefetchValues are a pool's settings as TaskSetPrefetch binds them (NULLs:
// no pool).
func prefetchValues(n int, ttl time.Duration, low int) (size, ttlMS, lowMark sql.NullInt64) {
	if n <= 0 {
		return
	}
	return positive(int64(n)), positive(ttl.Milliseconds()), sql.NullInt64{Int64: int64(low), Valid: true}
}

// servePool serves a new request of the task from its pool. It returns nil
// (and no error) when the pool cannot fill it: nothing was written, and the
// caller serves the request the usual way.
func (e *Engine) servePool(ctx context.Context, task *Task, user string, count int) (*Request, error) {
	var opts *sql.TxOptions
	if rl, ok := e.driver.(drivers.RowLocker); ok {
		opts = rl.RowsTxOptions() // InnoDB: READ COMMITTED, locks on the rows returned only
	}
	if task.MaxActive > 0 && e.caps().UserCap == drivers.UserCapRowLock {
		// Outside the claim and idempotent, as in the rows strategy.
		if _, err := e.sql().UserLockEnsure.Exec(ctx, e.db, engineio.TaskUserParams{TaskID: task.ID, User: user}); err != nil && !e.driver.IsUniqueViolation(err) {
			return nil, fmt.Errorf("preparing the per-user lock of %s: %w", user, err)
		}
	}
	var id int64
	for wait := poolHeldWait; ; wait *= 2 {
		short := false
		var unfit []string
		err := drivers.RetryDeadlock(ctx, e.driver, 4, func() error {
			var err error
			id, short, unfit, err = e.claimPool(ctx, task, user, count, opts)
			return err
		})
		if err == nil && id == 0 && len(unfit) > 0 {
			e.dropUnfit(ctx, task, unfit)
		}
		if e.driver.IsDeadlock(err) {
			return nil, nil // chosen as a victim again and again: the usual path serves it
		}
		if err != nil {
			return nil, err
		}
		if id != 0 {
			return e.readCommitted(ctx, id)
		}
		if !short || wait > poolHeldWaitMax {
			return nil, nil
		}
		// The pool could not fill the request. Fresh candidates left in it
		// are held: by a round replacing the pool (it locks every row
		// nobody claims, for the moment between its query and its commit)
		// or by claims that may give some back. A short wait for them
		// beats a criteria query (the tail of BENCHMARKS.md's pool
		// scenario with a refresher: a get that met a refill waited a
		// whole query).
		st, err := e.Pool(ctx, task)
		if err != nil || st.Size == 0 {
			return nil, err
		}
		if err := pause.For(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// poolHeldWait is the first pause before a pool claim that found the pool's
// fresh candidates held tries again; it doubles up to poolHeldWaitMax (five
// tries, 375 ms of pauses at most, then the usual path).
const (
	poolHeldWait    = 25 * time.Millisecond
	poolHeldWaitMax = 200 * time.Millisecond
)

// claimPool is servePool's transaction; it returns the served request's id,
// or 0 when the pool could not fill it (rolled back): short when it found
// too few candidates it could lock, not because of the cap or a pending
// request of the user. unfit are the claimed candidates that are no keys
// of the task (fitKeys): never bound against the source, and deleted with
// the others; when the claim rolls back, the caller deletes them alone.
func (e *Engine) claimPool(ctx context.Context, task *Task, user string, count int, opts *sql.TxOptions) (id int64, short bool, unfit []string, err error) {
	tx, err := e.db.BeginTx(ctx, opts)
	if err != nil {
		return 0, false, nil, fmt.Errorf("beginning the pool claim: %w", err)
	}
	defer tx.Rollback() // no-op after Commit
	allow := count
	if task.MaxActive > 0 && e.caps().UserCap == drivers.UserCapRowLock {
		if _, err := e.sql().UserLock.One(ctx, tx, engineio.TaskUserParams{TaskID: task.ID, User: user}); err != nil {
			return 0, false, nil, fmt.Errorf("locking the per-user cap of %s in task %s: %w", user, task.Name, err)
		}
	}
	if err := e.expire(ctx, tx, task); err != nil {
		return 0, false, nil, err
	}
	if task.MaxActive > 0 {
		active, err := e.activeCount(ctx, tx, task, user)
		if err != nil {
			return 0, false, nil, err
		}
		allow = underCap(allow, task.MaxActive, active)
		if allow == 0 {
			return 0, false, nil, nil // the usual path answers, and says why
		}
	}
	id, err = e.sql().RequestInsert.InsertID(ctx, tx, engineio.RequestInsertParams{TaskID: task.ID, User: user, Requested: count})
	if err != nil {
		if e.driver.IsUniqueViolation(err) {
			return 0, false, nil, nil // a pending request of this user: the usual path attaches to it
		}
		return 0, false, nil, fmt.Errorf("logging the request: %w", err)
	}
	req := &Request{ID: id, TaskID: task.ID, Task: task.Name, User: user, Requested: count}
	take := 0
	for round := 0; take < allow && round < maxClaimRounds; round++ {
		ids, err := drivers.ClaimPool(ctx, e.driver, tx, task.ID, task.PrefetchTTL.Milliseconds(), allow-take)
		if err != nil {
			return 0, false, nil, fmt.Errorf("claiming from the pool of task %s: %w", task.Name, err)
		}
		if len(ids) == 0 {
			break
		}
		// Only keys of the task are looked up in the source; the others
		// are deleted below with the rest of what this claim took.
		fit, bad := fitKeys(task, ids)
		unfit = append(unfit, bad...)
		// On a rows task, rows claims beside this one lock the source rows
		// they assign: hold those of these candidates too, or leave them.
		locked, err := e.lockSourceRows(ctx, tx, task, fit)
		if err != nil {
			return 0, false, nil, err
		}
		n, err := e.assignLocked(ctx, tx, task, locked, req)
		if err != nil {
			return 0, false, nil, err
		}
		if task.FourEyes && n < len(locked) {
			// Maybe a candidate this user worked in a task the four-eyes
			// rule names (governance.go): it must stay in the pool, in its
			// place, for the others. Roll back; the usual path's round
			// passes over it and serves this request.
			return 0, true, unfit, nil
		}
		if err := e.dropPooled(ctx, tx, task, ids); err != nil {
			return 0, false, nil, err
		}
		take += n
	}
	if take < allow {
		return 0, true, unfit, nil // roll back: the usual path serves it, and refills the pool
	}
	// take is allow here, at least 1: partial only by the cap.
	if _, err := e.sql().RequestFinishPooled.Exec(ctx, tx, engineio.RequestFinishParams{Assigned: take, Status: requestStatus(count, take), ID: id}); err != nil {
		// Not named: it is not committed (see finishRequest).
		return 0, false, nil, fmt.Errorf("finishing the request: %w", err)
	}
	if err := e.commit(tx, "the pool claim of task "+task.Name); err != nil {
		return 0, false, nil, err
	}
	return id, false, nil, nil
}

func (e *Engine) dropPooled(ctx context.Context, q drivers.Querier, task *Task, ids []string) error {
	for _, run := range keyChunks(loankey.Text, ids) {
		if _, err := e.sql().PoolDrop.Exec(ctx, q, engineio.PoolIDsParams{TaskID: task.ID, IDs: loankey.TextJSON(run)}); err != nil {
			return fmt.Errorf("removing claimed candidates from the pool of task %s: %w", task.Name, err)
		}
	}
	return nil
}

// dropUnfit deletes, in a statement of its own, pool rows that are no keys
// of the task (fitKeys) which a claim that rolled back had taken: else a
// rows task's callers, whose claims do not refill the pool, would take
// them again at every get until the pool fell to its low mark. Best
// effort, bounded: a row another claim or round holds now is deleted at
// its commit (both leave unfit keys out and drop what they took), so a
// failed or timed-out delete is no error for this caller, who has loans
// to get.
func (e *Engine) dropUnfit(ctx context.Context, task *Task, unfit []string) {
	ctx, cancel := context.WithTimeout(ctx, dropUnfitBound)
	defer cancel()
	_ = e.dropPooled(ctx, e.db, task, unfit)
}

// dropUnfitBound bounds dropUnfit's wait for rows another transaction holds.
const dropUnfitBound = 2 * time.Second

// roundPool is what a serving round of a prefetch task took of its pool.
type roundPool struct {
	loans   []string        // what the round found, less what claims hold or assigned
	claimed []string        // pool rows the round locked (nobody was claiming them)
	held    map[string]bool // pool rows claims under way hold
}

// takePool runs in a serving round of a prefetch task, after its criteria
// query and before it assigns anything; pool claims run beside it. The
// round never waits for a claim, so no lock cycle can form between them:
//
//   - it locks every pool row nobody is claiming (SKIP LOCKED): those are
//     its own to drop and replace;
//   - it reads, outside its transaction (MySQL's REPEATABLE READ snapshot
//     would predate them), the pool rows it could not lock, which claims
//     under way hold, and then which of its loans are active now: a claim
//     that committed before the first read shows in the second, one that
//     commits after it held its rows at the first;
//   - it leaves both out of what it assigns, so it never meets a claim on
//     the one-active-row index.
//
// A loan a claim assigned and its processor disposed of while the round's
// query ran is in neither set: its pool row is gone and it is active no
// more. Only the recheck by key that follows (recheckCandidates) keeps the
// round from handing it out a second time.
func (e *Engine) takePool(ctx context.Context, tx *sql.Tx, task *Task, found []string) (*roundPool, error) {
	rp := &roundPool{held: map[string]bool{}}
	var err error
	// Every row, fresh or not: the round replaces the whole pool.
	if rp.claimed, err = drivers.ClaimPool(ctx, e.driver, tx, task.ID, allAges.Milliseconds(), 4*MaxPrefetch); err != nil {
		return nil, fmt.Errorf("taking the pool of task %s for its refill: %w", task.Name, err)
	}
	mine := make(map[string]bool, len(rp.claimed))
	for _, id := range rp.claimed {
		mine[id] = true
	}
	all, err := engineio.LoanIDs(e.sql().PoolKeys.All(ctx, e.db, engineio.TaskParams{TaskID: task.ID}))
	if err != nil {
		return nil, fmt.Errorf("reading the pool of task %s: %w", task.Name, err)
	}
	for _, id := range all {
		if !mine[id] {
			rp.held[id] = true
		}
	}
	gone := map[string]bool{}
	for _, run := range keyChunks(loankey.Text, found) {
		taken, err := engineio.LoanIDs(e.sql().ActiveAmong.All(ctx, e.db, engineio.PoolIDsParams{TaskID: task.ID, IDs: loankey.TextJSON(run)}))
		if err != nil {
			return nil, fmt.Errorf("reading the loans assigned from the pool of task %s meanwhile: %w", task.Name, err)
		}
		for _, id := range taken {
			gone[id] = true
		}
	}
	rp.loans = make([]string, 0, len(found))
	for _, id := range found {
		if !gone[id] && !rp.held[id] {
			rp.loans = append(rp.loans, id)
		}
	}
	return rp, nil
}

// allAges is a time to live that every pool row is younger than.
const allAges = 100 * 365 * 24 * time.Hour

// refillPool replaces the pool rows the round took with the candidates it
// did not assign, in order, at most --prefetch of them (less the rows
// claims still hold), and returns how many it put in.
func (e *Engine) refillPool(ctx context.Context, tx *sql.Tx, task *Task, rp *roundPool, leftovers []string) (int, error) {
	if err := e.dropPooled(ctx, tx, task, rp.claimed); err != nil {
		return 0, err
	}
	leftovers = leftovers[:min(len(leftovers), max(0, task.Prefetch-len(rp.held)))]
	for start := 0; start < len(leftovers); {
		// Chunks under Oracle's 4,000-byte bind limit, as for WorkInsertMany.
		var b strings.Builder
		b.WriteByte('[')
		end := start
		for ; end < len(leftovers); end++ {
			one := `[` + quoteKey(leftovers[end]) + `,0,""]`
			if end > start && b.Len()+len(one)+2 > maxAssignmentsJSON {
				break
			}
			if end > start {
				b.WriteByte(',')
			}
			b.WriteString(one)
		}
		b.WriteByte(']')
		if _, err := e.sql().PoolFill.Exec(ctx, tx, engineio.PoolFillParams{TaskID: task.ID, Offset: start, Candidates: b.String()}); err != nil {
			return 0, fmt.Errorf("refilling the pool of task %s: %w", task.Name, err)
		}
		start = end
	}
	return len(leftovers), nil
}

// PoolStatus is what `task show` and `task stats` say of a task's pool.
type PoolStatus struct {
	Size int `json:"size"` // fresh candidates
	// AgeS is how long ago the oldest fresh candidate was found (nil: none).
	AgeS    *int64 `json:"age_s"`
	Hits    int64  `json:"hits"`    // requests served from the pool
	Refills int64  `json:"refills"` // criteria runs that refilled it
}

// Pool reads a prefetch task's pool figures (nil for a task without pool).
func (st *store) Pool(ctx context.Context, task *Task) (*PoolStatus, error) {
	if task.Prefetch <= 0 {
		return nil, nil
	}
	r, err := st.sql().PoolStats.One(ctx, st.db, engineio.TaskTTLParams{TaskID: task.ID, TTLMS: task.PrefetchTTL.Milliseconds()})
	if err != nil {
		return nil, fmt.Errorf("reading the pool of task %s: %w", task.Name, err)
	}
	p := PoolStatus{Size: r.Fresh, Hits: r.Hits, Refills: r.Refills}
	if r.AgeS.Valid {
		p.AgeS = &r.AgeS.Int64
	}
	return &p, nil
}

// RefillOutcome is what one refill did.
type RefillOutcome struct {
	Task    string `json:"task"`
	Before  int    `json:"before"` // fresh candidates before
	After   int    `json:"after"`
	Refused string `json:"skipped,omitempty"` // why nothing was done
}

// Refill runs one criteria query of a prefetch task under its task lock or
// lease and puts what it found in the pool (serving the task's pending
// requests first, as any round does). force: refill even when the pool is
// above its low mark. A task whose lock is held is skipped: its holder is
// running a query, which refills the pool at its commit.
func (e *Engine) Refill(ctx context.Context, task *Task, force bool) (RefillOutcome, error) {
	out := RefillOutcome{Task: task.Name}
	if task.Prefetch <= 0 {
		return out, problem.Usagef("task %s has no candidate pool: give it one with `loanq task update %s --prefetch N`", task.Name, task.Name)
	}
	if err := e.runnable(task); err != nil {
		return out, err
	}
	st, err := e.Pool(ctx, task)
	if err != nil {
		return out, err
	}
	out.Before, out.After = st.Size, st.Size
	if !force && st.Size > task.PrefetchLow {
		out.Refused = fmt.Sprintf("above its low mark (%d > %d)", st.Size, task.PrefetchLow)
		return out, nil
	}
	// A refill is background work that no caller waits for: where InnoDB
	// picks it as a deadlock victim against the claims (it deletes the
	// pool rows they took while they lock theirs), it tries again, more
	// often than a caller's claim would (4 tries failed once in a full run
	// beside 10 claimers: TestPoolConcurrentClaimsAndRefills/mysql).
	err = drivers.RetryDeadlock(ctx, e.driver, 8, func() error {
		if task.Lock == drivers.Lease {
			return e.serveRoundLeaseMode(ctx, task, nil, true)
		}
		return e.refillRowLock(ctx, task)
	})
	if errors.Is(err, errBusy) || (err != nil && problem.KindOf(err) == problem.Busy) {
		out.Refused = "its lock is held: the holder's run refills it"
		return out, nil
	}
	if err != nil {
		return out, err
	}
	if st, err = e.Pool(ctx, task); err != nil {
		return out, err
	}
	out.After = st.Size
	return out, nil
}

// refillRowLock is a refill round under the task's row lock, skipping when
// it is held (every row-lock strategy, rows included: a rows task's callers
// never take it, so it serialises only refills).
func (e *Engine) refillRowLock(ctx context.Context, task *Task) error {
	tx, err := e.db.BeginTx(ctx, e.roundTxOptions(task))
	if err != nil {
		return fmt.Errorf("beginning the refill transaction: %w", err)
	}
	defer tx.Rollback()
	_, err = e.sql().Lock(drivers.Skip).One(ctx, tx, engineio.TaskParams{TaskID: task.ID})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return errBusy
	case err != nil:
		return fmt.Errorf("taking the lock of task %s for a refill: %w", task.Name, err)
	}
	return e.serveLockedMode(ctx, tx, task, task.Lock, nil, true)
}

// refillIfLow refills a rows task's pool after its caller was served the
// rows way (the rows strategy has no rounds that would refill it), skipping
// when it is above its low mark or someone else is refilling.
func (e *Engine) refillIfLow(ctx context.Context, task *Task) {
	if task.Prefetch <= 0 || task.Lock != drivers.Rows {
		return
	}
	_, _ = e.Refill(ctx, task, false)
}

// RefillAll refills every prefetch task at or below its low mark (task
// refill --all, serve --refill).
func (e *Engine) RefillAll(ctx context.Context) ([]RefillOutcome, error) {
	tasks, err := e.Tasks(ctx)
	if err != nil {
		return nil, err
	}
	outs := []RefillOutcome{}
	for _, t := range tasks {
		if t.Prefetch <= 0 {
			continue
		}
		out, err := e.Refill(ctx, t, false)
		if err != nil {
			return outs, fmt.Errorf("task %s: %w", t.Name, err)
		}
		outs = append(outs, out)
	}
	return outs, nil
}

// roundTxOptions are the options of a serving round's transaction: READ
// COMMITTED, which row-lock claims need, where the database's default is
// another level (InnoDB's REPEATABLE READ). Every statement of the round then
// sees what committed before it: the requests logged while its query ran,
// read in the round's own transaction (Capabilities.RoundReads, assign.go)
// instead of through a second connection, which a round holding the task
// lock would wait for where the pool is bounded (serve --max-conns, its
// other connections held by callers queued on that lock); the commits of
// the pool and rows claims that ran beside its query, which its recheck
// must see (recheck.go); and no next-key locks on the rows and gaps its
// locking reads scanned, which those claims would meet.
func (e *Engine) roundTxOptions(*Task) *sql.TxOptions {
	if rl, ok := e.driver.(drivers.RowLocker); ok {
		return rl.RowsTxOptions()
	}
	return nil
}
