package mysql

import (
	"fmt"
	"strings"

	"github.com/loanq/loanq/drivers"
)

// Every statement loanq sends to MySQL 8 / MariaDB. Times are UTC from
// UTC_TIMESTAMP(6), the database clock, whatever the session time zone.
const taskColumns = `id, name, source_table, key_column, criteria, order_by, max_active,
       lock_strategy, query_delay_ms, lease_ttl_ms, created_by, created_at, hold_limit_ms, max_hold_ms`

var statements = drivers.Statements{
	Now: `SELECT UTC_TIMESTAMP(6)`,

	TaskInsert: `INSERT INTO loanq_task (name, source_table, key_column, criteria, order_by, max_active,
       lock_strategy, query_delay_ms, lease_ttl_ms, created_by, created_at, hold_limit_ms)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6), ?)`,
	TaskByName: `SELECT ` + taskColumns + ` FROM loanq_task WHERE name = ?`,
	TaskByID:   `SELECT ` + taskColumns + ` FROM loanq_task WHERE id = ?`,
	TaskList:   `SELECT ` + taskColumns + ` FROM loanq_task ORDER BY name`,
	TaskRuns: `SELECT id, strategy, holder, started_at, duration_ms, rows_found, requests_served, loans_assigned
FROM loanq_query_run WHERE task_id = ? ORDER BY id DESC LIMIT 10`,

	RequestInsert: `INSERT INTO loanq_work_request (task_id, user_name, requested, assigned, status, created_at)
VALUES (?, ?, ?, 0, 'pending', UTC_TIMESTAMP(6))`,
	RequestByID: `SELECT r.id, r.task_id, t.name, r.user_name, r.requested, r.assigned, r.status, r.created_at, r.served_at
FROM loanq_work_request r JOIN loanq_task t ON t.id = r.task_id
WHERE r.id = ?`,
	RequestsPending: `SELECT id, user_name, requested FROM loanq_work_request
WHERE task_id = ? AND status = 'pending' ORDER BY created_at, id`,
	RequestFinish: `UPDATE loanq_work_request SET assigned = ?, status = ?, served_at = UTC_TIMESTAMP(6)
WHERE id = ? AND status = 'pending'`,
	RequestLoans: `SELECT loan_id FROM loanq_work WHERE request_id = ? ORDER BY id`,

	// The task row is found through its primary key, so InnoDB locks exactly
	// that one index record (no gap or next-key locks on a unique equality).
	LockSkip:   `SELECT id FROM loanq_task WHERE id = ? FOR UPDATE SKIP LOCKED`,
	LockNoWait: `SELECT id FROM loanq_task WHERE id = ? FOR UPDATE NOWAIT`,
	LockWait:   `SELECT id FROM loanq_task WHERE id = ? FOR UPDATE`,
	LeaseAcquire: `UPDATE loanq_task
SET lease_owner = ?, lease_token = lease_token + 1,
    lease_expires_at = UTC_TIMESTAMP(6) + INTERVAL (? * 1000) MICROSECOND
WHERE id = ? AND (lease_owner IS NULL OR lease_expires_at <= UTC_TIMESTAMP(6))`,
	LeaseToken: `SELECT lease_token FROM loanq_task WHERE id = ? AND lease_owner = ?`,
	LeaseFenceRelease: `UPDATE loanq_task SET lease_owner = NULL, lease_expires_at = NULL
WHERE id = ? AND lease_owner = ? AND lease_token = ? AND lease_expires_at > UTC_TIMESTAMP(6)`,
	LeaseRelease: `UPDATE loanq_task SET lease_owner = NULL, lease_expires_at = NULL
WHERE id = ? AND lease_owner = ? AND lease_token = ?`,

	ActiveCountForUser: `SELECT COUNT(*) FROM loanq_work WHERE task_id = ? AND user_name = ? AND disposition IS NULL`,
	WorkInsert: `INSERT INTO loanq_work (task_id, loan_id, user_name, request_id, assigned_at)
VALUES (?, ?, ?, ?, UTC_TIMESTAMP(6))`,
	QueryRunInsert: `INSERT INTO loanq_query_run (task_id, strategy, holder, started_at, duration_ms,
       rows_found, requests_served, loans_assigned)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,

	ActiveWork: `SELECT id, user_name FROM loanq_work WHERE task_id = ? AND loan_id = ? AND disposition IS NULL`,
	LastWork: `SELECT disposition, user_name FROM loanq_work WHERE task_id = ? AND loan_id = ?
ORDER BY assigned_at DESC, id DESC LIMIT 1`,
	Dispose: `UPDATE loanq_work
SET disposition = ?, disposed_at = UTC_TIMESTAMP(6),
    return_at = UTC_TIMESTAMP(6) + INTERVAL (? * 1000) MICROSECOND
WHERE id = ? AND user_name = ? AND disposition IS NULL`,

	Pipeline: `SELECT t.name, w.loan_id, w.assigned_at,
       TIMESTAMPDIFF(SECOND, w.assigned_at, UTC_TIMESTAMP(6))
FROM loanq_work w JOIN loanq_task t ON t.id = w.task_id
WHERE w.user_name = ? AND w.disposition IS NULL AND (? = '' OR t.name = ?)
ORDER BY w.assigned_at, w.id`,

	// Wake-ups, heartbeat, rows (docs/algorithm.md). innodb_lock_wait_timeout
	// is a session variable in whole seconds: the waiter sets it on its own
	// connection and puts the saved value back after its transaction.
	RequestWake: `SELECT r.status, t.lease_owner,
       CASE WHEN t.lease_owner IS NULL OR t.lease_expires_at <= UTC_TIMESTAMP(6) THEN 1 ELSE 0 END
FROM loanq_work_request r JOIN loanq_task t ON t.id = r.task_id
WHERE r.id = ?`,
	WaitLockSave:    `SELECT @@SESSION.innodb_lock_wait_timeout`,
	WaitLockSet:     `SET SESSION innodb_lock_wait_timeout = GREATEST(1, CEIL(? / 1000))`,
	WaitLockRestore: `SET SESSION innodb_lock_wait_timeout = ?`,
	LockWaitBounded: `SELECT id FROM loanq_task WHERE id = ? FOR UPDATE`,
	RecentRuns: `SELECT COUNT(*), CAST(COALESCE(AVG(duration_ms), 0) AS SIGNED) FROM (
  SELECT duration_ms FROM loanq_query_run WHERE task_id = ? ORDER BY id DESC LIMIT 10) r`,
	RequestRate: `SELECT COUNT(*), COALESCE(SUM(requested), 0) FROM loanq_work_request
WHERE task_id = ? AND created_at > UTC_TIMESTAMP(6) - INTERVAL (? * 1000) MICROSECOND`,
	LeaseRenew: `UPDATE loanq_task SET lease_expires_at = UTC_TIMESTAMP(6) + INTERVAL (? * 1000) MICROSECOND
WHERE id = ? AND lease_owner = ? AND lease_token = ? AND lease_expires_at > UTC_TIMESTAMP(6)`,
	LeaseHolder: `SELECT lease_owner FROM loanq_task WHERE id = ? AND lease_owner IS NOT NULL AND lease_expires_at > UTC_TIMESTAMP(6)`,
	LeaseTakeOver: `UPDATE loanq_task
SET lease_owner = ?, lease_token = lease_token + 1,
    lease_expires_at = UTC_TIMESTAMP(6) + INTERVAL (? * 1000) MICROSECOND
WHERE id = ? AND lease_owner = ?`,
	// INSERT IGNORE would also turn other errors into warnings; a plain
	// insert whose duplicate-key error the engine ignores does not.
	UserLockEnsure: `INSERT INTO loanq_task_user (task_id, user_name) VALUES (?, ?)`,
	UserLock:       `SELECT task_id FROM loanq_task_user WHERE task_id = ? AND user_name = ? FOR UPDATE`,
	// A duplicate-key error rolls back this statement only (InnoDB keeps the
	// transaction and its locks): the engine skips the loan and goes on.
	WorkInsertRows: `INSERT INTO loanq_work (task_id, loan_id, user_name, request_id, assigned_at)
VALUES (?, ?, ?, ?, UTC_TIMESTAMP(6))`,

	// The bench (loanq bench). InnoDB locks every index record a locking read
	// scans: the claims go through the (status, id) index, in claim order, so
	// the read touches the ready rows only and stops after K.
	BenchReset: `DELETE FROM loanq_bench_item`,
	BenchFill: `INSERT INTO loanq_bench_item (id, status, processed)
WITH RECURSIVE seq (n, k) AS (
  SELECT CAST(? AS SIGNED), CAST(? AS SIGNED)
  UNION ALL SELECT n + 1, k - 1 FROM seq WHERE k > 1)
SELECT n, 'ready', 0 FROM seq`,
	// SET TRANSACTION without SESSION applies to the next transaction only.
	// READ COMMITTED locks index records without the gaps between them, so
	// finishing an item (a new (done, id) entry in the status index) never
	// waits for another claimer's gap lock: no deadlocks, even with wait.
	BenchBegin:       `SET TRANSACTION ISOLATION LEVEL READ COMMITTED`,
	BenchClaimSkip:   `SELECT id FROM loanq_bench_item WHERE status = 'ready' ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED`,
	BenchClaimNoWait: `SELECT id FROM loanq_bench_item WHERE status = 'ready' ORDER BY id LIMIT ? FOR UPDATE NOWAIT`,
	BenchClaimWait:   `SELECT id FROM loanq_bench_item WHERE status = 'ready' ORDER BY id LIMIT ? FOR UPDATE`,
	BenchClaimRead:   ``,
	// MySQL rejects a subselect on the table being updated (error 1093) and
	// has no RETURNING: the lease is an UPDATE … ORDER BY … LIMIT, and the ids
	// are read back by owner in the same transaction.
	BenchLeaseClaim: `UPDATE loanq_bench_item
SET status = 'claimed', owner = ?, claimed_at = UTC_TIMESTAMP(6),
    lease_expires_at = UTC_TIMESTAMP(6) + INTERVAL (? * 1000) MICROSECOND
WHERE status = 'ready'
ORDER BY id LIMIT ?`,
	BenchLeaseRead: `SELECT id FROM loanq_bench_item WHERE owner = ? AND status = 'claimed' ORDER BY id`,
	BenchDone: `UPDATE loanq_bench_item
SET status = 'done', owner = ?, processed = processed + 1, processed_at = UTC_TIMESTAMP(6)
WHERE id = ?`,
	BenchLeaseDone: `UPDATE loanq_bench_item
SET status = 'done', processed = processed + 1, processed_at = UTC_TIMESTAMP(6)
WHERE id = ? AND owner = ? AND status = 'claimed' AND lease_expires_at > UTC_TIMESTAMP(6)`,
	BenchLeaseExpire: `UPDATE loanq_bench_item
SET status = 'ready', owner = NULL, claimed_at = NULL, lease_expires_at = NULL
WHERE status = 'claimed' AND lease_expires_at <= UTC_TIMESTAMP(6)`,
	BenchReady: `SELECT COUNT(*) FROM loanq_bench_item WHERE status = 'ready'`,
	BenchSummary: `SELECT COUNT(*),
       COALESCE(SUM(CASE WHEN status = 'done' THEN 1 ELSE 0 END), 0),
       COALESCE(SUM(CASE WHEN processed > 1 THEN 1 ELSE 0 END), 0),
       COALESCE(SUM(processed), 0),
       COALESCE(SUM(CASE WHEN processed = 0 THEN 1 ELSE 0 END), 0)
FROM loanq_bench_item`,
	BenchByOwner: `SELECT owner, COUNT(*) FROM loanq_bench_item WHERE status = 'done' GROUP BY owner ORDER BY owner`,

	// The hold limit (docs/reliability.md), MariaDB's session variables:
	// idle_transaction_timeout (whole seconds) ends a session idle inside a
	// transaction, max_statement_time (seconds) aborts one statement. They
	// are session settings, not transaction ones: HoldLimitReset puts the
	// server defaults back before the pooled connection is reused (the
	// driver's connection wrapper sends it). MySQL 8 has neither variable:
	// the driver sends holdLimitSetMySQL8 / holdLimitResetMySQL8 there.
	HoldMeasured: `SELECT MAX(duration_ms) FROM (
  SELECT duration_ms FROM loanq_query_run WHERE task_id = ? ORDER BY id DESC LIMIT 10) recent`,
	HoldLimitSet:   `SET SESSION idle_transaction_timeout = CEIL(? / 1000), max_statement_time = ? / 1000`,
	HoldLimitReset: `SET SESSION idle_transaction_timeout = DEFAULT, max_statement_time = DEFAULT`,

	// VERSION() alone reads "10.11.6-MariaDB-…" or "8.0.36": name the product.
	ServerVersion: `SELECT CASE WHEN LOCATE('MariaDB', VERSION()) > 0 THEN CONCAT('MariaDB ', VERSION()) ELSE CONCAT('MySQL ', VERSION()) END`,
	// The ids arrive as one JSON array, unpacked by JSON_TABLE (MySQL 8.0.4,
	// MariaDB 10.6): one statement for the batch, looked up by primary key.
	BenchDoneMany: `UPDATE loanq_bench_item
SET status = 'done', owner = ?, processed = processed + 1, processed_at = UTC_TIMESTAMP(6)
WHERE id IN (SELECT j.id FROM JSON_TABLE(?, '$[*]' COLUMNS (id BIGINT PATH '$')) AS j)`,
	BenchLeaseDoneMany: `UPDATE loanq_bench_item
SET status = 'done', processed = processed + 1, processed_at = UTC_TIMESTAMP(6)
WHERE owner = ? AND id IN (SELECT j.id FROM JSON_TABLE(?, '$[*]' COLUMNS (id BIGINT PATH '$')) AS j)
  AND status = 'claimed' AND lease_expires_at > UTC_TIMESTAMP(6)`,
	BenchClaimDone: ``,

	// lock run: named leases. The UPDATE locks the row (by primary key, no
	// gap lock); a racing taker waits, then reads the committed row and finds
	// it taken. ON DUPLICATE KEY UPDATE rather than INSERT IGNORE, which would
	// also turn a too-long name into a silent truncation.
	NamedLockEnsure: `INSERT INTO loanq_lock (name, token) VALUES (?, 0) ON DUPLICATE KEY UPDATE name = name`,
	NamedLockTake: `UPDATE loanq_lock
SET holder = ?, token = token + 1, taken_at = UTC_TIMESTAMP(6),
    expires_at = UTC_TIMESTAMP(6) + INTERVAL (? * 1000) MICROSECOND
WHERE name = ? AND (holder IS NULL OR expires_at <= UTC_TIMESTAMP(6))`,
	NamedLockRead: `SELECT holder, token, taken_at, expires_at, UTC_TIMESTAMP(6) FROM loanq_lock WHERE name = ?`,
	NamedLockRenew: `UPDATE loanq_lock SET expires_at = UTC_TIMESTAMP(6) + INTERVAL (? * 1000) MICROSECOND
WHERE name = ? AND holder = ? AND token = ? AND expires_at > UTC_TIMESTAMP(6)`,
	NamedLockRelease: `UPDATE loanq_lock SET holder = NULL, expires_at = NULL
WHERE name = ? AND holder = ? AND token = ?`,
	NamedLockList: `SELECT name, holder, token, taken_at, expires_at, UTC_TIMESTAMP(6) FROM loanq_lock ORDER BY name`,

	// task stats: the window's start is computed by the database clock.
	StatsDispositions: `SELECT t.name, w.disposition, COUNT(*)
FROM loanq_work w JOIN loanq_task t ON t.id = w.task_id
WHERE w.disposition IS NOT NULL AND w.disposed_at > UTC_TIMESTAMP(6) - INTERVAL (? * 1000) MICROSECOND
GROUP BY t.name, w.disposition`,
	StatsRuns: `SELECT t.name, r.duration_ms, r.requests_served
FROM loanq_query_run r JOIN loanq_task t ON t.id = r.task_id
WHERE r.started_at > UTC_TIMESTAMP(6) - INTERVAL (? * 1000) MICROSECOND
ORDER BY r.started_at DESC, r.id DESC`,

	// The dashboard (loanq serve). MySQL has no partial index: active work is
	// read per task through the unique index on (task_id, active_loan_id),
	// whose second column is NULL once a row is dispositioned, and pending
	// requests through (task_id, status, id); both joins start from the few
	// task rows. DashDone reads the work
	// history from a floor id up (see drivers.Statements). UTC_DATE() is midnight of the database's UTC day.
	DashPending: `SELECT r.task_id, COUNT(*), TIMESTAMPDIFF(SECOND, MIN(r.created_at), UTC_TIMESTAMP(6))
FROM loanq_task t JOIN loanq_work_request r ON r.task_id = t.id AND r.status = 'pending'
GROUP BY r.task_id`,
	DashActive: `SELECT w.task_id, w.user_name, COUNT(*), TIMESTAMPDIFF(SECOND, MIN(w.assigned_at), UTC_TIMESTAMP(6)),
       COUNT(CASE WHEN TIMESTAMPDIFF(SECOND, w.assigned_at, UTC_TIMESTAMP(6)) >= ? THEN 1 END)
FROM loanq_task t JOIN loanq_work w ON w.task_id = t.id AND w.active_loan_id IS NOT NULL
GROUP BY w.task_id, w.user_name`,
	DashDoneFloor: `SELECT MIN(CASE WHEN disposition IS NULL THEN id END),
       MIN(CASE WHEN disposed_at >= UTC_DATE() THEN id END), MAX(id)
FROM loanq_work`,
	DashDoneBefore: `SELECT task_id, user_name, disposition, COUNT(*)
FROM loanq_work WHERE id < ? AND disposition IS NOT NULL GROUP BY task_id, user_name, disposition`,
	DashDone: `SELECT task_id, user_name, disposition, COUNT(*),
       COUNT(CASE WHEN disposed_at >= UTC_DATE() THEN 1 END)
FROM loanq_work WHERE id >= ? AND disposition IS NOT NULL GROUP BY task_id, user_name, disposition`,
	DashRuns: `SELECT id, TIMESTAMPDIFF(SECOND, started_at, UTC_TIMESTAMP(6)), duration_ms, rows_found, requests_served, loans_assigned
FROM loanq_query_run WHERE task_id = ? ORDER BY id DESC LIMIT ?`,
	DashDispositions: `SELECT loan_id, user_name, disposition, TIMESTAMPDIFF(SECOND, disposed_at, UTC_TIMESTAMP(6)),
       TIMESTAMPDIFF(SECOND, assigned_at, disposed_at)
FROM loanq_work WHERE task_id = ? AND disposition IS NOT NULL ORDER BY id DESC LIMIT ?`,

	// cancelled requests and attach (docs/algorithm.md, "Cancelling and attaching")
	RequestPendingFor: `SELECT id FROM loanq_work_request WHERE task_id = ? AND pending_user = ?`,
	RequestCancel: `UPDATE loanq_work_request SET status = 'cancelled', served_at = UTC_TIMESTAMP(6)
WHERE id = ? AND user_name = ? AND status = 'pending'`,

	// abandoned work (docs/algorithm.md, "Abandoned work: --max-hold")
	TaskSetMaxHold: `UPDATE loanq_task SET max_hold_ms = ? WHERE id = ?`,
	WorkExpire: `UPDATE loanq_work SET disposition = 'expired', disposed_at = UTC_TIMESTAMP(6)
WHERE task_id = ? AND disposition IS NULL AND assigned_at <= UTC_TIMESTAMP(6) - INTERVAL (? * 1000) MICROSECOND`,
	WorkOlder: `SELECT id, loan_id, user_name, assigned_at, TIMESTAMPDIFF(SECOND, assigned_at, UTC_TIMESTAMP(6))
FROM loanq_work
WHERE task_id = ? AND disposition IS NULL AND (? = '' OR user_name = ?)
  AND assigned_at <= UTC_TIMESTAMP(6) - INTERVAL (? * 1000) MICROSECOND
ORDER BY assigned_at, id`,
	WorkReclaim: `UPDATE loanq_work SET disposition = 'reclaimed', disposed_at = UTC_TIMESTAMP(6), disposed_by = ?
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

// criteriaQuery is the heavy query of SPEC §3 step 4. It takes no lock (the
// task lock serialises callers), so InnoDB reads it from a consistent snapshot
// without locking the scanned application rows.
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
           OR (w.disposition = 'return' AND w.return_at > UTC_TIMESTAMP(6))))
ORDER BY %[4]s
LIMIT ?`, src.Key, src.Source, src.Where, order)
}

// rowsClaim is the criteria query of the rows strategy: each caller locks the
// loans it is about to assign. MariaDB has no FOR UPDATE OF, and needs none
// here: a locking read does not lock the rows of a nested subquery without a
// locking clause of its own, so the NOT EXISTS over loanq_work locks nothing.
// SKIP LOCKED passes over loans other callers hold; LIMIT counts rows
// returned. InnoDB locks what it reads through the index: the source needs an
// index matching the criteria and the order (e.g. (eligible, priority, id)),
// or the claim scans (and, under REPEATABLE READ, would lock) far more rows;
// the claim runs at READ COMMITTED, which keeps only the returned rows locked.
func rowsClaim(src drivers.CriteriaSource) string {
	return criteriaQuery(src) + `
FOR UPDATE SKIP LOCKED`
}

// lockableView binds: the source name. Answers IS_UPDATABLE for a view of
// the current database, no row for a base table.
const lockableView = `SELECT IS_UPDATABLE FROM information_schema.VIEWS
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`
