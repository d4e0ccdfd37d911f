package postgres

import (
	"context"
	"github.com/loanq/loanq/loankey"
	"strconv"

	"github.com/loanq/loanq/drivers"
)

// dialect is how PostgreSQL writes what databases say differently.
// clock_timestamp() is the database clock at the moment of the statement
// (now() would be the transaction's start).
type dialect struct{}

func (dialect) Placeholder(n int) string { return "$" + strconv.Itoa(n) }
func (dialect) Now() string              { return `clock_timestamp()` }
func (dialect) NowPlusMillis(ms string) string {
	return `clock_timestamp() + ` + ms + `::bigint * INTERVAL '1 millisecond'`
}

// NowMinusMillis is a scalar subquery, which PostgreSQL runs once per
// statement (an InitPlan) and then compares as a constant: the windows and
// ages it bounds ("created in the last 10 s", "assigned before the max
// hold") are index ranges. Bare, clock_timestamp() is volatile, so
// `created_at > clock_timestamp() - …` could only filter: every serving
// round read every request the task ever had (3.5 ms after 36,000
// requests, growing without bound).
func (dialect) NowMinusMillis(ms string) string {
	return `(SELECT clock_timestamp() - ` + ms + `::bigint * INTERVAL '1 millisecond')`
}
func (dialect) SecondsSince(ts string) string {
	return `EXTRACT(EPOCH FROM clock_timestamp() - ` + ts + `)::BIGINT`
}
func (dialect) MillisSince(ts string) string {
	return `(EXTRACT(EPOCH FROM clock_timestamp() - ` + ts + `) * 1000)::BIGINT`
}
func (dialect) SecondsBetween(from, to string) string {
	return `EXTRACT(EPOCH FROM ` + to + ` - ` + from + `)::BIGINT`
}
func (dialect) StartOfToday() string {
	return `date_trunc('day', clock_timestamp() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'`
}
func (dialect) Limit(n string) string      { return `LIMIT ` + n }
func (dialect) Integer(expr string) string { return `(` + expr + `)::bigint` }

// InIDs: = ANY of an array is an index condition on expr. The form
// expr IN (SELECT jsonb_array_elements_text(…)) is a semi-join whose plan
// follows the statistics: on a table filled since its last ANALYZE (a new
// task's source, the bench's item table) the planner took the other
// condition's index, filtered every matching row and hashed the few ids —
// 0.6 s per rows claim over 100,000 loans instead of 0.1 ms.
func (dialect) InIDs(expr, ids string) string {
	return expr + ` = ANY (ARRAY(SELECT jsonb_array_elements_text(` + ids + `::jsonb)::bigint))`
}

// KeyAsText: ::text of an integer is its decimal digits, of a uuid its
// canonical lower-case form. loanq's loan_id is varchar, compared as text,
// so `w.loan_id = (src.id)::text` is an index condition on loanq_work.
func (dialect) KeyAsText(expr string) string { return `(` + expr + `)::text` }

// InKeys: as InIDs, the array's elements cast to the key column's type,
// so that = ANY is an index condition on it (text: the elements as they
// are; a varchar column compares as text, with its index).
func (dialect) InKeys(expr, keys string, kind loankey.Kind) string {
	switch kind {
	case loankey.Text:
		return expr + ` = ANY (ARRAY(SELECT jsonb_array_elements_text(` + keys + `::jsonb)))`
	case loankey.UUID:
		return expr + ` = ANY (ARRAY(SELECT jsonb_array_elements_text(` + keys + `::jsonb)::uuid))`
	}
	return expr + ` = ANY (ARRAY(SELECT jsonb_array_elements_text(` + keys + `::jsonb)::bigint))`
}

// InLoanIDs: loanq's loan_id columns are varchar, compared as text.
func (dialect) InLoanIDs(expr, ids string) string {
	return expr + ` = ANY (ARRAY(SELECT jsonb_array_elements_text(` + ids + `::jsonb)))`
}

// AssignmentsFromJSON: the array's elements with their position.
func (dialect) AssignmentsFromJSON(list string) string {
	return `SELECT e.n, e.v->>0 AS loan_id, (e.v->>1)::bigint AS request_id, e.v->>2 AS user_name
  FROM jsonb_array_elements(` + list + `::jsonb) WITH ORDINALITY AS e (v, n)`
}
func (dialect) ReturningID() string { return "\nRETURNING id" }

// SkipActiveConflict: the arbiter is the partial unique index of the
// invariant, named by its columns and predicate; a loan active for the task
// already is not inserted, and the transaction goes on (a duplicate-key
// error would abort it).
func (dialect) SkipActiveConflict() string {
	return "\nON CONFLICT (task_id, loan_id) WHERE disposition IS NULL DO NOTHING"
}
func (dialect) InsertID(ctx context.Context, q drivers.Querier, query string, args []any) (int64, error) {
	return drivers.ReturnedID(ctx, q, query, args)
}

// The statements PostgreSQL says its own way; every other one is the
// portable form of drivers.Portable.
var statements = drivers.BuildOnce(dialect{}, capabilities, func(s *drivers.Statements) {
	// Who may act as whom: loanq_may_act_as is migration 00008's rule, the
	// one the row-level security policies apply to every write.
	s.Identity.SQL = `SELECT current_user::text AS account_name, CASE WHEN loanq_may_act_as(:user) THEN 1 ELSE 0 END AS may_act,
       (SELECT user_name FROM loanq_account WHERE account = current_user) AS mapped`

	// FOR NO KEY UPDATE, not FOR UPDATE: a new work request references its
	// task by foreign key, and the FK check takes FOR KEY SHARE on the task
	// row. FOR UPDATE would conflict with it and make every request insert
	// wait for the whole criteria query; FOR NO KEY UPDATE still excludes
	// other lock holders but lets requests be logged meanwhile.
	s.LockSkip.SQL = `SELECT id FROM loanq_task WHERE id = :task_id FOR NO KEY UPDATE SKIP LOCKED`
	s.LockNoWait.SQL = `SELECT id FROM loanq_task WHERE id = :task_id FOR NO KEY UPDATE NOWAIT`
	s.LockWait.SQL = `SELECT id FROM loanq_task WHERE id = :task_id FOR NO KEY UPDATE`

	// Wake-ups (docs/algorithm.md, "Waiting"): a waiter queues on the task
	// row with the wait lock, bounded by lock_timeout for this transaction
	// only (set_config(…, true) is SET LOCAL), and puts the setting back once
	// the lock is granted, for the serving statements. Transaction-local, it
	// ends with the transaction: nothing to save before or restore after
	// (wait bound transaction-local: no WaitLockSave), and the restore is to the session's own value
	// (:value is NULL: SET LOCAL lock_timeout TO DEFAULT, which is also the
	// value a DSN's options=-c lock_timeout=… gave the connection).
	s.WaitLockRestore.SQL = `SELECT set_config('lock_timeout', :value, true)`
	s.WaitLockSet.SQL = `SELECT set_config('lock_timeout', :ms::bigint || 'ms', true)`
	s.LockWaitBounded.SQL = `SELECT id FROM loanq_task WHERE id = :task_id FOR NO KEY UPDATE`
	// A serving round's requests, finished in one statement. The task id
	// steers the planner to the task's pending entries: with r.status =
	// 'pending' alone it took a bitmap scan of the partial pending index,
	// which visits every entry of a request served since the last VACUUM
	// (a bitmap scan never marks them dead): 1.7 ms per round after 40,000
	// requests instead of 0.06.
	s.RequestFinishMany.SQL = `UPDATE loanq_work_request r
SET assigned = f.assigned, status = f.status, served_at = clock_timestamp()
FROM (SELECT (e->>0)::bigint AS id, (e->>1)::int AS assigned, e->>2 AS status
      FROM jsonb_array_elements(:outcomes::jsonb) e) f
WHERE r.id = f.id AND r.task_id = :task_id AND r.status = 'pending' AND {{requestAlive "r.alive_at"}}`
	// FOR SHARE conflicts with the holder's FOR NO KEY UPDATE (so it waits
	// for its commit) and not with other FOR SHARE waiters.
	s.LockShareBounded.SQL = `SELECT id FROM loanq_task WHERE id = :task_id FOR SHARE`

	s.UserLockEnsure.SQL = `INSERT INTO loanq_task_user (task_id, user_name) VALUES (:task_id, :user) ON CONFLICT DO NOTHING`
	s.UserLock.SQL = `SELECT task_id FROM loanq_task_user WHERE task_id = :task_id AND user_name = :user FOR NO KEY UPDATE`
	// The hold limit (docs/reliability.md). SET LOCAL through set_config(…,
	// true): the settings end with the lock transaction, so the pooled
	// connection keeps none of them. idle_in_transaction_session_timeout ends
	// a session that sits idle in the transaction (its client stopped, cut
	// off or gone); statement_timeout cancels one statement running longer,
	// after which the aborted transaction idles and is ended the same way.
	s.HoldLimitSet.SQL = `SELECT set_config('idle_in_transaction_session_timeout', (:idle_ms::bigint)::text, true),
       set_config('statement_timeout', (:statement_ms::bigint)::text, true)`
})

// catalogueSQL is what PostgreSQL says its own way in the statement catalogues
// of the features outside the engine (drivers.Catalogue): nothing, every
// one of their statements is the portable one.
var catalogueSQL drivers.Overrides

// rowsClaim is the criteria query of the rows strategy: each caller locks the
// loans it is about to assign. FOR NO KEY UPDATE OF src locks the source rows
// only (the NOT EXISTS over loanq_work reads without locking), and still lets
// the application insert rows that reference a loan by foreign key. SKIP
// LOCKED passes over loans other callers hold, and LIMIT counts only the rows
// locked. To read no more than it returns, the source needs an index matching
// the criteria and the order (e.g. (eligible, priority DESC, id)); without one
// PostgreSQL sorts every matching row first, but still locks only n.
func rowsClaim(src drivers.CriteriaSource) string {
	return drivers.CriteriaSelect(dialect{}, src) + `
LIMIT $2
FOR NO KEY UPDATE OF src SKIP LOCKED`
}

// finishingClaim ends a rows claim of a new request in one statement (rows
// finish one-statement): three round trips fewer than CriteriaClaim,
// RequestFinish and QueryRunInsert one after the other and the answer read
// back after the commit. The claim has locked its rows and logged the
// request (RequestInsert, a statement of its own: the work rows' insert
// policy of migration 00008 looks the request up, and the sub-statements
// of one WITH all read the same snapshot, so they would not see a request
// inserted beside them).
//
//   - claimed is CriteriaClaim as it is: the criteria again over the locked
//     keys, with this statement's snapshot, newer than the locking read's;
//   - finished sets the outcome the claim expects ($6 loans, status $7)
//     only if claimed inserted exactly $6 rows: a key lost to another
//     caller leaves the request pending, and the statement returns no row;
//   - run logs the claim, only with finished;
//   - the SELECT returns the assigned loans in order (work ids follow the
//     criteria order, as RequestWithLoans reads them) with the request's
//     creation time: one row per loan, none when nothing was finished.
func finishingClaim(src drivers.CriteriaSource) string {
	return `WITH claimed AS (
` + drivers.CriteriaClaim(dialect{}, src).Text() + `
RETURNING id, loan_id),
finished AS (
UPDATE loanq_work_request SET assigned = $6, status = $7, served_at = clock_timestamp()
WHERE id = $3 AND status = 'pending' AND (SELECT count(*) FROM claimed) = $6
RETURNING id, created_at),
run AS (
INSERT INTO loanq_query_run (task_id, strategy, holder, started_at, duration_ms, rows_found, requests_served, loans_assigned, pooled)
SELECT $1, 'rows', $8, ` + dialect{}.NowMinusMillis("$9") + `, $10, $11, 1, $6, 0 FROM finished)
SELECT claimed.loan_id, finished.created_at FROM finished CROSS JOIN claimed ORDER BY claimed.id`
}
