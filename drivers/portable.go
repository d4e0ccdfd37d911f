package drivers

import (
	"fmt"
	"github.com/loanq/loanq/drivers/engineio"
	"strings"
)

// taskColumns are the columns every task read selects, in the order the
// engine scans them. allow_n and four_eyes_n say whether the task has
// entitlements or four-eyes rules (docs/governance.md): a get of a task
// without them pays no further statement.
const taskColumns = `id, name, source_table, key_column, criteria, order_by, max_active,
       lock_strategy, query_delay_ms, lease_ttl_ms, created_by, created_at, hold_limit_ms, max_hold_ms,
       prefetch, prefetch_ttl_ms, prefetch_low, key_kind,
       priority, show_columns, link_template,
       (SELECT COUNT(*) FROM loanq_task_allow a WHERE a.task_id = loanq_task.id) AS allow_n,
       (SELECT COUNT(*) FROM loanq_task_not_worked_in f WHERE f.task_id = loanq_task.id) AS four_eyes_n`

// requestStatus is a request's status as every read of one request says
// it: a pending request without a sign of life within RequestAlive is
// expired, before anyone has ended it so (RequestsExpire).
const requestStatus = `CASE WHEN r.status = 'pending' AND {{requestStale "r.alive_at"}} THEN 'expired' ELSE r.status END AS status`

// Portable returns the statements as every database says them, in the
// dialect vocabulary of Dialect. Statements no portable form fits are left
// empty here and written by each driver; a driver's sql.go overrides the
// others only where its database differs (see Build).
func Portable() *Statements {
	return &Statements{
		Now: Query[engineio.NoParams, engineio.NowRow]{SQL: `SELECT {{now}} AS db_now`},

		TaskInsert: Stmt[engineio.TaskInsertParams]{SQL: `INSERT INTO loanq_task (name, source_table, key_column, criteria, order_by, max_active,
       lock_strategy, query_delay_ms, lease_ttl_ms, created_by, created_at, hold_limit_ms, key_kind)
VALUES (:name, :source, :key, :criteria, :order, :max_active, :lock_strategy, :query_delay_ms, :lease_ttl_ms,
        :created_by, {{now}}, :hold_limit_ms, :key_kind){{returningID}}`},
		TaskByName: Query[engineio.NameParams, engineio.TaskRow]{SQL: `SELECT ` + taskColumns + ` FROM loanq_task WHERE name = :name`},
		TaskByID:   Query[engineio.IDParams, engineio.TaskRow]{SQL: `SELECT ` + taskColumns + ` FROM loanq_task WHERE id = :id`},
		TaskList:   Query[engineio.NoParams, engineio.TaskRow]{SQL: `SELECT ` + taskColumns + ` FROM loanq_task ORDER BY name`},
		TaskRuns: Query[engineio.TaskParams, engineio.RunRow]{SQL: `SELECT id, strategy, holder, started_at, duration_ms, rows_found, requests_served, loans_assigned
FROM loanq_query_run WHERE task_id = :task_id ORDER BY id DESC {{limit "10"}}`},

		// A request is logged alive: its first sign of life is its logging.
		RequestInsert: Stmt[engineio.RequestInsertParams]{SQL: `INSERT INTO loanq_work_request (task_id, user_name, requested, assigned, status, created_at, alive_at)
VALUES (:task_id, :user, :requested, 0, 'pending', {{now}}, {{now}}){{returningID}}`},
		// A pending request past its last sign of life reads as expired
		// (requestStatus) before anyone has ended it so.
		RequestByID: Query[engineio.IDParams, engineio.RequestRow]{SQL: `SELECT r.id, r.task_id, t.name, r.user_name, r.requested, r.assigned, ` + requestStatus + `, r.created_at, r.served_at
FROM loanq_work_request r JOIN loanq_task t ON t.id = r.task_id
WHERE r.id = :id`},
		// Only requests someone waits for (docs/algorithm.md, "Abandoned
		// requests"): the database decides, in the statement that reads them.
		RequestsPending: Query[engineio.TaskParams, engineio.PendingRow]{SQL: `SELECT id, user_name, requested, created_at FROM loanq_work_request
WHERE task_id = :task_id AND status = 'pending' AND {{requestAlive "alive_at"}} ORDER BY created_at, id`},
		// Pending and alive: a request that a round read as pending and that
		// expired since is not served (0 rows, as for a cancelled one).
		RequestFinish: Stmt[engineio.RequestFinishParams]{SQL: `UPDATE loanq_work_request SET assigned = :assigned, status = :status, served_at = {{now}}
WHERE id = :id AND status = 'pending' AND {{requestAlive "alive_at"}}`},
		RequestWithLoans: Query[engineio.IDParams, engineio.RequestLoanRow]{SQL: `SELECT r.id, r.task_id, t.name, r.user_name, r.requested, r.assigned, ` + requestStatus + `, r.created_at, w.loan_id, t.key_kind
FROM loanq_work_request r JOIN loanq_task t ON t.id = r.task_id
LEFT JOIN loanq_work w ON w.request_id = r.id
WHERE r.id = :id
ORDER BY w.id`},

		// The task row is found by its primary key, so the lock covers that
		// one row (InnoDB: that one index record, no gap lock).
		LockSkip:   Query[engineio.TaskParams, engineio.IDRow]{SQL: `SELECT id FROM loanq_task WHERE id = :task_id FOR UPDATE SKIP LOCKED`},
		LockNoWait: Query[engineio.TaskParams, engineio.IDRow]{SQL: `SELECT id FROM loanq_task WHERE id = :task_id FOR UPDATE NOWAIT`},
		LockWait:   Query[engineio.TaskParams, engineio.IDRow]{SQL: `SELECT id FROM loanq_task WHERE id = :task_id FOR UPDATE`},
		LeaseAcquire: Stmt[engineio.LeaseTakeParams]{SQL: `UPDATE loanq_task
SET lease_owner = :owner, lease_token = lease_token + 1,
    lease_expires_at = {{nowPlusMs ":ttl_ms"}}
WHERE id = :task_id AND (lease_owner IS NULL OR lease_expires_at <= {{now}})`},
		LeaseToken: Query[engineio.LeaseOwnerParams, engineio.TokenRow]{SQL: `SELECT lease_token FROM loanq_task WHERE id = :task_id AND lease_owner = :owner`},
		LeaseFenceRelease: Stmt[engineio.LeaseFenceParams]{SQL: `UPDATE loanq_task SET lease_owner = NULL, lease_expires_at = NULL
WHERE id = :task_id AND lease_owner = :owner AND lease_token = :token AND lease_expires_at > {{now}}`},
		LeaseRelease: Stmt[engineio.LeaseFenceParams]{SQL: `UPDATE loanq_task SET lease_owner = NULL, lease_expires_at = NULL
WHERE id = :task_id AND lease_owner = :owner AND lease_token = :token`},

		ActiveCountForUser: Query[engineio.TaskUserParams, engineio.Count]{SQL: `SELECT COUNT(*) AS n FROM loanq_work WHERE task_id = :task_id AND user_name = :user AND disposition IS NULL`},
		ActiveCountsPending: Query[engineio.TaskParams, engineio.UserCountRow]{SQL: `SELECT w.user_name, COUNT(*) AS n FROM loanq_work w
WHERE w.task_id = :task_id AND w.disposition IS NULL
  AND w.user_name IN (SELECT r.user_name FROM loanq_work_request r WHERE r.task_id = :task_id AND r.status = 'pending')
GROUP BY w.user_name`},
		// The list's order is the work rows' id order, the order a request's
		// loans are read back in. Every value comes from the list: no table
		// is read (in InnoDB an INSERT … SELECT would take shared next-key
		// locks on what it reads, and block requests being logged).
		WorkInsertMany: Stmt[engineio.WorkInsertManyParams]{SQL: `INSERT INTO loanq_work (task_id, loan_id, user_name, request_id, assigned_at)
SELECT {{integer ":task_id"}}, a.loan_id, a.user_name, a.request_id, {{now}}
FROM ({{assignmentsFromJSON ":assignments"}}) a
ORDER BY a.n`},
		QueryRunInsert: Stmt[engineio.QueryRunParams]{SQL: `INSERT INTO loanq_query_run (task_id, strategy, holder, started_at, duration_ms,
       rows_found, requests_served, loans_assigned, pooled)
VALUES (:task_id, :strategy, :holder, {{nowMinusMs ":started_ago_ms"}}, :duration_ms, :rows_found, :requests_served, :loans_assigned, :pooled)`},

		ActiveWork: Query[engineio.TaskLoanParams, engineio.ActiveWorkRow]{SQL: `SELECT id, user_name FROM loanq_work WHERE task_id = :task_id AND loan_id = :loan_id AND disposition IS NULL`},
		LastWork: Query[engineio.TaskLoanParams, engineio.LastWorkRow]{SQL: `SELECT disposition, user_name FROM loanq_work WHERE task_id = :task_id AND loan_id = :loan_id
ORDER BY assigned_at DESC, id DESC {{limit "1"}}`},
		DisposeLoan: Stmt[engineio.DisposeLoanParams]{SQL: `UPDATE loanq_work
SET disposition = :disposition, disposed_at = {{now}},
    return_at = {{nowPlusMs ":return_after_ms"}}, reason = :reason, note = :note
WHERE task_id = :task_id AND loan_id = :loan_id AND user_name = :user AND disposition IS NULL`},
		DisposeLoans: Stmt[engineio.DisposeLoansParams]{SQL: `UPDATE loanq_work
SET disposition = :disposition, disposed_at = {{now}},
    return_at = {{nowPlusMs ":return_after_ms"}}, reason = :reason, note = :note
WHERE task_id = :task_id AND user_name = :user AND disposition IS NULL AND {{inLoanIDs "loan_id" ":ids"}}`},
		ActiveAssigneesAmong: Query[engineio.PoolIDsParams, engineio.AssigneeRow]{SQL: `SELECT loan_id, user_name FROM loanq_work
WHERE task_id = :task_id AND disposition IS NULL AND {{inLoanIDs "loan_id" ":ids"}}`},

		Pipeline: Query[engineio.PipelineParams, engineio.PipelineRow]{SQL: `SELECT t.name, w.loan_id, w.assigned_at, t.key_kind, {{now}} AS db_now
FROM loanq_work w JOIN loanq_task t ON t.id = w.task_id
WHERE w.user_name = :user AND w.disposition IS NULL AND (:task = '' OR t.name = :task)
ORDER BY w.assigned_at, w.id`},

		RequestWake: Query[engineio.IDParams, engineio.WakeRow]{SQL: `SELECT r.status, t.lease_owner,
       CASE WHEN t.lease_owner IS NULL OR t.lease_expires_at <= {{now}} THEN 1 ELSE 0 END AS lease_free
FROM loanq_work_request r JOIN loanq_task t ON t.id = r.task_id
WHERE r.id = :id`},
		// A queued FOR UPDATE; how its wait is bounded is the dialect's
		// (a session setting around it, or WAIT n in the statement).
		LockWaitBounded: Query[engineio.TaskParams, engineio.IDRow]{SQL: `SELECT id FROM loanq_task WHERE id = :task_id FOR UPDATE`},
		RecentRuns: Query[engineio.TaskParams, engineio.RecentRunsRow]{SQL: `SELECT COUNT(*) AS runs, {{integer "COALESCE(AVG(duration_ms), 0)"}} AS mean_ms FROM (
  SELECT duration_ms FROM loanq_query_run WHERE task_id = :task_id ORDER BY id DESC {{limit "10"}}) r`},
		// Three one-row reads, each an index range, in one round trip. The
		// arrivals are the latest :sample requests of the window at most,
		// with the age of the oldest of them: a bounded read however busy
		// the task (summing the whole window cost a round 1.7 ms at 930
		// requests/s, with the lock held, and grew with the rate).
		TaskLoad: Query[engineio.TaskWindowParams, engineio.TaskLoadRow]{SQL: `SELECT p.requests, p.need, w.loans, w.arrivals, w.span_ms, r.runs, r.mean_ms, r.max_ms
FROM (SELECT COUNT(*) AS requests, COALESCE(SUM(requested), 0) AS need FROM loanq_work_request
      WHERE task_id = :task_id AND status = 'pending' AND {{requestAlive "alive_at"}}) p
CROSS JOIN (SELECT COALESCE(SUM(requested), 0) AS loans, COUNT(*) AS arrivals, COALESCE(MAX({{ageMs "created_at"}}), 0) AS span_ms FROM (
      SELECT requested, created_at FROM loanq_work_request
      WHERE task_id = :task_id AND created_at > {{nowMinusMs ":window_ms"}} ORDER BY created_at DESC {{limit ":sample"}}) latest) w
CROSS JOIN (SELECT COUNT(*) AS runs, {{integer "COALESCE(AVG(duration_ms), 0)"}} AS mean_ms, MAX(duration_ms) AS max_ms FROM (
      SELECT duration_ms FROM loanq_query_run WHERE task_id = :task_id ORDER BY id DESC {{limit "10"}}) recent) r`},
		LeaseRenew: Stmt[engineio.LeaseRenewParams]{SQL: `UPDATE loanq_task SET lease_expires_at = {{nowPlusMs ":ttl_ms"}}
WHERE id = :task_id AND lease_owner = :owner AND lease_token = :token AND lease_expires_at > {{now}}`},
		LeaseHolder: Query[engineio.TaskParams, engineio.OwnerRow]{SQL: `SELECT lease_owner FROM loanq_task WHERE id = :task_id AND lease_owner IS NOT NULL AND lease_expires_at > {{now}}`},
		LeaseTakeOver: Stmt[engineio.LeaseTakeOverParams]{SQL: `UPDATE loanq_task
SET lease_owner = :owner, lease_token = lease_token + 1,
    lease_expires_at = {{nowPlusMs ":ttl_ms"}}
WHERE id = :task_id AND lease_owner = :dead_owner`},
		// A plain insert whose duplicate-key error the engine ignores (INSERT
		// IGNORE or MERGE would hide other errors, or still race).
		UserLockEnsure: Stmt[engineio.TaskUserParams]{SQL: `INSERT INTO loanq_task_user (task_id, user_name) VALUES (:task_id, :user)`},
		UserLock:       Query[engineio.TaskUserParams, engineio.TaskIDRow]{SQL: `SELECT task_id FROM loanq_task_user WHERE task_id = :task_id AND user_name = :user FOR UPDATE`},
		// A loan active for the task already is not inserted: skipped by the
		// index where the dialect can (SkipActiveConflict), else a
		// duplicate-key error that rolls back this statement only (the
		// transaction and its locks stay). Either way the engine skips it.
		WorkInsertRows: Stmt[engineio.WorkInsertParams]{SQL: `INSERT INTO loanq_work (task_id, loan_id, user_name, request_id, assigned_at)
VALUES (:task_id, :loan_id, :user, :request_id, {{now}}){{skipActiveConflict}}`},

		HoldMeasured: Query[engineio.TaskParams, engineio.MaxMSRow]{SQL: `SELECT MAX(duration_ms) AS max_ms FROM (
  SELECT duration_ms FROM loanq_query_run WHERE task_id = :task_id ORDER BY id DESC {{limit "10"}}) recent`},

		RequestPendingFor: Query[engineio.TaskUserParams, engineio.IDRow]{SQL: `SELECT id FROM loanq_work_request WHERE task_id = :task_id AND user_name = :user AND status = 'pending'
  AND {{requestAlive "alive_at"}}`},
		RequestCancel: Stmt[engineio.IDUserParams]{SQL: `UPDATE loanq_work_request SET status = 'cancelled', served_at = {{now}}
WHERE id = :id AND user_name = :user AND status = 'pending'`},
		RequestAlive: Stmt[engineio.IDUserParams]{SQL: `UPDATE loanq_work_request SET alive_at = {{now}}
WHERE id = :id AND user_name = :user AND status = 'pending' AND {{requestAlive "alive_at"}}`},
		RequestsExpire: Stmt[engineio.TaskParams]{SQL: `UPDATE loanq_work_request SET status = 'expired', served_at = {{now}}
WHERE task_id = :task_id AND status = 'pending' AND {{requestStale "alive_at"}}`},

		TaskSetMaxHold: Stmt[engineio.TaskMaxHoldParams]{SQL: `UPDATE loanq_task SET max_hold_ms = :max_hold_ms WHERE id = :id`},
		TaskVerdictSet: Stmt[TaskVerdictParams]{SQL: `UPDATE loanq_task SET lock_verdict = :verdict WHERE id = :id`},
		TaskVerdictGet: Query[engineio.IDParams, engineio.VerdictRow]{SQL: `SELECT lock_verdict FROM loanq_task WHERE id = :id`},
		WorkExpire: Stmt[engineio.WorkExpireParams]{SQL: `UPDATE loanq_work SET disposition = 'expired', disposed_at = {{now}}
WHERE task_id = :task_id AND disposition IS NULL AND assigned_at <= {{nowMinusMs ":max_hold_ms"}}`},
		WorkOlder: Query[engineio.WorkOlderParams, engineio.WorkOlderRow]{SQL: `SELECT id, loan_id, user_name, assigned_at, {{age "assigned_at"}} AS age_s
FROM loanq_work
WHERE task_id = :task_id AND disposition IS NULL AND (:user = '' OR user_name = :user)
  AND assigned_at <= {{nowMinusMs ":age_ms"}}
ORDER BY assigned_at, id`},
		WorkReclaim: Stmt[engineio.WorkReclaimParams]{SQL: `UPDATE loanq_work SET disposition = 'reclaimed', disposed_at = {{now}}, disposed_by = :supervisor
WHERE id = :id AND disposition IS NULL`},

		TaskSetPrefetch: Stmt[engineio.TaskPrefetchParams]{SQL: `UPDATE loanq_task SET prefetch = :prefetch, prefetch_ttl_ms = :ttl_ms, prefetch_low = :low WHERE id = :id`},
		// The order index (task_id, pos) gives the pool in order; the row
		// limit stops the locking read after :limit rows it could lock.
		PoolClaim: Query[engineio.PoolClaimParams, engineio.KeyRow]{SQL: `SELECT loan_id FROM loanq_pool
WHERE task_id = :task_id AND filled_at > {{nowMinusMs ":ttl_ms"}}
ORDER BY pos {{limit ":limit"}}
FOR UPDATE SKIP LOCKED`},
		PoolDrop:  Stmt[engineio.PoolIDsParams]{SQL: `DELETE FROM loanq_pool WHERE task_id = :task_id AND {{inLoanIDs "loan_id" ":ids"}}`},
		PoolClear: Stmt[engineio.TaskParams]{SQL: `DELETE FROM loanq_pool WHERE task_id = :task_id`},
		PoolFill: Stmt[engineio.PoolFillParams]{SQL: `INSERT INTO loanq_pool (task_id, loan_id, pos, filled_at)
SELECT {{integer ":task_id"}}, a.loan_id, a.n + :offset, {{now}}
FROM ({{assignmentsFromJSON ":candidates"}}) a`},
		PoolStats: Query[engineio.TaskTTLParams, engineio.PoolStatsRow]{SQL: `SELECT
  (SELECT COUNT(*) FROM loanq_pool WHERE task_id = :task_id AND filled_at > {{nowMinusMs ":ttl_ms"}}) AS fresh,
  (SELECT {{age "MIN(filled_at)"}} FROM loanq_pool WHERE task_id = :task_id AND filled_at > {{nowMinusMs ":ttl_ms"}}) AS age_s,
  (SELECT COUNT(*) FROM loanq_work_request WHERE task_id = :task_id AND pooled = 1) AS hits,
  (SELECT COUNT(*) FROM loanq_query_run WHERE task_id = :task_id AND pooled > 0) AS refills`},
		PoolKeys:    Query[engineio.TaskParams, engineio.KeyRow]{SQL: `SELECT loan_id FROM loanq_pool WHERE task_id = :task_id`},
		ActiveAmong: Query[engineio.PoolIDsParams, engineio.KeyRow]{SQL: `SELECT loan_id FROM loanq_work WHERE task_id = :task_id AND disposition IS NULL AND {{inLoanIDs "loan_id" ":ids"}}`},
		RequestFinishPooled: Stmt[engineio.RequestFinishParams]{SQL: `UPDATE loanq_work_request SET assigned = :assigned, status = :status, served_at = {{now}}, pooled = 1
WHERE id = :id AND status = 'pending'`},

		TaskUpdate: Stmt[engineio.TaskUpdateParams]{SQL: `UPDATE loanq_task
SET source_table = :source,
    key_column = :key,
    criteria = :criteria,
    order_by = :order,
    max_active = :max_active,
    lock_strategy = :lock_strategy,
    query_delay_ms = :query_delay_ms,
    lease_ttl_ms = :lease_ttl_ms,
    hold_limit_ms = :hold_limit_ms,
    max_hold_ms = :max_hold_ms,
    updated_by = :updated_by,
    updated_at = {{now}},
    key_kind = :key_kind
WHERE id = :id`},
	}
}

// CriteriaSelect is a task's criteria query up to its ORDER BY, the same on
// every database: the task's criteria, minus the loans not eligible for the
// task (active in some pipeline, dispositioned never, or returned until
// their return time; docs/algorithm.md), in priority order with the key
// breaking ties. Its one bind, the task id, is d's first placeholder.
// Drivers end it with a row limit, or a lock clause for the rows strategy.
func CriteriaSelect(d Dialect, src CriteriaSource) string {
	return criteriaSelect(d, src, selectedKey(d, src), 1, "")
}

// selectedKey is the source key as a select-list item: its text, named
// loanq_key. Unnamed, PostgreSQL names (src.id)::text "id", and an ORDER BY
// that names the key column unqualified ("prio, id") would then sort the
// text (10 before 9) instead of the column.
func selectedKey(d Dialect, src CriteriaSource) string {
	return d.KeyAsText("src."+src.Key) + " AS loanq_key"
}

// criteriaSelect is CriteriaSelect selecting list, with the task id as the
// taskBind-th placeholder and an extra condition after it (MySQL's ? and
// Oracle's positional binds are bound in order of appearance: list's binds
// come first, then the task id, then and's).
func criteriaSelect(d Dialect, src CriteriaSource, list string, taskBind int, and string) string {
	order := "src." + src.Key
	if strings.TrimSpace(src.Order) != "" {
		order = src.Order + ", src." + src.Key
	}
	return criteriaFilter(d, src, list, taskBind, and) + "\nORDER BY " + order
}

// criteriaFilter is criteriaSelect without its ORDER BY: the rows, unsorted.
func criteriaFilter(d Dialect, src CriteriaSource, list string, taskBind int, and string) string {
	return fmt.Sprintf(`SELECT %[8]s FROM %[2]s src
WHERE (%[3]s)
  AND NOT EXISTS (
    SELECT 1 FROM loanq_work w
    WHERE w.task_id = %[5]s AND w.loan_id = %[1]s
      AND (w.disposition IS NULL
           OR w.disposition = 'never'
           OR (w.disposition = 'return' AND w.return_at > %[6]s)))%[7]s`, d.KeyAsText("src."+src.Key), src.Source, src.Where, "" /* %[4]s: unused, the order was here */, d.Placeholder(taskBind), d.Now(), and, list)
}

// CriteriaRecheck is the criteria query over the given keys only, locking
// nothing: binds task id, the keys as a JSON array text. The rows strategy
// runs it when CriteriaClaim failed on a duplicate key, to assign the keys
// one by one. Like CriteriaClaim's, its snapshot is newer than the claim's.
func CriteriaRecheck(d Dialect, src CriteriaSource) *Stmt[engineio.RecheckParams] {
	in := "\n  AND " + d.InKeys("src."+src.Key, d.Placeholder(2), src.Kind)
	s, err := compile[engineio.RecheckParams](d, "CriteriaRecheck", criteriaSelect(d, src, selectedKey(d, src), 1, in), "task_id", "ids")
	if err != nil {
		panic("drivers: " + err.Error()) // RecheckParams has both fields
	}
	return s
}

// CriteriaClaim assigns, in one statement, those of the keys a rows claim
// locked that are eligible still: binds task id, user, request id, the keys
// as a JSON array text. The claim's locking read may date from before
// another caller committed the assignment (and maybe the disposition) of a
// row the claim then locked, once that caller let go of it; this statement
// is the criteria query again over the locked keys, with a snapshot of its
// own that sees that commit, so what it inserts is eligible now, and stays
// so while this caller holds the row locks. In priority order, so the work
// ids follow it. Where the dialect has no SkipActiveConflict, a key another
// strategy's holder assigned meanwhile fails the statement with a duplicate
// key, undoing this statement only.
func CriteriaClaim(d Dialect, src CriteriaSource) *Stmt[engineio.ClaimParams] {
	list := fmt.Sprintf("%s, %s, %s, %s, %s", d.Placeholder(1), selectedKey(d, src), d.Placeholder(2), d.Placeholder(3), d.Now())
	in := "\n  AND " + d.InKeys("src."+src.Key, d.Placeholder(5), src.Kind)
	text := "INSERT INTO loanq_work (task_id, loan_id, user_name, request_id, assigned_at)\n" +
		criteriaSelect(d, src, list, 4, in) + d.SkipActiveConflict()
	s, err := compile[engineio.ClaimParams](d, "CriteriaClaim", text, "task_id", "user", "request_id", "task_id", "ids")
	if err != nil {
		panic("drivers: " + err.Error()) // ClaimParams has every field
	}
	return s
}

// BacklogCount counts the loans waiting for a task: the rows of its criteria
// query, with the same eligibility rules (not active in the task, never
// dispositioned never, no return pending), unsorted and unlimited. Binds
// the task id. It reads every eligible row (or index entry) once, where the
// criteria query stops at its limit: the cost is stated in docs/scaling.md,
// and callers run it on a schedule or on an operator's request, never on a
// processor's get.
func BacklogCount(d Dialect, src CriteriaSource) *Stmt[engineio.TaskParams] {
	s, err := compile[engineio.TaskParams](d, "BacklogCount", criteriaFilter(d, src, "COUNT(*)", 1, ""), "task_id")
	if err != nil {
		panic("drivers: " + err.Error()) // TaskParams has task_id
	}
	return s
}

// CriteriaQuery is the criteria query that locks nothing (the task lock
// serialises its callers), limited by d: binds task id, limit.
func CriteriaQuery(d Dialect, src CriteriaSource) *Stmt[engineio.CriteriaParams] {
	s, err := compile[engineio.CriteriaParams](d, "CriteriaQuery", CriteriaSelect(d, src)+"\n"+d.Limit(d.Placeholder(2)), "task_id", "limit")
	if err != nil {
		panic("drivers: " + err.Error()) // CriteriaParams has both fields
	}
	return s
}
