package mysql

import (
	"context"
	"github.com/loanq/loanq/loankey"

	"github.com/loanq/loanq/drivers"
)

// dialect is how MySQL 8 / MariaDB write what databases say differently.
// Times are UTC from UTC_TIMESTAMP(6), the database clock, whatever the
// session time zone.
type dialect struct{}

func (dialect) Placeholder(int) string { return "?" }
func (dialect) Now() string            { return `UTC_TIMESTAMP(6)` }
func (dialect) NowPlusMillis(ms string) string {
	return `UTC_TIMESTAMP(6) + INTERVAL (` + ms + ` * 1000) MICROSECOND`
}
func (dialect) NowMinusMillis(ms string) string {
	return `UTC_TIMESTAMP(6) - INTERVAL (` + ms + ` * 1000) MICROSECOND`
}
func (dialect) SecondsSince(ts string) string {
	return `TIMESTAMPDIFF(SECOND, ` + ts + `, UTC_TIMESTAMP(6))`
}
func (dialect) MillisSince(ts string) string {
	return `TIMESTAMPDIFF(MICROSECOND, ` + ts + `, UTC_TIMESTAMP(6)) DIV 1000`
}
func (dialect) SecondsBetween(from, to string) string {
	return `TIMESTAMPDIFF(SECOND, ` + from + `, ` + to + `)`
}

// StartOfToday: UTC_DATE() is midnight of the database's UTC day.
func (dialect) StartOfToday() string       { return `UTC_DATE()` }
func (dialect) Limit(n string) string      { return `LIMIT ` + n }
func (dialect) Integer(expr string) string { return `CAST(` + expr + ` AS SIGNED)` }

// InIDs: JSON_TABLE (MySQL 8.0.4, MariaDB 10.6), looked up by primary key.
func (dialect) InIDs(expr, ids string) string {
	return expr + ` IN (SELECT j.id FROM JSON_TABLE(` + ids + `, '$[*]' COLUMNS (id BIGINT PATH '$')) AS j)`
}

// KeyAsText: the key's text in loanq's loan_id collation, utf8mb4_bin
// (migration 00013): an explicit COLLATE wins over the source column's and
// the connection's collations, so comparing it with a loan_id never mixes
// collations, and compares keys exactly (case and trailing spaces count).
// An integer's text is its decimal digits; MariaDB's UUID its canonical
// lower-case form.
func (dialect) KeyAsText(expr string) string {
	return `CAST(` + expr + ` AS CHAR CHARACTER SET utf8mb4) COLLATE utf8mb4_bin`
}

// InKeys: as InIDs, the elements read as the key column's kind: integers
// as BIGINT; text and UUIDs as utf8mb4 text, which MariaDB compares with a
// UUID column as a UUID and with a character column in that column's
// collation (the JSON_TABLE column takes utf8mb4's default collation, of
// lower precedence than a column's), so the key's index serves the lookup.
func (dialect) InKeys(expr, keys string, kind loankey.Kind) string {
	if kind == loankey.Integer {
		return expr + ` IN (SELECT j.id FROM JSON_TABLE(` + keys + `, '$[*]' COLUMNS (id BIGINT PATH '$')) AS j)`
	}
	return expr + ` IN (SELECT j.id FROM JSON_TABLE(` + keys + `, '$[*]' COLUMNS (id VARCHAR(200) CHARACTER SET utf8mb4 PATH '$')) AS j)`
}

// InLoanIDs: loanq's loan_id columns are utf8mb4_bin text.
func (dialect) InLoanIDs(expr, ids string) string {
	return expr + ` IN (SELECT j.id FROM JSON_TABLE(` + ids + `, '$[*]' COLUMNS (id VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$')) AS j)`
}

// poolDropIDs is PoolDrop's (and DisposeLoans') list of loan ids as a
// table j(id) in loanq's loan_id collation.
const poolDropIDs = `JSON_TABLE(:ids, '$[*]' COLUMNS (id VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$')) AS j`

// AssignmentsFromJSON: JSON_TABLE with an ordinality column.
func (dialect) AssignmentsFromJSON(list string) string {
	return `SELECT j.n, j.loan_id, j.request_id, j.user_name FROM JSON_TABLE(` + list + `, '$[*]' COLUMNS (
    n FOR ORDINALITY, loan_id VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$[0]', request_id BIGINT PATH '$[1]', user_name VARCHAR(100) PATH '$[2]')) AS j`
}

// ReturningID: MySQL 8 has no INSERT … RETURNING; the id comes back in the
// OK packet of the same statement.
func (dialect) ReturningID() string { return "" }

// SkipActiveConflict: none; a duplicate key undoes the failing statement
// only (INSERT IGNORE would turn other errors into warnings too).
func (dialect) SkipActiveConflict() string { return "" }

func (dialect) InsertID(ctx context.Context, q drivers.Querier, query string, args []any) (int64, error) {
	res, err := q.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// pruneIDs is a prune batch's id list as a table j(id).
const pruneIDs = "JSON_TABLE(:ids, '$[*]' COLUMNS (id BIGINT PATH '$')) AS j"

// The statements MySQL and MariaDB say their own way; every other one is
// the portable form of drivers.Portable.
var statements = drivers.BuildOnce(dialect{}, capabilities, func(s *drivers.Statements) {
	// A join that looks each key up by primary key: a DELETE with an IN
	// subquery may scan the task's pool rows instead, and wait for rows
	// other claims hold (a lock cycle with a refilling round).
	s.PoolDrop.SQL = `DELETE p FROM ` + poolDropIDs + `
JOIN loanq_pool p ON p.task_id = :task_id AND p.loan_id = j.id`
	// Who may act as whom: loanq_may_act_as is migration 00008's rule, the
	// command line's first question (every account was granted it; the
	// triggers of 00017 decide, with loanq_acts_as). The account is USER()
	// up to its last '@': the account as the client logged in, not the
	// definer.
	s.Identity.SQL = `SELECT SUBSTRING(USER(), 1, CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1) AS account_name, CASE WHEN loanq_may_act_as(:user) THEN 1 ELSE 0 END AS may_act,
       (SELECT user_name FROM loanq_account WHERE account = SUBSTRING(USER(), 1, CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1)) AS mapped`

	// Wake-ups (docs/algorithm.md, "Waiting"). innodb_lock_wait_timeout is
	// a session variable in whole seconds: the waiter sets it on its own
	// connection and puts the saved value back after its transaction.
	s.WaitLockSave.SQL = `SELECT @@SESSION.innodb_lock_wait_timeout AS setting`
	s.WaitLockSet.SQL = `SET SESSION innodb_lock_wait_timeout = GREATEST(1, CEIL(:ms / 1000))`
	s.WaitLockRestore.SQL = `SET SESSION innodb_lock_wait_timeout = :value`
	// An S lock on the task's index record: it waits for the holder's X
	// lock and is granted together with the other waiters' S locks.
	// LOCK IN SHARE MODE, not FOR SHARE: MariaDB has only this spelling.
	s.LockShareBounded.SQL = `SELECT id FROM loanq_task WHERE id = :task_id LOCK IN SHARE MODE`

	// The hold limit (docs/reliability.md), MariaDB's session variables:
	// idle_transaction_timeout (whole seconds) ends a session idle inside a
	// transaction, max_statement_time (seconds) aborts one statement. They
	// are session settings, not transaction ones: HoldLimitReset puts the
	// server defaults back before the pooled connection is reused (the
	// driver's connection wrapper sends it). MySQL 8 has neither variable:
	// the driver sends holdLimitSetMySQL8 / holdLimitResetMySQL8 there.
	s.HoldLimitSet.SQL = `SET SESSION idle_transaction_timeout = CEIL(:idle_ms / 1000), max_statement_time = :statement_ms / 1000`
	s.HoldLimitReset.SQL = `SET SESSION idle_transaction_timeout = DEFAULT, max_statement_time = DEFAULT`

	// The one-active-row unique index (task_id, active_loan_id) finds the
	// row: an equality on a unique index locks that one record, where the
	// (task_id, loan_id, disposition, return_at) index would also lock the
	// gap after it. active_loan_id is the loan id while the row is active.
	s.DisposeLoan.SQL = `UPDATE loanq_work
SET disposition = :disposition, disposed_at = {{now}},
    return_at = {{nowPlusMs ":return_after_ms"}}, reason = :reason, note = :note
WHERE task_id = :task_id AND active_loan_id = :loan_id AND user_name = :user`

	// DisposeLoans as a join from the list that looks each key up in the
	// same unique index as DisposeLoan: an UPDATE with an IN subquery may
	// scan the task's work rows instead, and an InnoDB UPDATE locks every
	// row it scans (other users' active work, and the gaps a round inserts
	// into), where the join locks the list's rows only.
	s.DisposeLoans.SQL = `UPDATE ` + poolDropIDs + `
STRAIGHT_JOIN loanq_work w ON w.task_id = :task_id AND w.active_loan_id = j.id
SET w.disposition = :disposition, w.disposed_at = {{now}},
    w.return_at = {{nowPlusMs ":return_after_ms"}}, w.reason = :reason, w.note = :note
WHERE w.user_name = :user`

	// The generated column pending_user is set only while a request is
	// pending; its unique index with task_id finds the one pending request.
	s.RequestPendingFor.SQL = `SELECT id FROM loanq_work_request WHERE task_id = :task_id AND pending_user = :user
  AND {{requestAlive "alive_at"}}`
})

// catalogueSQL is what MySQL and MariaDB say their own way in the
// statement catalogues of the features outside the engine
// (drivers.Catalogue; the reasons they live here are in
// drivers/catalogue.go), by catalogue and statement.
var catalogueSQL = drivers.Overrides{
	// Named locks (namedlock/sql.go). ON DUPLICATE KEY UPDATE rather than
	// INSERT IGNORE, which would also turn a too-long name into a silent
	// truncation.
	"namedlock": {
		"NamedLockEnsure": `INSERT INTO loanq_lock (name, token) VALUES (:name, 0) ON DUPLICATE KEY UPDATE name = name`,
	},
	"dashboard": {
		// The dashboard (dashboard/sql.go). MySQL has no partial index:
		// active work is read per task through the unique index on
		// (task_id, active_loan_id), whose second column is NULL once a row
		// is dispositioned, and pending requests through (task_id, status,
		// id); both joins start from the few task rows.
		"DashPending": `SELECT r.task_id, COUNT(*) AS pending, {{age "MIN(r.created_at)"}} AS oldest_s
FROM loanq_task t JOIN loanq_work_request r ON r.task_id = t.id AND r.status = 'pending'
  AND {{requestAlive "r.alive_at"}}
GROUP BY r.task_id`,
		"DashActive": `SELECT w.task_id, w.user_name, COUNT(*) AS active, {{age "MIN(w.assigned_at)"}} AS oldest_s,
       COUNT(CASE WHEN {{age "w.assigned_at"}} >= :hold_s THEN 1 END) AS held
FROM loanq_task t JOIN loanq_work w ON w.task_id = t.id AND w.active_loan_id IS NOT NULL
GROUP BY w.task_id, w.user_name`,
	},
	"history": {
		// The export's batch (dispatch/historysql.go) along loanq_history's
		// primary key, each event's work row and task by theirs, so rows
		// come in id order and the LIMIT stops the read. Left to itself,
		// MariaDB 10.11 began with loanq_task (a handful of rows) after a
		// bulk insert and sorted the whole history for every batch: 46 s a
		// batch at 900,000 work rows, 49 ms like this (the join buffer of a
		// plain join to loanq_task also loses the order: hence its FORCE
		// INDEX).
		"HistoryBatch": `SELECT h.id, h.event, h.event_at, t.name, t.key_kind, w.loan_id, w.user_name,
       w.request_id, w.id AS work_id, w.assigned_at, w.disposition, w.disposed_at, w.disposed_by,
       w.reason, w.note, w.return_at,
       CASE WHEN h.event_at < {{nowMinusMs ":settle_ms"}} THEN 0 ELSE 1 END AS young
FROM loanq_history h FORCE INDEX (PRIMARY)
STRAIGHT_JOIN loanq_work w FORCE INDEX (PRIMARY) ON w.id = h.work_id
STRAIGHT_JOIN loanq_task t FORCE INDEX (PRIMARY) ON t.id = w.task_id
WHERE h.id > :after
  AND (:task_id = 0 OR w.task_id = :task_id)
  AND (:any_user = 1 OR w.user_name = :user_name)
  AND (:any_since = 1 OR h.event_at >= {{nowMinusMs ":since_ms"}})
ORDER BY h.id {{limit ":limit"}}`,
	},
	"taskdelete": {
		// A task's events through its work rows' index: MariaDB scans the
		// whole history for a single-table DELETE with an IN subquery
		// (see "prune").
		"DeleteHistory": `DELETE h FROM loanq_work w FORCE INDEX (loanq_work_task_loan_ix)
STRAIGHT_JOIN loanq_history h FORCE INDEX (loanq_history_work_ix) ON h.work_id = w.id
WHERE w.task_id = :task_id`,
	},
	"prune": {
		// Retention (`loanq prune`, dispatch/prunesql.go). A single-table
		// DELETE … WHERE x IN (SELECT … FROM JSON_TABLE(…)) is not turned
		// into a join by MariaDB 10.11: it scanned the whole table, locking
		// every row it passed, and waited for the processors' locks on
		// their active rows. A multi-table DELETE joining the id list
		// reaches each row through its index; the join order and the index
		// are forced, as on a freshly filled table the planner's statistics
		// may say a scan is cheaper, and a scan locks (and waits for) the
		// processors' active rows it passes.
		"PruneWorkCount": `SELECT COUNT(*) AS n FROM ` + pruneIDs + `
STRAIGHT_JOIN loanq_work w FORCE INDEX (loanq_work_request_ix) ON w.request_id = j.id`,
		"PruneHistoryCount": `SELECT COUNT(*) AS n FROM ` + pruneIDs + `
STRAIGHT_JOIN loanq_work w FORCE INDEX (loanq_work_request_ix) ON w.request_id = j.id
STRAIGHT_JOIN loanq_history h FORCE INDEX (loanq_history_work_ix) ON h.work_id = w.id`,
		"PruneHistory": `DELETE h FROM ` + pruneIDs + `
STRAIGHT_JOIN loanq_work w FORCE INDEX (loanq_work_request_ix) ON w.request_id = j.id
STRAIGHT_JOIN loanq_history h FORCE INDEX (loanq_history_work_ix) ON h.work_id = w.id
WHERE w.disposition IS NOT NULL AND w.disposition <> 'never'
  AND (w.return_at IS NULL OR w.return_at <= {{now}})
  AND w.disposed_at < {{nowMinusMs ":age_ms"}}`,
		"PruneWork": `DELETE w FROM ` + pruneIDs + `
STRAIGHT_JOIN loanq_work w FORCE INDEX (loanq_work_request_ix) ON w.request_id = j.id
WHERE w.disposition IS NOT NULL AND w.disposition <> 'never'
  AND (w.return_at IS NULL OR w.return_at <= {{now}})
  AND w.disposed_at < {{nowMinusMs ":age_ms"}}`,
		"PruneRequests": `DELETE r FROM ` + pruneIDs + `
STRAIGHT_JOIN loanq_work_request r FORCE INDEX (PRIMARY) ON r.id = j.id
WHERE r.status <> 'pending'
  AND NOT EXISTS (SELECT 1 FROM loanq_work w WHERE w.request_id = r.id)`,
		"PruneRuns": `DELETE r FROM ` + pruneIDs + `
STRAIGHT_JOIN loanq_query_run r FORCE INDEX (PRIMARY) ON r.id = j.id
WHERE r.started_at < {{nowMinusMs ":age_ms"}}`,
	},
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
	return drivers.CriteriaSelect(dialect{}, src) + `
LIMIT ?
FOR UPDATE SKIP LOCKED`
}

// lockableView binds: the source name. Answers IS_UPDATABLE for a view of
// the current database, no row for a base table.
const lockableView = `SELECT IS_UPDATABLE FROM information_schema.VIEWS
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`
