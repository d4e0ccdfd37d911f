package sqlite

import (
	"fmt"
	"strings"

	"github.com/loanq/loanq/drivers"
)

// nowExpr is the database clock as fixed-width ISO-8601 UTC text with
// milliseconds, so that comparing two stored times as text compares the times.
const nowExpr = `strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`

// plusMillis is nowExpr moved by a bound number of milliseconds; a NULL bind
// gives NULL (used for return_at of dispositions other than return).
const plusMillis = `strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '+' || (? / 1000.0) || ' seconds')`

// minusMillis is nowExpr moved back by a bound number of milliseconds.
const minusMillis = `strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-' || (? / 1000.0) || ' seconds')`

const taskColumns = `id, name, source_table, key_column, criteria, order_by, max_active,
       lock_strategy, query_delay_ms, lease_ttl_ms, created_by, created_at, hold_limit_ms, max_hold_ms`

// Every statement loanq sends to SQLite. SQLite has no row locks and one
// writer at a time: every write transaction starts with BEGIN IMMEDIATE (set
// in the connection string), so it takes the database's write lock up front
// instead of failing on upgrade from a read lock. The task lock is the lease
// row of seed 003; the row-lock strategies are not available.
var statements = drivers.Statements{
	Now: `SELECT ` + nowExpr,

	TaskInsert: `INSERT INTO loanq_task (name, source_table, key_column, criteria, order_by, max_active,
       lock_strategy, query_delay_ms, lease_ttl_ms, created_by, created_at, hold_limit_ms)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ` + nowExpr + `, ?)
RETURNING id`,
	TaskByName: `SELECT ` + taskColumns + ` FROM loanq_task WHERE name = ?`,
	TaskByID:   `SELECT ` + taskColumns + ` FROM loanq_task WHERE id = ?`,
	TaskList:   `SELECT ` + taskColumns + ` FROM loanq_task ORDER BY name`,
	TaskRuns: `SELECT id, strategy, holder, started_at, duration_ms, rows_found, requests_served, loans_assigned
FROM loanq_query_run WHERE task_id = ? ORDER BY id DESC LIMIT 10`,

	RequestInsert: `INSERT INTO loanq_work_request (task_id, user_name, requested, assigned, status, created_at)
VALUES (?, ?, ?, 0, 'pending', ` + nowExpr + `)
RETURNING id`,
	RequestByID: `SELECT r.id, r.task_id, t.name, r.user_name, r.requested, r.assigned, r.status, r.created_at, r.served_at
FROM loanq_work_request r JOIN loanq_task t ON t.id = r.task_id
WHERE r.id = ?`,
	RequestsPending: `SELECT id, user_name, requested FROM loanq_work_request
WHERE task_id = ? AND status = 'pending' ORDER BY created_at, id`,
	RequestFinish: `UPDATE loanq_work_request SET assigned = ?, status = ?, served_at = ` + nowExpr + `
WHERE id = ? AND status = 'pending'`,
	RequestLoans: `SELECT loan_id FROM loanq_work WHERE request_id = ? ORDER BY id`,

	LockSkip:   ``,
	LockNoWait: ``,
	LockWait:   ``,
	LeaseAcquire: `UPDATE loanq_task
SET lease_owner = ?, lease_token = lease_token + 1,
    lease_expires_at = ` + plusMillis + `
WHERE id = ? AND (lease_owner IS NULL OR lease_expires_at <= ` + nowExpr + `)`,
	LeaseToken: `SELECT lease_token FROM loanq_task WHERE id = ? AND lease_owner = ?`,
	LeaseFenceRelease: `UPDATE loanq_task SET lease_owner = NULL, lease_expires_at = NULL
WHERE id = ? AND lease_owner = ? AND lease_token = ? AND lease_expires_at > ` + nowExpr,
	LeaseRelease: `UPDATE loanq_task SET lease_owner = NULL, lease_expires_at = NULL
WHERE id = ? AND lease_owner = ? AND lease_token = ?`,

	ActiveCountForUser: `SELECT COUNT(*) FROM loanq_work WHERE task_id = ? AND user_name = ? AND disposition IS NULL`,
	WorkInsert: `INSERT INTO loanq_work (task_id, loan_id, user_name, request_id, assigned_at)
VALUES (?, ?, ?, ?, ` + nowExpr + `)`,
	QueryRunInsert: `INSERT INTO loanq_query_run (task_id, strategy, holder, started_at, duration_ms,
       rows_found, requests_served, loans_assigned)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
RETURNING id`,

	ActiveWork: `SELECT id, user_name FROM loanq_work WHERE task_id = ? AND loan_id = ? AND disposition IS NULL`,
	LastWork: `SELECT disposition, user_name FROM loanq_work WHERE task_id = ? AND loan_id = ?
ORDER BY assigned_at DESC, id DESC LIMIT 1`,
	Dispose: `UPDATE loanq_work
SET disposition = ?, disposed_at = ` + nowExpr + `,
    return_at = ` + plusMillis + `
WHERE id = ? AND user_name = ? AND disposition IS NULL`,

	Pipeline: `SELECT t.name, w.loan_id, w.assigned_at,
       CAST((julianday('now') - julianday(w.assigned_at)) * 86400 AS INTEGER)
FROM loanq_work w JOIN loanq_task t ON t.id = w.task_id
WHERE w.user_name = ? AND w.disposition IS NULL AND (? = '' OR t.name = ?)
ORDER BY w.assigned_at, w.id`,

	// Wake-ups and heartbeat (docs/algorithm.md). No row locks: a waiter
	// polls RequestWake (a primary-key read, WAL readers never wait).
	RequestWake: `SELECT r.status, t.lease_owner,
       CASE WHEN t.lease_owner IS NULL OR t.lease_expires_at <= ` + nowExpr + ` THEN 1 ELSE 0 END
FROM loanq_work_request r JOIN loanq_task t ON t.id = r.task_id
WHERE r.id = ?`,
	WaitLockSave:    ``,
	WaitLockSet:     ``,
	WaitLockRestore: ``,
	LockWaitBounded: ``,
	RecentRuns: `SELECT COUNT(*), CAST(COALESCE(AVG(duration_ms), 0) AS INTEGER) FROM (
  SELECT duration_ms FROM loanq_query_run WHERE task_id = ? ORDER BY id DESC LIMIT 10) r`,
	RequestRate: `SELECT COUNT(*), COALESCE(SUM(requested), 0) FROM loanq_work_request
WHERE task_id = ? AND created_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-' || (? / 1000.0) || ' seconds')`,
	LeaseRenew: `UPDATE loanq_task SET lease_expires_at = ` + plusMillis + `
WHERE id = ? AND lease_owner = ? AND lease_token = ? AND lease_expires_at > ` + nowExpr,
	LeaseHolder: `SELECT lease_owner FROM loanq_task WHERE id = ? AND lease_owner IS NOT NULL AND lease_expires_at > ` + nowExpr,
	LeaseTakeOver: `UPDATE loanq_task
SET lease_owner = ?, lease_token = lease_token + 1,
    lease_expires_at = ` + plusMillis + `
WHERE id = ? AND lease_owner = ?`,
	UserLockEnsure: ``,
	UserLock:       ``,
	WorkInsertRows: ``,

	// The bench (loanq bench). Only lease: the claim runs in an immediate
	// transaction (the write lock is taken at BEGIN), so two claimers never
	// read the same ready rows; it is committed at once and nobody holds a
	// lock while the items are worked on.
	BenchReset: `DELETE FROM loanq_bench_item`,
	BenchFill: `WITH RECURSIVE seq (n, k) AS (
  SELECT CAST(? AS INTEGER), CAST(? AS INTEGER)
  UNION ALL SELECT n + 1, k - 1 FROM seq WHERE k > 1)
INSERT INTO loanq_bench_item (id, status, processed)
SELECT n, 'ready', 0 FROM seq`,
	BenchBegin:       ``,
	BenchClaimSkip:   ``,
	BenchClaimNoWait: ``,
	BenchClaimWait:   ``,
	BenchClaimRead:   ``,
	BenchLeaseClaim: `UPDATE loanq_bench_item
SET status = 'claimed', owner = ?, claimed_at = ` + nowExpr + `,
    lease_expires_at = ` + plusMillis + `
WHERE status = 'ready'
  AND id IN (SELECT id FROM loanq_bench_item WHERE status = 'ready' ORDER BY id LIMIT ?)
RETURNING id`,
	BenchLeaseRead: ``,
	BenchDone: `UPDATE loanq_bench_item
SET status = 'done', owner = ?, processed = processed + 1, processed_at = ` + nowExpr + `
WHERE id = ?`,
	BenchLeaseDone: `UPDATE loanq_bench_item
SET status = 'done', processed = processed + 1, processed_at = ` + nowExpr + `
WHERE id = ? AND owner = ? AND status = 'claimed' AND lease_expires_at > ` + nowExpr,
	BenchLeaseExpire: `UPDATE loanq_bench_item
SET status = 'ready', owner = NULL, claimed_at = NULL, lease_expires_at = NULL
WHERE status = 'claimed' AND lease_expires_at <= ` + nowExpr,
	BenchReady: `SELECT COUNT(*) FROM loanq_bench_item WHERE status = 'ready'`,
	BenchSummary: `SELECT COUNT(*),
       COALESCE(SUM(CASE WHEN status = 'done' THEN 1 ELSE 0 END), 0),
       COALESCE(SUM(CASE WHEN processed > 1 THEN 1 ELSE 0 END), 0),
       COALESCE(SUM(processed), 0),
       COALESCE(SUM(CASE WHEN processed = 0 THEN 1 ELSE 0 END), 0)
FROM loanq_bench_item`,
	BenchByOwner: `SELECT owner, COUNT(*) FROM loanq_bench_item WHERE status = 'done' GROUP BY owner ORDER BY owner`,

	// The hold limit: SQLite has only the lease strategy, whose TTL bounds a
	// holder; there is no server session to end.
	HoldMeasured: `SELECT MAX(duration_ms) FROM (
  SELECT duration_ms FROM loanq_query_run WHERE task_id = ? ORDER BY id DESC LIMIT 10)`,
	HoldLimitSet:   ``,
	HoldLimitReset: ``,

	ServerVersion: `SELECT 'SQLite ' || sqlite_version()`,
	// The ids arrive as one JSON array, unpacked by json_each.
	BenchDoneMany: `UPDATE loanq_bench_item
SET status = 'done', owner = ?, processed = processed + 1, processed_at = ` + nowExpr + `
WHERE id IN (SELECT value FROM json_each(?))`,
	BenchLeaseDoneMany: `UPDATE loanq_bench_item
SET status = 'done', processed = processed + 1, processed_at = ` + nowExpr + `
WHERE owner = ? AND id IN (SELECT value FROM json_each(?))
  AND status = 'claimed' AND lease_expires_at > ` + nowExpr,
	BenchClaimDone: ``,

	// lock run: named leases. The write lock of BEGIN IMMEDIATE (or of the
	// autocommitted UPDATE) makes the take one writer at a time.
	NamedLockEnsure: `INSERT INTO loanq_lock (name, token) VALUES (?, 0) ON CONFLICT (name) DO NOTHING`,
	NamedLockTake: `UPDATE loanq_lock
SET holder = ?, token = token + 1, taken_at = ` + nowExpr + `,
    expires_at = ` + plusMillis + `
WHERE name = ? AND (holder IS NULL OR expires_at <= ` + nowExpr + `)`,
	NamedLockRead: `SELECT holder, token, taken_at, expires_at, ` + nowExpr + ` FROM loanq_lock WHERE name = ?`,
	NamedLockRenew: `UPDATE loanq_lock SET expires_at = ` + plusMillis + `
WHERE name = ? AND holder = ? AND token = ? AND expires_at > ` + nowExpr,
	NamedLockRelease: `UPDATE loanq_lock SET holder = NULL, expires_at = NULL
WHERE name = ? AND holder = ? AND token = ?`,
	NamedLockList: `SELECT name, holder, token, taken_at, expires_at, ` + nowExpr + ` FROM loanq_lock ORDER BY name`,

	// task stats: the window's start is computed by the database clock.
	StatsDispositions: `SELECT t.name, w.disposition, COUNT(*)
FROM loanq_work w JOIN loanq_task t ON t.id = w.task_id
WHERE w.disposition IS NOT NULL AND w.disposed_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-' || (? / 1000.0) || ' seconds')
GROUP BY t.name, w.disposition`,
	StatsRuns: `SELECT t.name, r.duration_ms, r.requests_served
FROM loanq_query_run r JOIN loanq_task t ON t.id = r.task_id
WHERE r.started_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-' || (? / 1000.0) || ' seconds')
ORDER BY r.started_at DESC, r.id DESC`,

	// The dashboard (loanq serve). Active rows and pending requests are found
	// through the partial indexes that hold only them; DashDone reads
	// the work history from a floor id up (see drivers.Statements). "Today" starts at
	// midnight UTC, written in the stored text form so that text comparison
	// is time comparison.
	DashPending: `SELECT task_id, COUNT(*), ` + sqliteAge(`MIN(created_at)`) + `
FROM loanq_work_request WHERE status = 'pending' GROUP BY task_id`,
	DashActive: `SELECT task_id, user_name, COUNT(*), ` + sqliteAge(`MIN(assigned_at)`) + `,
       COUNT(CASE WHEN ` + sqliteAge(`assigned_at`) + ` >= ? THEN 1 END)
FROM loanq_work WHERE disposition IS NULL GROUP BY task_id, user_name`,
	DashDoneFloor: `SELECT MIN(CASE WHEN disposition IS NULL THEN id END),
       MIN(CASE WHEN disposed_at >= date('now') || 'T00:00:00.000Z' THEN id END), MAX(id)
FROM loanq_work`,
	DashDoneBefore: `SELECT task_id, user_name, disposition, COUNT(*)
FROM loanq_work WHERE id < ? AND disposition IS NOT NULL GROUP BY task_id, user_name, disposition`,
	DashDone: `SELECT task_id, user_name, disposition, COUNT(*),
       COUNT(CASE WHEN disposed_at >= date('now') || 'T00:00:00.000Z' THEN 1 END)
FROM loanq_work WHERE id >= ? AND disposition IS NOT NULL GROUP BY task_id, user_name, disposition`,
	DashRuns: `SELECT id, ` + sqliteAge(`started_at`) + `, duration_ms, rows_found, requests_served, loans_assigned
FROM loanq_query_run WHERE task_id = ? ORDER BY id DESC LIMIT ?`,
	DashDispositions: `SELECT loan_id, user_name, disposition, ` + sqliteAge(`disposed_at`) + `,
       CAST((julianday(disposed_at) - julianday(assigned_at)) * 86400 AS INTEGER)
FROM loanq_work WHERE task_id = ? AND disposition IS NOT NULL ORDER BY id DESC LIMIT ?`,

	// cancelled requests and attach (docs/algorithm.md, "Cancelling and attaching")
	RequestPendingFor: `SELECT id FROM loanq_work_request WHERE task_id = ? AND user_name = ? AND status = 'pending'`,
	RequestCancel: `UPDATE loanq_work_request SET status = 'cancelled', served_at = ` + nowExpr + `
WHERE id = ? AND user_name = ? AND status = 'pending'`,

	// abandoned work (docs/algorithm.md, "Abandoned work: --max-hold")
	TaskSetMaxHold: `UPDATE loanq_task SET max_hold_ms = ? WHERE id = ?`,
	WorkExpire: `UPDATE loanq_work SET disposition = 'expired', disposed_at = ` + nowExpr + `
WHERE task_id = ? AND disposition IS NULL AND assigned_at <= ` + minusMillis,
	WorkOlder: `SELECT id, loan_id, user_name, assigned_at, CAST((julianday('now') - julianday(assigned_at)) * 86400 AS INTEGER)
FROM loanq_work
WHERE task_id = ? AND disposition IS NULL AND (? = '' OR user_name = ?)
  AND assigned_at <= ` + minusMillis + `
ORDER BY assigned_at, id`,
	WorkReclaim: `UPDATE loanq_work SET disposition = 'reclaimed', disposed_at = ` + nowExpr + `, disposed_by = ?
WHERE id = ? AND disposition IS NULL`,

	// task update
	TaskUpdate: `UPDATE loanq_task
SET source_table = ?,
    key_column = ?,
    criteria = ?,
    order_by = ?,
    max_active = ?,
    lock_strategy = ?,
    query_delay_ms = ?,
    lease_ttl_ms = ?,
    hold_limit_ms = ?,
    max_hold_ms = ?
WHERE id = ?`,
}

// sqliteAge is how many whole seconds ago a stored time was, by the database clock.
func sqliteAge(ts string) string {
	return `CAST((julianday('now') - julianday(` + ts + `)) * 86400 AS INTEGER)`
}

// criteriaQuery is the heavy query of SPEC §3 step 4, run while the caller
// holds the task's lease (outside any transaction, so readers and the other
// writers are not blocked by it).
func criteriaQuery(src drivers.CriteriaSource) string {
	order := "src." + src.Key
	if strings.TrimSpace(src.Order) != "" {
		order = src.Order + ", src." + src.Key
	}
	return fmt.Sprintf(`SELECT src.%[1]s FROM %[2]s src
WHERE (%[3]s)
  AND NOT EXISTS (
    SELECT 1 FROM loanq_work w
    WHERE w.task_id = ? AND w.loan_id = src.%[1]s
      AND (w.disposition IS NULL
           OR w.disposition = 'never'
           OR (w.disposition = 'return' AND w.return_at > %[5]s)))
ORDER BY %[4]s
LIMIT ?`, src.Key, src.Source, src.Where, order, nowExpr)
}
