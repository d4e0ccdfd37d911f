package postgres

import (
	"fmt"
	"strings"

	"github.com/loanq/loanq/drivers"
)

// Every statement loanq sends to PostgreSQL. clock_timestamp() is the database
// clock at the moment of the statement (now() would be the transaction start).
const taskColumns = `id, name, source_table, key_column, criteria, order_by, max_active,
       lock_strategy, query_delay_ms, lease_ttl_ms, created_by, created_at, hold_limit_ms, max_hold_ms`

var statements = drivers.Statements{
	Now: `SELECT clock_timestamp()`,

	TaskInsert: `INSERT INTO loanq_task (name, source_table, key_column, criteria, order_by, max_active,
       lock_strategy, query_delay_ms, lease_ttl_ms, created_by, created_at, hold_limit_ms)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, clock_timestamp(), $11)
RETURNING id`,
	TaskByName: `SELECT ` + taskColumns + ` FROM loanq_task WHERE name = $1`,
	TaskByID:   `SELECT ` + taskColumns + ` FROM loanq_task WHERE id = $1`,
	TaskList:   `SELECT ` + taskColumns + ` FROM loanq_task ORDER BY name`,
	TaskRuns: `SELECT id, strategy, holder, started_at, duration_ms, rows_found, requests_served, loans_assigned
FROM loanq_query_run WHERE task_id = $1 ORDER BY id DESC LIMIT 10`,

	RequestInsert: `INSERT INTO loanq_work_request (task_id, user_name, requested, assigned, status, created_at)
VALUES ($1, $2, $3, 0, 'pending', clock_timestamp())
RETURNING id`,
	RequestByID: `SELECT r.id, r.task_id, t.name, r.user_name, r.requested, r.assigned, r.status, r.created_at, r.served_at
FROM loanq_work_request r JOIN loanq_task t ON t.id = r.task_id
WHERE r.id = $1`,
	RequestsPending: `SELECT id, user_name, requested FROM loanq_work_request
WHERE task_id = $1 AND status = 'pending' ORDER BY created_at, id`,
	RequestFinish: `UPDATE loanq_work_request SET assigned = $1, status = $2, served_at = clock_timestamp()
WHERE id = $3 AND status = 'pending'`,
	RequestLoans: `SELECT loan_id FROM loanq_work WHERE request_id = $1 ORDER BY id`,

	// FOR NO KEY UPDATE, not FOR UPDATE: a new work request references its
	// task by foreign key, and the FK check takes FOR KEY SHARE on the task
	// row. FOR UPDATE would conflict with it and make every request insert
	// wait for the whole criteria query; FOR NO KEY UPDATE still excludes
	// other lock holders but lets requests be logged meanwhile.
	LockSkip:   `SELECT id FROM loanq_task WHERE id = $1 FOR NO KEY UPDATE SKIP LOCKED`,
	LockNoWait: `SELECT id FROM loanq_task WHERE id = $1 FOR NO KEY UPDATE NOWAIT`,
	LockWait:   `SELECT id FROM loanq_task WHERE id = $1 FOR NO KEY UPDATE`,
	LeaseAcquire: `UPDATE loanq_task
SET lease_owner = $1, lease_token = lease_token + 1,
    lease_expires_at = clock_timestamp() + $2::bigint * INTERVAL '1 millisecond'
WHERE id = $3 AND (lease_owner IS NULL OR lease_expires_at <= clock_timestamp())`,
	LeaseToken: `SELECT lease_token FROM loanq_task WHERE id = $1 AND lease_owner = $2`,
	LeaseFenceRelease: `UPDATE loanq_task SET lease_owner = NULL, lease_expires_at = NULL
WHERE id = $1 AND lease_owner = $2 AND lease_token = $3 AND lease_expires_at > clock_timestamp()`,
	LeaseRelease: `UPDATE loanq_task SET lease_owner = NULL, lease_expires_at = NULL
WHERE id = $1 AND lease_owner = $2 AND lease_token = $3`,

	ActiveCountForUser: `SELECT COUNT(*) FROM loanq_work WHERE task_id = $1 AND user_name = $2 AND disposition IS NULL`,
	WorkInsert: `INSERT INTO loanq_work (task_id, loan_id, user_name, request_id, assigned_at)
VALUES ($1, $2, $3, $4, clock_timestamp())`,
	QueryRunInsert: `INSERT INTO loanq_query_run (task_id, strategy, holder, started_at, duration_ms,
       rows_found, requests_served, loans_assigned)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
RETURNING id`,

	ActiveWork: `SELECT id, user_name FROM loanq_work WHERE task_id = $1 AND loan_id = $2 AND disposition IS NULL`,
	LastWork: `SELECT disposition, user_name FROM loanq_work WHERE task_id = $1 AND loan_id = $2
ORDER BY assigned_at DESC, id DESC LIMIT 1`,
	Dispose: `UPDATE loanq_work
SET disposition = $1, disposed_at = clock_timestamp(),
    return_at = clock_timestamp() + $2::bigint * INTERVAL '1 millisecond'
WHERE id = $3 AND user_name = $4 AND disposition IS NULL`,

	Pipeline: `SELECT t.name, w.loan_id, w.assigned_at,
       EXTRACT(EPOCH FROM clock_timestamp() - w.assigned_at)::BIGINT
FROM loanq_work w JOIN loanq_task t ON t.id = w.task_id
WHERE w.user_name = $1 AND w.disposition IS NULL AND ($2 = '' OR t.name = $3)
ORDER BY w.assigned_at, w.id`,

	// Wake-ups, heartbeat, rows (docs/algorithm.md). A waiter queues on the
	// task row with the wait lock, bounded by lock_timeout for this
	// transaction only (set_config(…, true) is SET LOCAL), and puts the
	// setting back once the lock is granted, for the serving statements.
	RequestWake: `SELECT r.status, t.lease_owner,
       CASE WHEN t.lease_owner IS NULL OR t.lease_expires_at <= clock_timestamp() THEN 1 ELSE 0 END
FROM loanq_work_request r JOIN loanq_task t ON t.id = r.task_id
WHERE r.id = $1`,
	WaitLockSave:    `SELECT current_setting('lock_timeout')`,
	WaitLockSet:     `SELECT set_config('lock_timeout', $1::bigint || 'ms', true)`,
	WaitLockRestore: `SELECT set_config('lock_timeout', $1, true)`,
	LockWaitBounded: `SELECT id FROM loanq_task WHERE id = $1 FOR NO KEY UPDATE`,
	RecentRuns: `SELECT COUNT(*), COALESCE(AVG(duration_ms), 0)::bigint FROM (
  SELECT duration_ms FROM loanq_query_run WHERE task_id = $1 ORDER BY id DESC LIMIT 10) r`,
	RequestRate: `SELECT COUNT(*), COALESCE(SUM(requested), 0) FROM loanq_work_request
WHERE task_id = $1 AND created_at > clock_timestamp() - $2::bigint * INTERVAL '1 millisecond'`,
	LeaseRenew: `UPDATE loanq_task SET lease_expires_at = clock_timestamp() + $1::bigint * INTERVAL '1 millisecond'
WHERE id = $2 AND lease_owner = $3 AND lease_token = $4 AND lease_expires_at > clock_timestamp()`,
	LeaseHolder: `SELECT lease_owner FROM loanq_task WHERE id = $1 AND lease_owner IS NOT NULL AND lease_expires_at > clock_timestamp()`,
	LeaseTakeOver: `UPDATE loanq_task
SET lease_owner = $1, lease_token = lease_token + 1,
    lease_expires_at = clock_timestamp() + $2::bigint * INTERVAL '1 millisecond'
WHERE id = $3 AND lease_owner = $4`,
	UserLockEnsure: `INSERT INTO loanq_task_user (task_id, user_name) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
	UserLock:       `SELECT task_id FROM loanq_task_user WHERE task_id = $1 AND user_name = $2 FOR NO KEY UPDATE`,
	// The arbiter is the partial unique index of the invariant: a loan active
	// for the task already is not inserted, and the transaction goes on.
	WorkInsertRows: `INSERT INTO loanq_work (task_id, loan_id, user_name, request_id, assigned_at)
VALUES ($1, $2, $3, $4, clock_timestamp())
ON CONFLICT (task_id, loan_id) WHERE disposition IS NULL DO NOTHING`,

	// The bench (loanq bench). The claims read the (status, id) index in claim
	// order; LIMIT stops the locking read after K rows, and SKIP LOCKED makes it
	// pass over rows other transactions hold instead of waiting for them.
	BenchReset: `DELETE FROM loanq_bench_item`,
	BenchFill: `INSERT INTO loanq_bench_item (id, status, processed)
SELECT g, 'ready', 0 FROM generate_series($1::bigint, $1::bigint + $2::bigint - 1) AS g`,
	BenchBegin:       ``,
	BenchClaimSkip:   `SELECT id FROM loanq_bench_item WHERE status = 'ready' ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`,
	BenchClaimNoWait: `SELECT id FROM loanq_bench_item WHERE status = 'ready' ORDER BY id LIMIT $1 FOR UPDATE NOWAIT`,
	BenchClaimWait:   `SELECT id FROM loanq_bench_item WHERE status = 'ready' ORDER BY id LIMIT $1 FOR UPDATE`,
	BenchClaimRead:   ``,
	// The subselect's SKIP LOCKED only lasts for the claim's own short
	// transaction: it keeps concurrent claimers from picking the same ids.
	// Without it they all pick the first ready ids, all but one wait for the
	// winner's commit and then find the rows no longer ready (PostgreSQL
	// re-checks status = 'ready' on the new row version, so nothing is leased
	// twice), and come back empty: measured at 32 workers × 20,000 items,
	// under 100 items/s. The lease, not this lock, covers the work.
	// The pick is a MATERIALIZED CTE, run exactly once. As an IN (subquery)
	// the planner may re-run it for every row it scans (a SubPlan in a nested
	// loop); with SKIP LOCKED each run skips the rows the previous one locked
	// and returns the next ones, so one claim took every ready item
	// (bench_test's max_claim check caught it on a 40-row table).
	BenchLeaseClaim: `WITH picked AS MATERIALIZED (
  SELECT id FROM loanq_bench_item WHERE status = 'ready' ORDER BY id LIMIT $3
  FOR UPDATE SKIP LOCKED)
UPDATE loanq_bench_item b
SET status = 'claimed', owner = $1, claimed_at = clock_timestamp(),
    lease_expires_at = clock_timestamp() + $2::bigint * INTERVAL '1 millisecond'
FROM picked
WHERE b.id = picked.id
RETURNING b.id`,
	BenchLeaseRead: ``,
	BenchDone: `UPDATE loanq_bench_item
SET status = 'done', owner = $1, processed = processed + 1, processed_at = clock_timestamp()
WHERE id = $2`,
	BenchLeaseDone: `UPDATE loanq_bench_item
SET status = 'done', processed = processed + 1, processed_at = clock_timestamp()
WHERE id = $1 AND owner = $2 AND status = 'claimed' AND lease_expires_at > clock_timestamp()`,
	BenchLeaseExpire: `UPDATE loanq_bench_item
SET status = 'ready', owner = NULL, claimed_at = NULL, lease_expires_at = NULL
WHERE status = 'claimed' AND lease_expires_at <= clock_timestamp()`,
	BenchReady: `SELECT COUNT(*) FROM loanq_bench_item WHERE status = 'ready'`,
	BenchSummary: `SELECT COUNT(*),
       COALESCE(SUM(CASE WHEN status = 'done' THEN 1 ELSE 0 END), 0),
       COALESCE(SUM(CASE WHEN processed > 1 THEN 1 ELSE 0 END), 0),
       COALESCE(SUM(processed), 0),
       COALESCE(SUM(CASE WHEN processed = 0 THEN 1 ELSE 0 END), 0)
FROM loanq_bench_item`,
	BenchByOwner: `SELECT owner, COUNT(*) FROM loanq_bench_item WHERE status = 'done' GROUP BY owner ORDER BY owner`,

	// The hold limit (docs/reliability.md). SET LOCAL through set_config(…,
	// true): the settings end with the lock transaction, so the pooled
	// connection keeps none of them. idle_in_transaction_session_timeout ends
	// a session that sits idle in the transaction (its client stopped, cut
	// off or gone); statement_timeout cancels one statement running longer,
	// after which the aborted transaction idles and is ended the same way.
	HoldMeasured: `SELECT MAX(duration_ms) FROM (
  SELECT duration_ms FROM loanq_query_run WHERE task_id = $1 ORDER BY id DESC LIMIT 10) recent`,
	HoldLimitSet: `SELECT set_config('idle_in_transaction_session_timeout', ($1::bigint)::text, true),
       set_config('statement_timeout', ($2::bigint)::text, true)`,
	HoldLimitReset: ``,

	ServerVersion: `SELECT 'PostgreSQL ' || current_setting('server_version')`,
	// The ids arrive as one JSON array: one statement and one round trip
	// for the whole batch, whatever its size, with no placeholder list to
	// build. The IN (subquery) is a hashed semi-join onto the primary key.
	BenchDoneMany: `UPDATE loanq_bench_item
SET status = 'done', owner = $1, processed = processed + 1, processed_at = clock_timestamp()
WHERE id IN (SELECT jsonb_array_elements_text($2::jsonb)::bigint)`,
	BenchLeaseDoneMany: `UPDATE loanq_bench_item
SET status = 'done', processed = processed + 1, processed_at = clock_timestamp()
WHERE id IN (SELECT jsonb_array_elements_text($2::jsonb)::bigint)
  AND owner = $1 AND status = 'claimed' AND lease_expires_at > clock_timestamp()`,
	// MATERIALIZED for the same reason as BenchLeaseClaim: the pick runs once.
	BenchClaimDone: `WITH picked AS MATERIALIZED (
  SELECT id FROM loanq_bench_item WHERE status = 'ready' ORDER BY id LIMIT $2
  FOR UPDATE SKIP LOCKED)
UPDATE loanq_bench_item b
SET status = 'done', owner = $1, processed = b.processed + 1, processed_at = clock_timestamp()
FROM picked
WHERE b.id = picked.id`,

	// lock run: named leases. The UPDATE's row lock serialises racing takers;
	// the one that waited re-checks the WHERE on the committed row (READ
	// COMMITTED) and finds it taken.
	NamedLockEnsure: `INSERT INTO loanq_lock (name, token) VALUES ($1, 0) ON CONFLICT (name) DO NOTHING`,
	NamedLockTake: `UPDATE loanq_lock
SET holder = $1, token = token + 1, taken_at = clock_timestamp(),
    expires_at = clock_timestamp() + $2::bigint * INTERVAL '1 millisecond'
WHERE name = $3 AND (holder IS NULL OR expires_at <= clock_timestamp())`,
	NamedLockRead: `SELECT holder, token, taken_at, expires_at, clock_timestamp() FROM loanq_lock WHERE name = $1`,
	NamedLockRenew: `UPDATE loanq_lock SET expires_at = clock_timestamp() + $1::bigint * INTERVAL '1 millisecond'
WHERE name = $2 AND holder = $3 AND token = $4 AND expires_at > clock_timestamp()`,
	NamedLockRelease: `UPDATE loanq_lock SET holder = NULL, expires_at = NULL
WHERE name = $1 AND holder = $2 AND token = $3`,
	NamedLockList: `SELECT name, holder, token, taken_at, expires_at, clock_timestamp() FROM loanq_lock ORDER BY name`,

	// task stats: the window's start is computed by the database clock.
	StatsDispositions: `SELECT t.name, w.disposition, COUNT(*)
FROM loanq_work w JOIN loanq_task t ON t.id = w.task_id
WHERE w.disposition IS NOT NULL AND w.disposed_at > clock_timestamp() - $1::bigint * INTERVAL '1 millisecond'
GROUP BY t.name, w.disposition`,
	StatsRuns: `SELECT t.name, r.duration_ms, r.requests_served
FROM loanq_query_run r JOIN loanq_task t ON t.id = r.task_id
WHERE r.started_at > clock_timestamp() - $1::bigint * INTERVAL '1 millisecond'
ORDER BY r.started_at DESC, r.id DESC`,

	// The dashboard (loanq serve). Active rows and pending requests are found
	// through the partial indexes that hold only them; DashDone reads
	// the work history from a floor id up (see drivers.Statements).
	DashPending: `SELECT task_id, COUNT(*), ` + pgAge(`MIN(created_at)`) + `
FROM loanq_work_request WHERE status = 'pending' GROUP BY task_id`,
	DashActive: `SELECT task_id, user_name, COUNT(*), ` + pgAge(`MIN(assigned_at)`) + `,
       COUNT(CASE WHEN ` + pgAge(`assigned_at`) + ` >= $1 THEN 1 END)
FROM loanq_work WHERE disposition IS NULL GROUP BY task_id, user_name`,
	DashDoneFloor: `SELECT MIN(CASE WHEN disposition IS NULL THEN id END),
       MIN(CASE WHEN disposed_at >= date_trunc('day', clock_timestamp() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' THEN id END), MAX(id)
FROM loanq_work`,
	DashDoneBefore: `SELECT task_id, user_name, disposition, COUNT(*)
FROM loanq_work WHERE id < $1 AND disposition IS NOT NULL GROUP BY task_id, user_name, disposition`,
	DashDone: `SELECT task_id, user_name, disposition, COUNT(*),
       COUNT(CASE WHEN disposed_at >= date_trunc('day', clock_timestamp() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' THEN 1 END)
FROM loanq_work WHERE id >= $1 AND disposition IS NOT NULL GROUP BY task_id, user_name, disposition`,
	DashRuns: `SELECT id, ` + pgAge(`started_at`) + `, duration_ms, rows_found, requests_served, loans_assigned
FROM loanq_query_run WHERE task_id = $1 ORDER BY id DESC LIMIT $2`,
	DashDispositions: `SELECT loan_id, user_name, disposition, ` + pgAge(`disposed_at`) + `,
       EXTRACT(EPOCH FROM disposed_at - assigned_at)::BIGINT
FROM loanq_work WHERE task_id = $1 AND disposition IS NOT NULL ORDER BY id DESC LIMIT $2`,

	// cancelled requests and attach (docs/algorithm.md, "Cancelling and attaching")
	RequestPendingFor: `SELECT id FROM loanq_work_request WHERE task_id = $1 AND user_name = $2 AND status = 'pending'`,
	RequestCancel: `UPDATE loanq_work_request SET status = 'cancelled', served_at = clock_timestamp()
WHERE id = $1 AND user_name = $2 AND status = 'pending'`,

	// abandoned work (docs/algorithm.md, "Abandoned work: --max-hold")
	TaskSetMaxHold: `UPDATE loanq_task SET max_hold_ms = $1 WHERE id = $2`,
	WorkExpire: `UPDATE loanq_work SET disposition = 'expired', disposed_at = clock_timestamp()
WHERE task_id = $1 AND disposition IS NULL AND assigned_at <= clock_timestamp() - $2 * INTERVAL '1 millisecond'`,
	WorkOlder: `SELECT id, loan_id, user_name, assigned_at, EXTRACT(EPOCH FROM clock_timestamp() - assigned_at)::BIGINT
FROM loanq_work
WHERE task_id = $1 AND disposition IS NULL AND ($2 = '' OR user_name = $3)
  AND assigned_at <= clock_timestamp() - $4 * INTERVAL '1 millisecond'
ORDER BY assigned_at, id`,
	WorkReclaim: `UPDATE loanq_work SET disposition = 'reclaimed', disposed_at = clock_timestamp(), disposed_by = $1
WHERE id = $2 AND disposition IS NULL`,

	// task update
	TaskUpdate: `UPDATE loanq_task
SET source_table = $1,
    key_column = $2,
    criteria = $3,
    order_by = $4,
    max_active = $5,
    lock_strategy = $6,
    query_delay_ms = $7,
    lease_ttl_ms = $8,
    hold_limit_ms = $9,
    max_hold_ms = $10
WHERE id = $11`,
}

// pgAge is how many whole seconds ago a timestamp was, by the database clock.
func pgAge(ts string) string {
	return `EXTRACT(EPOCH FROM clock_timestamp() - ` + ts + `)::BIGINT`
}

// criteriaQuery is the heavy query of SPEC §3 step 4: the task's criteria,
// minus loans that are not eligible for the task (§4), in priority order.
// It takes no lock: the task lock already serialises the callers.
func criteriaQuery(src drivers.CriteriaSource) string {
	order := "src." + src.Key
	if strings.TrimSpace(src.Order) != "" {
		order = src.Order + ", src." + src.Key
	}
	return fmt.Sprintf(`SELECT src.%[1]s FROM %[2]s src
WHERE (%[3]s)
  AND NOT EXISTS (
    SELECT 1 FROM loanq_work w
    WHERE w.task_id = $1 AND w.loan_id = src.%[1]s
      AND (w.disposition IS NULL
           OR w.disposition = 'never'
           OR (w.disposition = 'return' AND w.return_at > clock_timestamp())))
ORDER BY %[4]s
LIMIT $2`, src.Key, src.Source, src.Where, order)
}

// rowsClaim is the criteria query of the rows strategy: each caller locks the
// loans it is about to assign. FOR NO KEY UPDATE OF src locks the source rows
// only (the NOT EXISTS over loanq_work reads without locking), and still lets
// the application insert rows that reference a loan by foreign key. SKIP
// LOCKED passes over loans other callers hold, and LIMIT counts only the rows
// locked. To read no more than it returns, the source needs an index matching
// the criteria and the order (e.g. (eligible, priority DESC, id)); without one
// PostgreSQL sorts every matching row first, but still locks only n.
func rowsClaim(src drivers.CriteriaSource) string {
	return criteriaQuery(src) + `
FOR NO KEY UPDATE OF src SKIP LOCKED`
}
