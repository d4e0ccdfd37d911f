package drivers

import (
	"reflect"
	"strconv"
	"strings"
)

// Statements holds every fixed statement a dialect sends, by purpose. Each
// driver fills one in its sql.go; the engine executes these strings and
// `loanq sql` prints them, so documentation cannot drift from behaviour.
//
// Bind order is given in each field's comment and is the same for every
// dialect; only the placeholder syntax differs ($1, ?, :1).
type Statements struct {
	// Now reads the database clock. All loanq times come from the database.
	Now string `purpose:"read the database clock"`

	// --- tasks ---

	// TaskInsert binds: name, source, key, criteria, order, max_active (NULL for
	// none), lock_strategy, query_delay_ms, lease_ttl_ms, created_by,
	// hold_limit_ms (NULL for the derived default).
	TaskInsert string `purpose:"create a task"`
	// TaskByName binds: name. TaskByID binds: id. Both, and TaskList, select in
	// order: id, name, source, key, criteria, order, max_active, lock_strategy,
	// query_delay_ms, lease_ttl_ms, created_by, created_at, hold_limit_ms.
	TaskByName string `purpose:"read a task by name"`
	TaskByID   string `purpose:"read a task by id"`
	TaskList   string `purpose:"list tasks"`
	// TaskRuns binds: task id; the ten most recent criteria-query runs.
	TaskRuns string `purpose:"recent criteria-query runs of a task"`

	// --- the request log (SPEC §3 step 1) ---

	// RequestInsert binds: task id, user, requested. Committed on its own before
	// the lock is tried, so a request is never lost with a rolled-back transaction.
	RequestInsert string `purpose:"record a work request (committed before the lock)"`
	// RequestByID binds: id. Columns: id, task id, task name, user, requested,
	// assigned, status, created_at, served_at.
	RequestByID string `purpose:"read a work request"`
	// RequestsPending binds: task id. Oldest first: id, user, requested.
	// Ordered by created_at, then id, on every dialect: ids are not arrival
	// order on Oracle RAC, where identity columns are NOORDER and each
	// instance hands out ids from its own cached range.
	RequestsPending string `purpose:"pending requests of a task, oldest first"`
	// RequestFinish binds: assigned, status, id. Only a pending request changes.
	RequestFinish string `purpose:"set a request's outcome"`
	// RequestLoans binds: request id. The loans assigned to it.
	RequestLoans string `purpose:"loans assigned to a request"`

	// --- the task lock (SPEC §3 step 2), one per strategy ---

	// LockSkip, LockNoWait, LockWait bind: task id. Each must be the first
	// statement of its transaction (seed 002).
	LockSkip   string `purpose:"task lock, strategy skip"`
	LockNoWait string `purpose:"task lock, strategy nowait"`
	LockWait   string `purpose:"task lock, strategy wait"`
	// LeaseAcquire binds: owner, ttl ms, task id. Takes the lease when it is free
	// or expired, and bumps the fencing token. One row affected means taken.
	LeaseAcquire string `purpose:"task lock, strategy lease: take the lease"`
	// LeaseToken binds: task id, owner. Reads the token just taken.
	LeaseToken string `purpose:"task lock, strategy lease: read the fencing token"`
	// LeaseFenceRelease binds: task id, owner, token. The first statement of the
	// assignment transaction: it succeeds (one row) only while the caller still
	// holds an unexpired lease with its token, and frees the lease at commit.
	LeaseFenceRelease string `purpose:"task lock, strategy lease: fencing check and release at commit"`
	// LeaseRelease binds: task id, owner, token. Frees the lease after a failure.
	LeaseRelease string `purpose:"task lock, strategy lease: give the lease back"`

	// --- assignments ---

	// ActiveCountForUser binds: task id, user. Read after the lock (max_active).
	ActiveCountForUser string `purpose:"a user's active work in a task (per-user cap)"`
	// WorkInsert binds: task id, loan id, user, request id.
	WorkInsert string `purpose:"assign a loan"`
	// QueryRunInsert binds: task id, strategy, holder, started_at, duration_ms,
	// rows_found, requests_served, loans_assigned.
	QueryRunInsert string `purpose:"log a criteria-query run"`

	// --- dispositions (SPEC §4) ---

	// ActiveWork binds: task id, loan id. Columns: work id, user.
	ActiveWork string `purpose:"the active assignment of a loan in a task"`
	// LastWork binds: task id, loan id. Columns: disposition, user. Most recent
	// first, by assigned_at then id (ids: see RequestsPending).
	LastWork string `purpose:"the latest assignment of a loan in a task"`
	// Dispose binds: disposition, return-after milliseconds (NULL unless return), work id, user.
	Dispose string `purpose:"end an assignment with a disposition"`

	// --- pipeline ---

	// Pipeline binds: user, task name, task name. Oldest first: task, loan,
	// assigned_at, seconds since assignment. An empty task name means all tasks.
	Pipeline string `purpose:"a user's active work, oldest first"`

	// --- engine under contention: wake-ups, lease heartbeat, rows, coalescing
	// (docs/algorithm.md, "Waiting", "Lease heartbeat", "The rows strategy") ---

	// RequestWake binds: request id. Columns: status, lease owner (NULL when
	// none), lease free (1 when no unexpired lease, else 0). What a waiting
	// caller reads: after its queued lock was granted, or at each poll.
	RequestWake string `purpose:"wake-up: a waiting caller reads its request and the task's lease"`
	// WaitLockSave binds nothing: the session's lock wait limit, read on the
	// waiter's connection before its transaction, to restore afterwards.
	WaitLockSave string `purpose:"wake-up: read the session lock wait limit" empty:"the bounded wait needs no session setting restored"`
	// WaitLockSet binds: milliseconds. Sent in the waiter's transaction just
	// before LockWaitBounded: it bounds how long the queued lock waits.
	WaitLockSet string `purpose:"wake-up: bound the waiter's lock wait" empty:"the bound is written in LockWaitBounded"`
	// WaitLockRestore binds: the value WaitLockSave read. Sent in the
	// waiter's transaction as soon as the lock is granted (the waiter may go
	// on to serve), and on the same connection after the transaction.
	WaitLockRestore string `purpose:"wake-up: restore the session lock wait limit" empty:"the bounded wait needs no session setting restored"`
	// LockWaitBounded binds: task id. A plain queued FOR UPDATE on the task
	// row; {wait_s} is replaced by the bound in whole seconds (Oracle's
	// FOR UPDATE WAIT n takes a literal).
	LockWaitBounded string `purpose:"wake-up: queue on the task lock, bounded" empty:"no row locks: waiters poll RequestWake"`
	// RecentRuns binds: task id. Columns: number of runs, mean duration_ms of
	// the task's ten latest criteria-query runs.
	RecentRuns string `purpose:"wake-up and coalescing: recent criteria-query time of a task"`
	// RequestRate binds: task id, window ms. Columns: requests and loans
	// requested in the window ending now.
	RequestRate string `purpose:"coalescing: recent arrival rate of a task's requests"`
	// LeaseRenew binds: ttl ms, task id, owner, token. The holder's heartbeat:
	// one row while it still holds an unexpired lease with its token.
	LeaseRenew string `purpose:"lease heartbeat: renew the lease while the criteria query runs"`
	// LeaseHolder binds: task id. The holder of an unexpired lease, no row
	// when the lease is free.
	LeaseHolder string `purpose:"lease: who holds an unexpired lease"`
	// LeaseTakeOver binds: owner, ttl ms, task id, dead owner. Takes a lease
	// whose holder's process is known to be gone (same host), bumping the
	// token; one row only while the dead owner still holds it.
	LeaseTakeOver string `purpose:"lease: take over the lease of a dead holder of this host"`
	// UserLockEnsure binds: task id, user. Makes sure the (task, user) row
	// exists; a concurrent insert of the same row may fail with a unique
	// violation, which the engine ignores.
	UserLockEnsure string `purpose:"rows: make sure the per-user cap lock row exists" empty:"no rows strategy"`
	// UserLock binds: task id, user. The first statement of a rows claim on a
	// capped task: serialises the cap check of one (task, user).
	UserLock string `purpose:"rows: lock the per-user cap row" empty:"no rows strategy"`
	// WorkInsertRows binds as WorkInsert. A loan another caller assigned
	// after this caller's snapshot is skipped: no row inserted (PostgreSQL's
	// ON CONFLICT DO NOTHING) or a unique violation that rolls back only the
	// statement (MySQL/MariaDB and Oracle).
	WorkInsertRows string `purpose:"rows: assign a locked loan unless it was assigned meanwhile" empty:"no rows strategy"`

	// --- `loanq bench`: the item table of seed 001 (SPEC §6) ---
	//
	// The claim path is written here once for every dialect and run by
	// Statements.ClaimItems, so the engine can claim rows the same way later.

	// BenchReset empties the item table before a run.
	BenchReset string `purpose:"bench: empty the item table"`
	// BenchFill binds: first id, count. Inserts ids first … first+count-1 as
	// ready; called in chunks of at most 1000 (MySQL's default
	// cte_max_recursion_depth).
	BenchFill string `purpose:"bench: insert ready items"`
	// BenchBegin binds nothing. Sent on the worker's connection right before
	// each claim transaction begins, where the dialect's default isolation
	// would make claims collide: InnoDB's REPEATABLE READ takes next-key (gap)
	// locks on the scanned index range, and finishing an item — its index
	// entry moves from (ready, id) to (done, id), into a gap another worker
	// has locked — then deadlocks against the other claimers.
	BenchBegin string `purpose:"bench: before each claim transaction" empty:"the default isolation, READ COMMITTED, takes no gap locks"`
	// BenchClaimSkip, BenchClaimNoWait, BenchClaimWait bind: K. Each locks up to
	// K ready items, in id order, until the caller's transaction ends and, unless
	// BenchClaimRead is set, returns their ids. Only the lock clause differs: skip
	// passes over rows other transactions hold, nowait fails on the first held
	// row, wait queues behind it.
	BenchClaimSkip   string `purpose:"bench claim, strategy skip: lock up to K ready items, passing over held ones" empty:"row-lock strategies are not available; the bench runs lease"`
	BenchClaimNoWait string `purpose:"bench claim, strategy nowait: lock up to K ready items or fail at once" empty:"row-lock strategies are not available; the bench runs lease"`
	BenchClaimWait   string `purpose:"bench claim, strategy wait: lock up to K ready items, queueing behind holders" empty:"row-lock strategies are not available; the bench runs lease"`
	// BenchClaimRead binds nothing. Set where a claim statement returns no rows
	// (Oracle's procedure call): it reads the ids the caller's transaction has
	// just claimed.
	BenchClaimRead string `purpose:"bench claim: read the ids the transaction just locked" empty:"the claim statements return the ids themselves"`
	// BenchLeaseClaim binds: owner, ttl ms, K. Marks up to K ready items claimed
	// by owner until now + ttl, and returns their ids unless BenchLeaseRead is
	// set. Run in its own short transaction, which is committed at once: the
	// lease, not a lock, keeps others off the items while they are worked on.
	BenchLeaseClaim string `purpose:"bench claim, strategy lease: mark up to K ready items claimed, with an expiry"`
	// BenchLeaseRead binds: owner. The items owner holds a lease on (MySQL and
	// Oracle, which have no UPDATE … RETURNING of several rows).
	BenchLeaseRead string `purpose:"bench claim, strategy lease: read the ids just leased" empty:"the lease claim returns the ids itself (UPDATE … RETURNING)"`
	// BenchDone binds: owner, id. Finishes an item claimed with a row lock, in
	// the claim's transaction. It matches the id alone and counts, so an item
	// finished twice shows up as processed > 1 instead of being hidden.
	BenchDone string `purpose:"bench: finish an item held by a row lock"`
	// BenchLeaseDone binds: id, owner. Finishes a leased item, fenced: one row
	// only while owner still holds an unexpired lease; 0 rows means the lease
	// was lost and the work must not count.
	BenchLeaseDone string `purpose:"bench: finish a leased item (fencing check)"`
	// BenchLeaseExpire binds nothing. Puts items whose lease ran out back to
	// ready (their holder died or overran); run when no ready item is left.
	BenchLeaseExpire string `purpose:"bench: put items with expired leases back"`
	// BenchReady binds nothing: how many items are still ready.
	BenchReady string `purpose:"bench: count ready items"`
	// BenchSummary binds nothing. Columns: items, done, duplicates (processed
	// more than once), total processed, never processed.
	BenchSummary string `purpose:"bench: audit the run (duplicates, missed items)"`
	// BenchByOwner binds nothing. Columns: owner, items finished.
	BenchByOwner string `purpose:"bench: items finished per worker"`

	// --- the hold limit: the database ends a stalled lock holder's session
	// (docs/reliability.md) ---

	// HoldMeasured binds: task id. The longest of the task's ten most recent
	// criteria-query runs in milliseconds (NULL when it has none): the
	// default hold limit is derived from it.
	HoldMeasured string `purpose:"hold limit: the task's recent criteria-query time"`
	// HoldLimitSet binds: the idle limit, then the statement limit, in
	// milliseconds. Sent in the lock transaction right after the task lock:
	// the server ends the session (rolling back and freeing the lock) when it
	// stays idle inside the transaction longer than the first, whether its
	// client is stopped, cut off or gone, and aborts one statement running
	// longer than the second.
	HoldLimitSet string `purpose:"hold limit: make the server end this session if it holds the task lock too long" empty:"no session setting bounds it: SQLite has no row-lock strategy (the lease TTL bounds a holder); on Oracle a DBA configures it (docs/oracle.md)"`
	// HoldLimitReset binds nothing. Restores the session defaults that
	// HoldLimitSet changed, before its pooled connection serves anything else.
	HoldLimitReset string `purpose:"hold limit: restore the session's defaults before the connection is reused" empty:"the settings end with the transaction (SET LOCAL), or none were made"`

	// --- `loanq bench`: the server it ran on, batched finishes ---

	// ServerVersion binds nothing. One text column: the server's product and
	// version as the server itself reports it (so a MariaDB behind a mysql://
	// DSN is named MariaDB), printed in bench results.
	ServerVersion string `purpose:"bench: name the server product and version"`
	// BenchDoneMany binds: owner, the ids as a JSON array text ("[3,7,9]").
	// Finishes every item of a batch claim with one statement, in the claim's
	// transaction. Like BenchDone it matches the ids alone and counts, so an
	// item finished twice still shows up as processed > 1.
	BenchDoneMany string `purpose:"bench: finish a batch of items held by row locks, one statement"`
	// BenchLeaseDoneMany binds: owner, the ids as a JSON array text. The fenced
	// finish of a batch of leased items: only the items owner still holds an
	// unexpired lease on change; fewer rows than ids means leases were lost.
	BenchLeaseDoneMany string `purpose:"bench: finish a batch of leased items (fencing check), one statement"`
	// BenchClaimDone binds: owner, K. The raw limit of a batched claim: one
	// statement, in autocommit, that claims up to K ready items passing over
	// locked ones and finishes them; rows affected is how many. Measured
	// beside `bench --batch K` with no work time, as what a batch could reach.
	BenchClaimDone string `purpose:"bench: raw limit, claim and finish up to K items in one statement" empty:"not measured on this database (no single-statement skip-locked claim)"`

	// --- `loanq lock run`: named leases in loanq_lock (the farm singleton) ---
	//
	// A lock row is created on first use (NamedLockEnsure, a duplicate is
	// ignored, so two first users cannot both fail or both create it) and then
	// only ever updated: taking is one UPDATE that succeeds only when the lock
	// is free or expired by the database clock, so of N racing takers exactly
	// one gets a row. See docs/algorithm.md, "Named locks".

	// NamedLockEnsure binds: name. Creates the free lock row unless it exists.
	// A unique violation (a racing creator) counts as success.
	NamedLockEnsure string `purpose:"lock run: create the lock's row if missing (a duplicate is ignored)"`
	// NamedLockTake binds: holder, ttl ms, name. One row affected means taken;
	// it bumps the fencing token and sets taken_at and expires_at from the
	// database clock.
	NamedLockTake string `purpose:"lock run: take the lock when free or expired, bumping the token"`
	// NamedLockRead binds: name. Columns: holder, token, taken_at, expires_at,
	// the database clock.
	NamedLockRead string `purpose:"lock run: read one lock"`
	// NamedLockRenew binds: ttl ms, name, holder, token. One row only while
	// the caller still holds the unexpired lease with its token.
	NamedLockRenew string `purpose:"lock run: renew the lease (fenced by holder and token)"`
	// NamedLockRelease binds: name, holder, token. Frees the lock only if the
	// caller is still its holder with its token.
	NamedLockRelease string `purpose:"lock run: release the lock (fenced by holder and token)"`
	// NamedLockList binds nothing. Columns: name, holder, token, taken_at,
	// expires_at, the database clock; by name.
	NamedLockList string `purpose:"lock list: every named lock"`

	// --- the supervisor view: `loanq task stats` (portable ones: drivers.SupervisorQueries) ---

	// StatsDispositions binds: window ms. Columns: task name, disposition,
	// count; dispositions made in the last window by the database clock.
	StatsDispositions string `purpose:"task stats: dispositions in the last window, per task and kind"`
	// StatsRuns binds: window ms. Columns: task name, duration_ms,
	// requests_served of the criteria-query runs started in the last window,
	// newest first (percentiles are computed by the caller: the dialects do
	// not share a percentile function).
	StatsRuns string `purpose:"task stats: criteria-query runs in the last window"`

	// --- `loanq serve`: the dashboard and /metrics (docs/dashboard.md) ---
	//
	// Read-only, from loanq's own tables only (never a task's criteria
	// query), each through an index where the dialect has one that fits.
	// Ages are whole seconds measured against the database clock; "today" is
	// the UTC day of the database clock.

	// DashPending binds nothing. Columns: task id, pending requests, age in
	// seconds of the oldest pending one.
	DashPending string `purpose:"dashboard: pending requests per task and the oldest one's age"`
	// DashActive binds: hold in seconds. Columns: task id, user, active
	// assignments, age in seconds of the oldest, how many are at least hold
	// seconds old.
	DashActive string `purpose:"dashboard: active work per task and user, oldest age, held past the limit"`
	// The work history has no index on disposed_at, so dispositions are
	// counted in two parts split at a "floor" id: rows below it had all
	// ended before today when the floor was read, and never change again
	// (a disposition is set once), so they are counted once an hour; rows
	// from the floor up are a primary-key range, counted at every refresh.
	//
	// DashDoneFloor binds nothing. Columns: the lowest id of active work, the
	// lowest id of work ended today, the highest id (each NULL when none).
	// Reads the whole history: run once an hour.
	DashDoneFloor string `purpose:"dashboard: the floor id under which the work history no longer changes (hourly)"`
	// DashDoneBefore binds: floor id. Columns: task id, user, disposition,
	// how many. Run with each new floor.
	DashDoneBefore string `purpose:"dashboard: dispositions below the floor id (hourly)"`
	// DashDone binds: floor id. Columns: task id, user, disposition, how many,
	// how many today. A primary-key range from the floor.
	DashDone string `purpose:"dashboard: dispositions from the floor id up, in all and today"`
	// DashRuns binds: task id, how many. The latest criteria-query runs of a
	// task, newest first. Columns: id, age in seconds of its start,
	// duration_ms, rows_found, requests_served, loans_assigned.
	DashRuns string `purpose:"dashboard: a task's latest criteria-query runs, with their age"`
	// DashDispositions binds: task id, how many. A task's latest ended
	// assignments, newest assignment first. Columns: loan id, user,
	// disposition, seconds since the disposition, seconds the loan was held.
	DashDispositions string `purpose:"dashboard: a task's latest dispositions"`

	// --- cancelled requests and one pending request per user and task
	// (docs/algorithm.md, "Cancelling and attaching") ---

	// RequestPendingFor binds: task id, user. The user's pending request of
	// the task, if any (at most one: loanq_request_one_pending_uq).
	// Columns: id.
	RequestPendingFor string `purpose:"a user's pending request of a task (attach instead of asking twice)"`
	// RequestCancel binds: id, user. Only a pending request of that user
	// changes: 0 rows means it was served (or cancelled) meanwhile, decided
	// by the database against a holder's RequestFinish.
	RequestCancel string `purpose:"cancel a user's pending request"`

	// --- abandoned work: --max-hold and `work reclaim` (docs/algorithm.md,
	// "Abandoned work: --max-hold") ---

	// TaskSetMaxHold binds: max_hold_ms (NULL: none), task id.
	TaskSetMaxHold string `purpose:"set a task's max hold (age past which active work expires)"`
	// WorkExpire binds: task id, max hold in ms. Ends the task's active work
	// assigned at least that long ago (database clock) as 'expired'; run by
	// the engine inside its serving transaction, under the task lock.
	WorkExpire string `purpose:"expire a task's active work older than its max hold"`
	// WorkOlder binds: task id, user ('' for all), the same user, age in ms.
	// The task's active work at least that old, oldest first. Columns: work
	// id, loan id, user, assigned_at, age in seconds.
	WorkOlder string `purpose:"a task's active work older than an age, optionally of one user"`
	// WorkReclaim binds: supervisor, work id. Ends one active assignment as
	// 'reclaimed' (0 rows: it ended meanwhile).
	WorkReclaim string `purpose:"reclaim one active assignment (a supervisor returns it)"`

	// --- `task update` ---

	// TaskUpdate binds: source, key, criteria, order, max_active (NULL: no
	// cap), lock strategy, query_delay_ms, lease_ttl_ms, hold_limit_ms (NULL:
	// derived), max_hold_ms (NULL: never), task id. A row-lock holder keeps
	// the task row locked while it serves, so the update waits for it.
	TaskUpdate string `purpose:"change a task's definition (task update)"`
}

// Named is one statement with its purpose.
type Named struct {
	Field   string
	Purpose string
	SQL     string
	// Empty says why a dialect may leave the statement empty ("" when it must not).
	Empty string
}

// List returns the statements in declaration order with their purposes.
func (s *Statements) List() []Named {
	v := reflect.ValueOf(s).Elem()
	t := v.Type()
	out := make([]Named, 0, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		out = append(out, Named{Field: f.Name, Purpose: f.Tag.Get("purpose"), SQL: strings.TrimSpace(v.Field(i).String()),
			Empty: f.Tag.Get("empty")})
	}
	return out
}

// Missing lists fields a driver left empty that no dialect may leave empty
// (fields with an "empty" tag are optional); Oracle's tests check it.
func (s *Statements) Missing() []string {
	var out []string
	for _, n := range s.List() {
		if n.SQL == "" && n.Empty == "" {
			out = append(out, n.Field)
		}
	}
	return out
}

// Lock returns the lock statement of a row-lock strategy.
func (s *Statements) Lock(st Strategy) string {
	switch st {
	case Skip:
		return s.LockSkip
	case NoWait:
		return s.LockNoWait
	case Wait:
		return s.LockWait
	}
	return ""
}

// BoundedLock returns LockWaitBounded with its bound in whole seconds.
func (s *Statements) BoundedLock(seconds int) string {
	return strings.ReplaceAll(s.LockWaitBounded, "{wait_s}", strconv.Itoa(seconds))
}

// BenchClaim returns the bench claim statement of a row-lock strategy.
func (s *Statements) BenchClaim(st Strategy) string {
	switch st {
	case Skip:
		return s.BenchClaimSkip
	case NoWait:
		return s.BenchClaimNoWait
	case Wait:
		return s.BenchClaimWait
	case Rows: // on the item table, claiming straight from it is what skip does
		return s.BenchClaimSkip
	}
	return ""
}
