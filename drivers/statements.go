package drivers

import (
	"github.com/loanq/loanq/drivers/engineio"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// Statements holds every fixed statement of the engine, by purpose: the
// engine's contract with the drivers (tasks, requests, the task lock per
// strategy, assignments, dispositions, the pipeline, wake-ups, the hold
// limit, the pool, the rows strategy, identity, cancel and signs of life,
// max hold and reclaim, task update). The statements of the other features
// (named locks, the dashboard, prune, …) are catalogues of their own,
// beside the code that reads them (drivers.Catalogue, catalogue.go). The
// portable definitions (Portable, portable.go) are written once; a
// driver's sql.go overrides only what its database says differently, and
// Build compiles the result for the dialect. The engine runs these
// statements and `loanq sql` prints them, so documentation cannot drift
// from behaviour.
//
// Each field's type names its parameters (Stmt[TaskParams] binds a task id)
// and, for a statement that returns rows, its row type (Query[TaskParams,
// RunRow]): a call passes a typed value, the binds are taken from it by name,
// and the rows come back as values of the row type, whose columns Build
// checked against the statement's select list. The comments below say what
// a statement does; its types say what it takes and returns.
type Statements struct {
	// Now reads the database clock. All loanq times come from the database.
	Now Query[engineio.NoParams, engineio.NowRow] `purpose:"read the database clock"`

	// --- tasks ---

	TaskInsert Stmt[engineio.TaskInsertParams]              `purpose:"create a task"`
	TaskByName Query[engineio.NameParams, engineio.TaskRow] `purpose:"read a task by name"`
	TaskByID   Query[engineio.IDParams, engineio.TaskRow]   `purpose:"read a task by id"`
	TaskList   Query[engineio.NoParams, engineio.TaskRow]   `purpose:"list tasks"`
	TaskRuns   Query[engineio.TaskParams, engineio.RunRow]  `purpose:"recent criteria-query runs of a task"`

	// --- the request log (docs/algorithm.md, step 1) ---

	// RequestInsert: committed on its own before the lock is tried, so a request
	// is never lost with a rolled-back transaction.
	RequestInsert Stmt[engineio.RequestInsertParams]            `purpose:"record a work request (committed before the lock)"`
	RequestByID   Query[engineio.IDParams, engineio.RequestRow] `purpose:"read a work request"`
	// RequestsPending: oldest first. Ordered by created_at, then id, on every
	// dialect: ids are not arrival order on Oracle RAC, where identity columns
	// are NOORDER and each instance hands out ids from its own cached range.
	RequestsPending Query[engineio.TaskParams, engineio.PendingRow] `purpose:"pending requests of a task, oldest first"`
	// RequestFinish: only a pending request changes.
	RequestFinish Stmt[engineio.RequestFinishParams] `purpose:"set a request's outcome"`
	// RequestFinishMany: only pending requests change; a serving round checks
	// that all did.
	RequestFinishMany Stmt[engineio.RequestFinishManyParams] `purpose:"set the outcome of a round's requests, one statement" empty:"round finish = each: each request is finished by its own RequestFinish"`
	// RequestWithLoans: A request and the loans assigned to it, one row per loan
	// in assignment order, or one row with a NULL loan when it has none.
	RequestWithLoans Query[engineio.IDParams, engineio.RequestLoanRow] `purpose:"read a work request with its loans"`

	// --- the task lock (docs/algorithm.md, step 2), one per strategy ---

	// LockSkip, LockNoWait, LockWait bind: task id. Each must be the first
	// statement of its transaction (docs/algorithm.md, step 2).
	LockSkip   Query[engineio.TaskParams, engineio.IDRow] `purpose:"task lock, strategy skip" empty:"strategy skip is not among the strategies"`
	LockNoWait Query[engineio.TaskParams, engineio.IDRow] `purpose:"task lock, strategy nowait" empty:"strategy nowait is not among the strategies"`
	LockWait   Query[engineio.TaskParams, engineio.IDRow] `purpose:"task lock, strategy wait" empty:"strategy wait is not among the strategies"`
	// LeaseAcquire takes the lease when it is free or expired, and bumps the
	// fencing token. One row affected means taken.
	LeaseAcquire Stmt[engineio.LeaseTakeParams] `purpose:"task lock, strategy lease: take the lease"`
	// LeaseToken reads the token just taken.
	LeaseToken Query[engineio.LeaseOwnerParams, engineio.TokenRow] `purpose:"task lock, strategy lease: read the fencing token"`
	// LeaseFenceRelease: the first statement of the assignment transaction: it
	// succeeds (one row) only while the caller still holds an unexpired lease
	// with its token, and frees the lease at commit.
	LeaseFenceRelease Stmt[engineio.LeaseFenceParams] `purpose:"task lock, strategy lease: fencing check and release at commit"`
	// LeaseRelease frees the lease after a failure.
	LeaseRelease Stmt[engineio.LeaseFenceParams] `purpose:"task lock, strategy lease: give the lease back"`

	// --- assignments ---

	// ActiveCountForUser is read after the lock (max_active).
	ActiveCountForUser Query[engineio.TaskUserParams, engineio.Count] `purpose:"a user's active work in a task (per-user cap)"`
	// ActiveCountsPending is read by a serving round of a capped task, under
	// its lock: one read for every user with a pending request (a user
	// without active work has no row).
	ActiveCountsPending Query[engineio.TaskParams, engineio.UserCountRow] `purpose:"the active work in a task of each user with a pending request (per-user cap)"`
	// WorkInsertMany: A serving round's loans, every request's, in one
	// statement.
	WorkInsertMany Stmt[engineio.WorkInsertManyParams] `purpose:"assign a round's loans, one statement"`
	// QueryRunInsert: the start is the database clock minus StartedAgoMS: no clock
	// read of its own.
	QueryRunInsert Stmt[engineio.QueryRunParams] `purpose:"log a criteria-query run"`

	// --- dispositions (docs/algorithm.md, "Dispositions and eligibility") ---

	// ActiveWork is read only to explain a DisposeLoan that changed nothing.
	ActiveWork Query[engineio.TaskLoanParams, engineio.ActiveWorkRow] `purpose:"the active assignment of a loan in a task"`
	// LastWork: most recent first, by assigned_at then id (ids: see
	// RequestsPending).
	LastWork Query[engineio.TaskLoanParams, engineio.LastWorkRow] `purpose:"the latest assignment of a loan in a task"`
	// DisposeLoan ends the loan's active assignment in the task only if it is
	// the user's: one row (there is at most one active row per task and loan),
	// or none when the loan is not active or is someone else's (ActiveWork and
	// LastWork then say which).
	DisposeLoan Stmt[engineio.DisposeLoanParams] `purpose:"end a user's active assignment of a loan with a disposition"`
	// DisposeLoans is DisposeLoan for a list of loans (a JSON array of
	// their keys as text, one bind): it ends those of them that are the
	// user's active work, one row each. The engine sends it inside a
	// transaction and rolls it back unless every loan of the list was
	// changed (all or nothing, docs/commands.md "disposition"); the history
	// triggers (migration 00021) and the reason rule (00019) act on each
	// row as for DisposeLoan.
	DisposeLoans Stmt[engineio.DisposeLoansParams] `purpose:"end a user's active assignments of a list of loans with one disposition"`
	// ActiveAssigneesAmong is read only to explain a DisposeLoans that did
	// not change every loan of its list: who holds each loan of the list
	// that is active in the task (a loan it does not return is not active).
	ActiveAssigneesAmong Query[engineio.PoolIDsParams, engineio.AssigneeRow] `purpose:"the assignee of each active loan of a list in a task"`

	// --- pipeline ---

	// Pipeline: oldest first. An empty task name means all tasks.
	Pipeline Query[engineio.PipelineParams, engineio.PipelineRow] `purpose:"a user's active work, oldest first"`

	// --- engine under contention: wake-ups, lease heartbeat, rows, coalescing
	// (docs/algorithm.md, "Waiting", "Lease heartbeat", "The rows strategy") ---

	// RequestWake: what a polling waiter reads at each poll (a waiter whose
	// queued lock was granted reads RequestWithLoans instead: its answer,
	// returned as read; dispatch/wake.go).
	RequestWake Query[engineio.IDParams, engineio.WakeRow] `purpose:"wake-up: a waiting caller reads its request and the task's lease"`
	// WaitLockSave: the session's lock wait limit, read on the waiter's
	// connection before its transaction, to restore afterwards. Sent where the
	// wait bound is a session setting, which outlives the transaction (MySQL's
	// SESSION variable).
	WaitLockSave Query[engineio.NoParams, engineio.SettingRow] `purpose:"wake-up: read the session lock wait limit" empty:"wait bound is not session-setting: no setting outlives the waiter's transaction"`
	// WaitLockSet is sent in the waiter's transaction just before LockWaitBounded
	// (or LockShareBounded) where the wait bound is a setting: it bounds how
	// long the queued lock waits.
	WaitLockSet Stmt[engineio.MillisParams] `purpose:"wake-up: bound the waiter's lock wait" empty:"wait bound = none or in-statement: no setting bounds the wait"`
	// WaitLockRestore is sent in the waiter's transaction as soon as the lock is
	// granted (the waiter may go on to serve), and, where WaitLockSave read the
	// value, on the same connection after the transaction.
	WaitLockRestore Stmt[engineio.SettingParams] `purpose:"wake-up: restore the session lock wait limit" empty:"wait bound = none or in-statement: no setting to put back"`
	// LockWaitBounded: A plain queued FOR UPDATE on the task row; {wait_s} is
	// replaced by the bound in whole seconds (Oracle's FOR UPDATE WAIT n takes a
	// literal).
	LockWaitBounded Query[engineio.TaskParams, engineio.IDRow] `purpose:"wake-up: queue on the task lock, bounded" empty:"wait mode = poll: waiters poll RequestWake"`
	// LockShareBounded: A queued share lock on the task row, bounded like
	// LockWaitBounded (WaitLockSet before it): it conflicts with the holder's
	// lock, so it is granted when the holder commits, but not with the other
	// waiters' share locks, so every waiter is granted at that same moment and
	// reads its request at once, instead of one after the other as exclusive
	// waiters are.
	LockShareBounded Query[engineio.TaskParams, engineio.IDRow]         `purpose:"wake-up: queue on the task lock in share mode, bounded" empty:"wait mode = poll or queue-exclusive: no waiter queues in share mode"`
	RecentRuns       Query[engineio.TaskParams, engineio.RecentRunsRow] `purpose:"wake-up and coalescing: recent criteria-query time of a task"`
	// TaskLoad: what a serving round needs to know of its task, read once right
	// after the lock: the pending requests and the loans they ask for; the loans
	// requested in the window ending now (the arrival rate); and of the ten
	// latest criteria-query runs, how many there are, their mean and their
	// longest duration_ms (NULL when none: the derived hold limit).
	TaskLoad Query[engineio.TaskWindowParams, engineio.TaskLoadRow] `purpose:"serving: pending need, arrival rate and recent criteria-query times of a task, one read"`
	// LeaseRenew: the holder's heartbeat: one row while it still holds an
	// unexpired lease with its token.
	LeaseRenew Stmt[engineio.LeaseRenewParams] `purpose:"lease heartbeat: renew the lease while the criteria query runs"`
	// LeaseHolder: the holder of an unexpired lease, no row when the lease is
	// free.
	LeaseHolder Query[engineio.TaskParams, engineio.OwnerRow] `purpose:"lease: who holds an unexpired lease"`
	// LeaseTakeOver takes a lease whose holder's process is known to be gone
	// (same host), bumping the token; one row only while the dead owner still
	// holds it.
	LeaseTakeOver Stmt[engineio.LeaseTakeOverParams] `purpose:"lease: take over the lease of a dead holder of this host"`
	// UserLockEnsure makes sure the (task, user) row exists; a concurrent insert
	// of the same row may fail with a unique violation, which the engine
	// ignores.
	UserLockEnsure Stmt[engineio.TaskUserParams] `purpose:"rows: make sure the per-user cap lock row exists" empty:"user cap = one-writer: a claim's transaction serialises the check"`
	// UserLock: the first statement of a rows claim on a capped task: serialises
	// the cap check of one (task, user).
	UserLock Query[engineio.TaskUserParams, engineio.TaskIDRow] `purpose:"rows: lock the per-user cap row" empty:"user cap = one-writer: a claim's transaction serialises the check"`
	// WorkInsertRows: A loan another caller assigned after this caller's
	// snapshot is skipped: no row inserted (PostgreSQL's ON CONFLICT DO NOTHING)
	// or a unique violation that rolls back only the statement (MySQL/MariaDB
	// and Oracle).
	WorkInsertRows Stmt[engineio.WorkInsertParams] `purpose:"rows: assign a locked loan unless it was assigned meanwhile" empty:"strategy rows is not among the strategies"`

	// --- the hold limit: the database ends a stalled lock holder's session
	// (docs/reliability.md) ---

	// HoldMeasured: the longest of the task's ten most recent criteria-query
	// runs in milliseconds (NULL when it has none): the default hold limit is
	// derived from it.
	HoldMeasured Query[engineio.TaskParams, engineio.MaxMSRow] `purpose:"hold limit: the task's recent criteria-query time"`
	// HoldLimitSet is sent in the lock transaction right after the task lock: the
	// server ends the session (rolling back and freeing the lock) when it stays
	// idle inside the transaction longer than IdleMS, whether its client is
	// stopped, cut off or gone, and aborts one statement running longer than
	// StatementMS.
	HoldLimitSet Stmt[engineio.HoldLimitParams] `purpose:"hold limit: make the server end this session if it holds the task lock too long" empty:"hold limit = none (no session holds a task row lock) or dba (a DBA configures the bound on the server)"`
	// HoldLimitReset restores the session defaults that HoldLimitSet changed,
	// before its pooled connection serves anything else.
	HoldLimitReset Stmt[engineio.NoParams] `purpose:"hold limit: restore the session's defaults before the connection is reused" empty:"hold limit is not session-setting: no setting outlives the lock transaction"`

	// --- cancelled requests and one pending request per user and task
	// (docs/algorithm.md, "Cancelling and attaching") ---

	// RequestPendingFor: the user's pending request of the task, if any (at most
	// one: loanq_request_one_pending_uq). Read only after RequestInsert failed
	// with a unique violation.
	RequestPendingFor Query[engineio.TaskUserParams, engineio.IDRow] `purpose:"a user's pending request of a task (attach instead of asking twice)"`
	// RequestCancel: only a pending request of that user changes: 0 rows means
	// it was served (or cancelled) meanwhile, decided by the database against a
	// holder's RequestFinish.
	RequestCancel Stmt[engineio.IDUserParams] `purpose:"cancel a user's pending request"`

	// --- abandoned requests (docs/algorithm.md, "Abandoned requests") ---

	// RequestAlive: a sign of life of the requester on its pending request,
	// only while it is still alive: 0 rows means served, cancelled or
	// expired (a request past RequestAlive is never revived).
	RequestAlive Stmt[engineio.IDUserParams] `purpose:"a waiting requester's sign of life on its pending request"`
	// RequestsExpire: ends as 'expired' the task's pending requests without
	// a sign of life within RequestAlive. Its own statement, never inside a
	// round's transaction (it would hold row locks on the pending requests).
	RequestsExpire Stmt[engineio.TaskParams] `purpose:"end a task's pending requests nobody waits for any more"`

	// --- abandoned work: --max-hold and `work reclaim` (docs/algorithm.md,
	// "Abandoned work: --max-hold") ---

	TaskSetMaxHold Stmt[engineio.TaskMaxHoldParams] `purpose:"set a task's max hold (age past which active work expires)"`
	// TaskVerdictSet keeps the verdict of the lock probe of `task
	// create|update --lock rows` (docs/algorithm.md).
	TaskVerdictSet Stmt[TaskVerdictParams]                       `purpose:"keep the rows lock probe's verdict of a task"`
	TaskVerdictGet Query[engineio.IDParams, engineio.VerdictRow] `purpose:"read the rows lock probe's verdict of a task (task show)"`
	// WorkExpire ends the task's active work assigned at least that long ago
	// (database clock) as 'expired'; run by the engine inside its serving
	// transaction, under the task lock.
	WorkExpire Stmt[engineio.WorkExpireParams] `purpose:"expire a task's active work older than its max hold"`
	// WorkOlder: the task's active work at least that old, oldest first.
	WorkOlder Query[engineio.WorkOlderParams, engineio.WorkOlderRow] `purpose:"a task's active work older than an age, optionally of one user"`
	// WorkReclaim ends one active assignment as 'reclaimed' (0 rows: it ended
	// meanwhile).
	WorkReclaim Stmt[engineio.WorkReclaimParams] `purpose:"reclaim one active assignment (a supervisor returns it)"`

	// --- `task update` ---

	// TaskUpdate: A row-lock holder keeps the task row locked while it serves,
	// so the update waits for it.
	TaskUpdate Stmt[engineio.TaskUpdateParams] `purpose:"change a task's definition (task update)"`

	// --- the candidate pool (docs/algorithm.md, "The candidate pool") ---

	TaskSetPrefetch Stmt[engineio.TaskPrefetchParams] `purpose:"set a task's candidate pool (--prefetch, --prefetch-ttl, --prefetch-low)"`
	// PoolClaim locks the first fresh candidates of the task's pool in order,
	// passing over those other claimers hold.
	PoolClaim           Query[engineio.PoolClaimParams, engineio.KeyRow]     `purpose:"pool: lock the first fresh candidates nobody else is claiming" empty:"pool claim = procedure: the driver locks the candidates itself (drivers.PoolLocker)"`
	PoolDrop            Stmt[engineio.PoolIDsParams]                         `purpose:"pool: remove claimed candidates, assigned or stale"`
	PoolClear           Stmt[engineio.TaskParams]                            `purpose:"pool: empty a task's pool before a refill (and at task delete)"`
	PoolFill            Stmt[engineio.PoolFillParams]                        `purpose:"pool: put a criteria run's leftover candidates in the pool, in order"`
	PoolStats           Query[engineio.TaskTTLParams, engineio.PoolStatsRow] `purpose:"pool: size, age, hits and refills of a task's pool"`
	RequestFinishPooled Stmt[engineio.RequestFinishParams]                   `purpose:"pool: set the outcome of a request served from the pool"`
	// ActiveAmong reads which of the keys are active in the task now.
	ActiveAmong Query[engineio.PoolIDsParams, engineio.KeyRow] `purpose:"pool: which of a round's loans were assigned from the pool while its query ran"`
	PoolKeys    Query[engineio.TaskParams, engineio.KeyRow]    `purpose:"pool: every candidate key of a task's pool (a round reads those claims hold)"`

	// --- who may act as whom (docs/security.md) ---

	// Identity reads one row: the connection's account, 1 when it may act
	// as :user (0 otherwise), and the user name an admin mapped to the
	// account (NULL when none). The database's own rule, loanq_may_act_as, is
	// the one its policies or triggers apply to every write.
	Identity Query[engineio.UserParams, engineio.IdentityRow] `purpose:"who this connection's account is and whether it may act as a user" empty:"accounts = none: no database accounts, any user name is used as given"`
}

// each calls f for every statement field, in declaration order.
func (s *Statements) each(f func(field reflect.StructField, st statement) error) error {
	return eachStmt(s, f)
}

// List returns the statements in declaration order with their purposes, as
// the dialect receives them.
func (s *Statements) List() []Named { return ListCatalogue(s) }

// Missing lists fields left empty that no dialect may leave empty (fields
// with an "empty" tag are optional).
func (s *Statements) Missing() []string {
	var out []string
	for _, n := range s.List() {
		if n.SQL == "" && n.Empty == "" {
			out = append(out, n.Field)
		}
	}
	return out
}

// Build compiles a dialect's statements: the portable definitions, changed by
// override where the dialect writes a statement its own way (or, setting it
// to "", does not send it). It panics when a statement does not compile, a
// required one is missing, or the statements disagree with the driver's
// capabilities caps (Capabilities.CheckStatements: a statement a capability
// needs is empty, or one it never sends is given): a driver that cannot be
// built is a programming error, caught by every test that loads it.
func Build(d Dialect, caps Capabilities, override func(*Statements)) *Statements {
	s := Portable()
	if override != nil {
		override(s)
	}
	if err := s.each(func(f reflect.StructField, st statement) error { return st.compile(d, f.Name) }); err != nil {
		panic("drivers: " + err.Error())
	}
	if m := s.Missing(); len(m) > 0 {
		panic("drivers: statements missing: " + strings.Join(m, ", "))
	}
	if err := caps.CheckStatements(s); err != nil {
		panic("drivers: " + err.Error())
	}
	return s
}

// BuildOnce is Build deferred to the catalogue's first use: it returns a
// function that builds the catalogue the first time it is called and the same
// one after. Drivers register at package init, so every loanq process would
// otherwise compile and check the catalogues of all four dialects at start —
// about 10 ms of CPU, most of a short command's, for dialects it never talks
// to (scripts call loanq in loops; BENCHMARKS.md, "Start-up"). A catalogue
// that cannot be built still panics, at its first use, and drivers/all's
// tests build every one.
func BuildOnce(d Dialect, caps Capabilities, override func(*Statements)) func() *Statements {
	return sync.OnceValue(func() *Statements { return Build(d, caps, override) })
}

// Lock returns the lock statement of a row-lock strategy.
func (s *Statements) Lock(st Strategy) *Query[engineio.TaskParams, engineio.IDRow] {
	switch st {
	case Skip:
		return &s.LockSkip
	case NoWait:
		return &s.LockNoWait
	case Wait:
		return &s.LockWait
	}
	return nil
}

// BoundedLock returns LockWaitBounded with its bound in whole seconds.
func (s *Statements) BoundedLock(seconds int) *Query[engineio.TaskParams, engineio.IDRow] {
	b := s.LockWaitBounded
	b.stmt.text = strings.ReplaceAll(b.stmt.text, "{wait_s}", strconv.Itoa(seconds))
	return &b
}
