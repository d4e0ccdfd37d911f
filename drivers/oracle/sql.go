package oracle

import (
	"fmt"
	"strings"

	"github.com/loanq/loanq/drivers"
)

// Every statement loanq sends to Oracle. Oracle's quirks shape them:
//
//   - Binds are positional, :1, :2, … and bound by occurrence in SQL (not PL/SQL):
//     a placeholder that appears twice needs two arguments, so no number repeats.
//   - No statement ends with ';': the OCI parses a trailing ';' after plain SQL as
//     an error (ORA-00933/ORA-00911).
//   - SYSTIMESTAMP is the database server's clock in the server's time zone;
//     SYS_EXTRACT_UTC turns it into UTC, which is what every TIMESTAMP column holds.
//   - INSERT … RETURNING id INTO :N hands the new id back through an out bind
//     (sql.Out, appended by InsertReturningID): N is the insert's binds plus one.
const now = `SYS_EXTRACT_UTC(SYSTIMESTAMP)`

// order_by is NULL for a task without --order (Oracle has no empty string);
// the engine reads it as a NullString.
const taskColumns = `id, name, source_table, key_column, criteria, order_by, max_active,
       lock_strategy, query_delay_ms, lease_ttl_ms, created_by, created_at, hold_limit_ms, max_hold_ms`

// msInterval turns a bind of milliseconds into an interval. NUMTODSINTERVAL of
// a NULL bind is NULL, so a NULL bind gives a NULL timestamp.
func msInterval(bind string) string {
	return `NUMTODSINTERVAL(` + bind + ` / 1000, 'SECOND')`
}

var statements = drivers.Statements{
	Now: `SELECT ` + now + ` FROM DUAL`,

	TaskInsert: `INSERT INTO loanq_task (name, source_table, key_column, criteria, order_by, max_active,
       lock_strategy, query_delay_ms, lease_ttl_ms, created_by, created_at, hold_limit_ms)
VALUES (:1, :2, :3, :4, :5, :6, :7, :8, :9, :10, ` + now + `, :11)
RETURNING id INTO :12`,
	TaskByName: `SELECT ` + taskColumns + ` FROM loanq_task WHERE name = :1`,
	TaskByID:   `SELECT ` + taskColumns + ` FROM loanq_task WHERE id = :1`,
	TaskList:   `SELECT ` + taskColumns + ` FROM loanq_task ORDER BY name`,
	// FETCH FIRST is only unsafe together with FOR UPDATE; this read locks nothing.
	// Newest by start time, not by id: identity columns are NOORDER, so on RAC
	// each instance hands out ids from its own cached range and a higher id
	// may be an older run (the other dialects' ids follow insertion order).
	TaskRuns: `SELECT id, strategy, holder, started_at, duration_ms, rows_found, requests_served, loans_assigned
FROM loanq_query_run WHERE task_id = :1 ORDER BY started_at DESC, id DESC
FETCH FIRST 10 ROWS ONLY`,

	RequestInsert: `INSERT INTO loanq_work_request (task_id, user_name, requested, assigned, status, created_at)
VALUES (:1, :2, :3, 0, 'pending', ` + now + `)
RETURNING id INTO :4`,
	RequestByID: `SELECT r.id, r.task_id, t.name, r.user_name, r.requested, r.assigned, r.status, r.created_at, r.served_at
FROM loanq_work_request r JOIN loanq_task t ON t.id = r.task_id
WHERE r.id = :1`,
	RequestsPending: `SELECT id, user_name, requested FROM loanq_work_request
WHERE task_id = :1 AND status = 'pending' ORDER BY created_at, id`,
	RequestFinish: `UPDATE loanq_work_request SET assigned = :1, status = :2, served_at = ` + now + `
WHERE id = :3 AND status = 'pending'`,
	RequestLoans: `SELECT loan_id FROM loanq_work WHERE request_id = :1 ORDER BY id`,

	// The task row is found by its primary key, so the lock covers exactly that
	// row and no row limit is needed; Oracle rejects FETCH FIRST with FOR UPDATE
	// (ORA-02014) and applies ROWNUM before locking, so with SKIP LOCKED a
	// ROWNUM limit returns fewer rows than asked. A foreign-key check of a
	// new work request reads the parent's key index and does not wait for this
	// row lock, so requests are still logged while the criteria query runs.
	LockSkip:   `SELECT id FROM loanq_task WHERE id = :1 FOR UPDATE SKIP LOCKED`,
	LockNoWait: `SELECT id FROM loanq_task WHERE id = :1 FOR UPDATE NOWAIT`,
	LockWait:   `SELECT id FROM loanq_task WHERE id = :1 FOR UPDATE`,
	LeaseAcquire: `UPDATE loanq_task
SET lease_owner = :1, lease_token = lease_token + 1,
    lease_expires_at = ` + now + ` + ` + msInterval(":2") + `
WHERE id = :3 AND (lease_owner IS NULL OR lease_expires_at <= ` + now + `)`,
	LeaseToken: `SELECT lease_token FROM loanq_task WHERE id = :1 AND lease_owner = :2`,
	LeaseFenceRelease: `UPDATE loanq_task SET lease_owner = NULL, lease_expires_at = NULL
WHERE id = :1 AND lease_owner = :2 AND lease_token = :3 AND lease_expires_at > ` + now,
	LeaseRelease: `UPDATE loanq_task SET lease_owner = NULL, lease_expires_at = NULL
WHERE id = :1 AND lease_owner = :2 AND lease_token = :3`,

	ActiveCountForUser: `SELECT COUNT(*) FROM loanq_work WHERE task_id = :1 AND user_name = :2 AND disposition IS NULL`,
	WorkInsert: `INSERT INTO loanq_work (task_id, loan_id, user_name, request_id, assigned_at)
VALUES (:1, :2, :3, :4, ` + now + `)`,
	// No RETURNING here: the engine executes this insert with exactly its eight
	// binds, and an unbound RETURNING … INTO placeholder fails with ORA-01008.
	QueryRunInsert: `INSERT INTO loanq_query_run (task_id, strategy, holder, started_at, duration_ms,
       rows_found, requests_served, loans_assigned)
VALUES (:1, :2, :3, :4, :5, :6, :7, :8)`,

	ActiveWork: `SELECT id, user_name FROM loanq_work WHERE task_id = :1 AND loan_id = :2 AND disposition IS NULL`,
	LastWork: `SELECT disposition, user_name FROM loanq_work WHERE task_id = :1 AND loan_id = :2
ORDER BY assigned_at DESC, id DESC
FETCH FIRST 1 ROWS ONLY`,
	Dispose: `UPDATE loanq_work
SET disposition = :1, disposed_at = ` + now + `,
    return_at = ` + now + ` + ` + msInterval(":2") + `
WHERE id = :3 AND user_name = :4 AND disposition IS NULL`,

	// Oracle stores and binds '' as NULL, so the engine's "" (all tasks) arrives
	// as NULL and is tested with IS NULL; t.name = NULL would match nothing.
	// The seconds are summed from the interval's fields: TIMESTAMP minus
	// TIMESTAMP is an INTERVAL DAY TO SECOND, which has no direct conversion to a
	// number, and its fractional seconds are cut so the value scans as an integer.
	Pipeline: `SELECT name, loan_id, assigned_at,
       EXTRACT(DAY FROM age) * 86400 + EXTRACT(HOUR FROM age) * 3600
         + EXTRACT(MINUTE FROM age) * 60 + TRUNC(EXTRACT(SECOND FROM age))
FROM (
  SELECT t.name, w.loan_id, w.assigned_at, w.id, ` + now + ` - w.assigned_at AS age
  FROM loanq_work w JOIN loanq_task t ON t.id = w.task_id
  WHERE w.user_name = :1 AND w.disposition IS NULL AND (:2 IS NULL OR t.name = :3))
ORDER BY assigned_at, id`,

	// Wake-ups, heartbeat, rows (docs/algorithm.md). Oracle bounds a queued
	// lock in the statement itself (FOR UPDATE WAIT n, ORA-30006 when n runs
	// out): no session setting to change or restore.
	RequestWake: `SELECT r.status, t.lease_owner,
       CASE WHEN t.lease_owner IS NULL OR t.lease_expires_at <= ` + now + ` THEN 1 ELSE 0 END
FROM loanq_work_request r JOIN loanq_task t ON t.id = r.task_id
WHERE r.id = :1`,
	WaitLockSave:    ``,
	WaitLockSet:     ``,
	WaitLockRestore: ``,
	LockWaitBounded: `SELECT id FROM loanq_task WHERE id = :1 FOR UPDATE WAIT {wait_s}`,
	RecentRuns: `SELECT COUNT(*), NVL(ROUND(AVG(duration_ms)), 0) FROM (
  SELECT duration_ms FROM loanq_query_run WHERE task_id = :1 ORDER BY id DESC
  FETCH FIRST 10 ROWS ONLY)`,
	RequestRate: `SELECT COUNT(*), NVL(SUM(requested), 0) FROM loanq_work_request
WHERE task_id = :1 AND created_at > ` + now + ` - ` + msInterval(":2"),
	LeaseRenew: `UPDATE loanq_task SET lease_expires_at = ` + now + ` + ` + msInterval(":1") + `
WHERE id = :2 AND lease_owner = :3 AND lease_token = :4 AND lease_expires_at > ` + now,
	LeaseHolder: `SELECT lease_owner FROM loanq_task WHERE id = :1 AND lease_owner IS NOT NULL AND lease_expires_at > ` + now,
	LeaseTakeOver: `UPDATE loanq_task
SET lease_owner = :1, lease_token = lease_token + 1,
    lease_expires_at = ` + now + ` + ` + msInterval(":2") + `
WHERE id = :3 AND lease_owner = :4`,
	UserLockEnsure: `INSERT INTO loanq_task_user (task_id, user_name) VALUES (:1, :2)`,
	UserLock:       `SELECT task_id FROM loanq_task_user WHERE task_id = :1 AND user_name = :2 FOR UPDATE`,
	// ORA-00001 rolls back this statement only; the engine skips the loan.
	WorkInsertRows: `INSERT INTO loanq_work (task_id, loan_id, user_name, request_id, assigned_at)
VALUES (:1, :2, :3, :4, ` + now + `)`,

	// The bench (loanq bench). A locking claim cannot be one SELECT: Oracle
	// applies ROWNUM before locking (COUNT STOPKEY under FOR UPDATE), so
	// "ROWNUM <= K … FOR UPDATE SKIP LOCKED" picks K rows and then skips the
	// held ones, returning fewer than K; and it rejects FETCH FIRST with
	// FOR UPDATE (ORA-02014). The claims call the PL/SQL
	// cursor procedure loanq_bench_claim (migrations/oracle/00002_bench.sql),
	// which locks exactly the rows it fetches and marks them 'claimed' inside
	// the caller's transaction; BenchClaimRead then reads them back — only this
	// transaction sees its own uncommitted 'claimed' rows with no owner.
	BenchReset: `DELETE FROM loanq_bench_item`,
	BenchFill: `INSERT INTO loanq_bench_item (id, status, processed)
SELECT :1 + LEVEL - 1, 'ready', 0 FROM DUAL CONNECT BY LEVEL <= :2`,
	BenchBegin:       ``,
	BenchClaimSkip:   `BEGIN loanq_bench_claim(:1, 'skip'); END;`,
	BenchClaimNoWait: `BEGIN loanq_bench_claim(:1, 'nowait'); END;`,
	BenchClaimWait:   `BEGIN loanq_bench_claim(:1, 'wait'); END;`,
	BenchClaimRead:   `SELECT id FROM loanq_bench_item WHERE status = 'claimed' AND owner IS NULL ORDER BY id`,
	// The subselect takes no lock, so FETCH FIRST is allowed in it; the outer
	// status = 'ready' makes a second claimer of the same row update nothing
	// (Oracle restarts an UPDATE whose rows changed under it).
	BenchLeaseClaim: `UPDATE loanq_bench_item
SET status = 'claimed', owner = :1, claimed_at = ` + now + `,
    lease_expires_at = ` + now + ` + ` + msInterval(":2") + `
WHERE status = 'ready'
  AND id IN (SELECT id FROM loanq_bench_item WHERE status = 'ready' ORDER BY id
             FETCH FIRST :3 ROWS ONLY)`,
	BenchLeaseRead: `SELECT id FROM loanq_bench_item WHERE owner = :1 AND status = 'claimed' ORDER BY id`,
	BenchDone: `UPDATE loanq_bench_item
SET status = 'done', owner = :1, processed = processed + 1, processed_at = ` + now + `
WHERE id = :2`,
	BenchLeaseDone: `UPDATE loanq_bench_item
SET status = 'done', processed = processed + 1, processed_at = ` + now + `
WHERE id = :1 AND owner = :2 AND status = 'claimed' AND lease_expires_at > ` + now,
	BenchLeaseExpire: `UPDATE loanq_bench_item
SET status = 'ready', owner = NULL, claimed_at = NULL, lease_expires_at = NULL
WHERE status = 'claimed' AND lease_expires_at <= ` + now,
	BenchReady: `SELECT COUNT(*) FROM loanq_bench_item WHERE status = 'ready'`,
	BenchSummary: `SELECT COUNT(*),
       COALESCE(SUM(CASE WHEN status = 'done' THEN 1 ELSE 0 END), 0),
       COALESCE(SUM(CASE WHEN processed > 1 THEN 1 ELSE 0 END), 0),
       COALESCE(SUM(processed), 0),
       COALESCE(SUM(CASE WHEN processed = 0 THEN 1 ELSE 0 END), 0)
FROM loanq_bench_item`,
	BenchByOwner: `SELECT owner, COUNT(*) FROM loanq_bench_item WHERE status = 'done' GROUP BY owner ORDER BY owner`,

	// The hold limit: an Oracle session cannot bound its own idle time
	// inside a transaction; a DBA configures the bound (a profile's
	// IDLE_TIME, Resource Manager's MAX_IDLE_BLOCKER_TIME, SQLNET.EXPIRE_TIME
	// for vanished clients), as docs/oracle.md describes.
	HoldMeasured: `SELECT MAX(duration_ms) FROM (
  SELECT duration_ms FROM loanq_query_run WHERE task_id = :1 ORDER BY id DESC FETCH FIRST 10 ROWS ONLY)`,
	HoldLimitSet:   ``,
	HoldLimitReset: ``,

	// v$version is readable by every user (a public synonym).
	ServerVersion: `SELECT banner FROM v$version WHERE ROWNUM = 1`,
	// The ids arrive as one JSON array, unpacked by JSON_TABLE (12.1.0.2).
	BenchDoneMany: `UPDATE loanq_bench_item
SET status = 'done', owner = :1, processed = processed + 1, processed_at = ` + now + `
WHERE id IN (SELECT j.id FROM JSON_TABLE(:2, '$[*]' COLUMNS (id NUMBER(19) PATH '$')) j)`,
	BenchLeaseDoneMany: `UPDATE loanq_bench_item
SET status = 'done', processed = processed + 1, processed_at = ` + now + `
WHERE owner = :1 AND id IN (SELECT j.id FROM JSON_TABLE(:2, '$[*]' COLUMNS (id NUMBER(19) PATH '$')) j)
  AND status = 'claimed' AND lease_expires_at > ` + now,
	BenchClaimDone: ``,

	// lock run: named leases. Oracle has no INSERT … ON CONFLICT, and MERGE
	// can still raise ORA-00001 under a race: a plain INSERT whose unique
	// violation the caller ignores. The UPDATE's row lock serialises takers;
	// a waiting one restarts its UPDATE on the committed row and finds it taken.
	NamedLockEnsure: `INSERT INTO loanq_lock (name, token) VALUES (:1, 0)`,
	NamedLockTake: `UPDATE loanq_lock
SET holder = :1, token = token + 1, taken_at = ` + now + `,
    expires_at = ` + now + ` + ` + msInterval(":2") + `
WHERE name = :3 AND (holder IS NULL OR expires_at <= ` + now + `)`,
	NamedLockRead: `SELECT holder, token, taken_at, expires_at, ` + now + ` FROM loanq_lock WHERE name = :1`,
	NamedLockRenew: `UPDATE loanq_lock SET expires_at = ` + now + ` + ` + msInterval(":1") + `
WHERE name = :2 AND holder = :3 AND token = :4 AND expires_at > ` + now,
	NamedLockRelease: `UPDATE loanq_lock SET holder = NULL, expires_at = NULL
WHERE name = :1 AND holder = :2 AND token = :3`,
	NamedLockList: `SELECT name, holder, token, taken_at, expires_at, ` + now + ` FROM loanq_lock ORDER BY name`,

	// task stats: the window's start is computed by the database clock.
	StatsDispositions: `SELECT t.name, w.disposition, COUNT(*)
FROM loanq_work w JOIN loanq_task t ON t.id = w.task_id
WHERE w.disposition IS NOT NULL AND w.disposed_at > ` + now + ` - ` + msInterval(":1") + `
GROUP BY t.name, w.disposition`,
	StatsRuns: `SELECT t.name, r.duration_ms, r.requests_served
FROM loanq_query_run r JOIN loanq_task t ON t.id = r.task_id
WHERE r.started_at > ` + now + ` - ` + msInterval(":1") + `
ORDER BY r.started_at DESC, r.id DESC`,

	// The dashboard (loanq serve). Active work is read per task through the
	// function-based unique index, which holds only active rows (its keys are
	// NULL once a row is dispositioned), and pending requests through
	// (task_id, status, id); both joins start from the few task rows.
	// DashDone reads the work history from a floor id up (see
	// drivers.Statements).
	// TRUNC of the UTC clock is midnight of the database's UTC day.
	DashPending: `SELECT r.task_id, COUNT(*), ` + oraAge(`MIN(r.created_at)`) + `
FROM loanq_task t JOIN loanq_work_request r ON r.task_id = t.id AND r.status = 'pending'
GROUP BY r.task_id`,
	DashActive: `SELECT w.task_id, w.user_name, COUNT(*), ` + oraAge(`MIN(w.assigned_at)`) + `,
       COUNT(CASE WHEN ` + oraAge(`w.assigned_at`) + ` >= :1 THEN 1 END)
FROM loanq_task t JOIN loanq_work w ON CASE WHEN w.disposition IS NULL THEN w.task_id END = t.id
GROUP BY w.task_id, w.user_name`,
	DashDoneFloor: `SELECT MIN(CASE WHEN disposition IS NULL THEN id END),
       MIN(CASE WHEN disposed_at >= CAST(TRUNC(` + now + `) AS TIMESTAMP) THEN id END), MAX(id)
FROM loanq_work`,
	DashDoneBefore: `SELECT task_id, user_name, disposition, COUNT(*)
FROM loanq_work WHERE id < :1 AND disposition IS NOT NULL GROUP BY task_id, user_name, disposition`,
	DashDone: `SELECT task_id, user_name, disposition, COUNT(*),
       COUNT(CASE WHEN disposed_at >= CAST(TRUNC(` + now + `) AS TIMESTAMP) THEN 1 END)
FROM loanq_work WHERE id >= :1 AND disposition IS NOT NULL GROUP BY task_id, user_name, disposition`,
	DashRuns: `SELECT id, ` + oraAge(`started_at`) + `, duration_ms, rows_found, requests_served, loans_assigned
FROM loanq_query_run WHERE task_id = :1 ORDER BY id DESC
FETCH FIRST :2 ROWS ONLY`,
	DashDispositions: `SELECT loan_id, user_name, disposition, ` + oraAge(`disposed_at`) + `,
       ROUND((CAST(disposed_at AS DATE) - CAST(assigned_at AS DATE)) * 86400)
FROM loanq_work WHERE task_id = :1 AND disposition IS NOT NULL ORDER BY id DESC
FETCH FIRST :2 ROWS ONLY`,

	// cancelled requests and attach (docs/algorithm.md, "Cancelling and attaching"):
	// the CASE expressions are those of loanq_request_one_pending_uq, so
	// the lookup is that index's range.
	RequestPendingFor: `SELECT id FROM loanq_work_request
WHERE CASE WHEN status = 'pending' THEN task_id END = :1
  AND CASE WHEN status = 'pending' THEN user_name END = :2`,
	RequestCancel: `UPDATE loanq_work_request SET status = 'cancelled', served_at = ` + now + `
WHERE id = :1 AND user_name = :2 AND status = 'pending'`,

	// abandoned work (docs/algorithm.md, "Abandoned work: --max-hold")
	TaskSetMaxHold: `UPDATE loanq_task SET max_hold_ms = :1 WHERE id = :2`,
	WorkExpire: `UPDATE loanq_work SET disposition = 'expired', disposed_at = ` + now + `
WHERE task_id = :1 AND disposition IS NULL AND assigned_at <= ` + now + ` - NUMTODSINTERVAL(:2 / 1000, 'SECOND')`,
	WorkOlder: `SELECT id, loan_id, user_name, assigned_at,
       EXTRACT(DAY FROM age) * 86400 + EXTRACT(HOUR FROM age) * 3600
         + EXTRACT(MINUTE FROM age) * 60 + TRUNC(EXTRACT(SECOND FROM age))
FROM (
  SELECT id, loan_id, user_name, assigned_at, ` + now + ` - assigned_at AS age
  FROM loanq_work
  WHERE task_id = :1 AND disposition IS NULL AND (:2 IS NULL OR user_name = :3)
    AND assigned_at <= ` + now + ` - NUMTODSINTERVAL(:4 / 1000, 'SECOND'))
ORDER BY assigned_at, id`,
	WorkReclaim: `UPDATE loanq_work SET disposition = 'reclaimed', disposed_at = ` + now + `, disposed_by = :1
WHERE id = :2 AND disposition IS NULL`,

	// task update
	TaskUpdate: `UPDATE loanq_task
SET source_table = :1,
    key_column = :2,
    criteria = :3,
    order_by = :4,
    max_active = :5,
    lock_strategy = :6,
    query_delay_ms = :7,
    lease_ttl_ms = :8,
    hold_limit_ms = :9,
    max_hold_ms = :10
WHERE id = :11`,
}

// oraAge is how many whole seconds ago a timestamp was, by the database
// clock: the difference of two DATEs is in days.
func oraAge(ts string) string {
	return `ROUND((CAST(` + now + ` AS DATE) - CAST(` + ts + ` AS DATE)) * 86400)`
}

// criteriaQuery is the heavy query of SPEC §3 step 4: the task's criteria,
// minus loans that are not eligible for the task (§4), in priority order.
// It takes no lock (the task lock already serialises the callers), which is
// what makes FETCH FIRST safe here: Oracle rejects a row limit only on a
// locking query, where it would lock every row before limiting.
func criteriaQuery(src drivers.CriteriaSource) string {
	return criteriaSelect(src) + `
FETCH FIRST :2 ROWS ONLY`
}

// criteriaSelect is the criteria query up to its ORDER BY; its one bind, :1,
// is the task id.
func criteriaSelect(src drivers.CriteriaSource) string {
	order := "src." + src.Key
	if strings.TrimSpace(src.Order) != "" {
		order = src.Order + ", src." + src.Key
	}
	return fmt.Sprintf(`SELECT src.%[1]s FROM %[2]s src
WHERE (%[3]s)
  AND NOT EXISTS (
    SELECT 1 FROM loanq_work w
    WHERE w.task_id = :1 AND w.loan_id = src.%[1]s
      AND (w.disposition IS NULL
           OR w.disposition = 'never'
           OR (w.disposition = 'return' AND w.return_at > %[5]s)))
ORDER BY %[4]s`, src.Key, src.Source, src.Where, order, now)
}

// The rows strategy on Oracle. A locking query cannot be limited in SQL:
// ROWNUM is applied after the rows are locked and FETCH FIRST is refused with
// FOR UPDATE (ORA-02014). The PL/SQL cursor procedure loanq_lock_rows
// (migrations/oracle/00003_engine.sql) opens rowsCursor FOR UPDATE SKIP LOCKED
// and fetches at most n rows: with SKIP LOCKED a row is locked when it is
// fetched, so it locks exactly the rows it returns. It records their keys,
// in order, in the temporary table loanq_rows_locked (rows private to the
// transaction, deleted at commit), which rowsClaimRead reads back.
//
// rowsClaimCall binds: task id, n, the cursor text.
const rowsClaimCall = `BEGIN loanq_lock_rows(:1, :2, :3); END;`

// rowsClaimRead binds nothing: the keys the last call locked, in order.
const rowsClaimRead = `SELECT loan_id FROM loanq_rows_locked ORDER BY seq`

// rowsCursor is the criteria query without a row limit, locking the source
// rows only (FOR UPDATE OF its key column). Its one bind, :1, is the task id,
// bound by the procedure (OPEN … USING).
func rowsCursor(src drivers.CriteriaSource) string {
	return criteriaSelect(src) + `
FOR UPDATE OF src.` + src.Key + ` SKIP LOCKED`
}
