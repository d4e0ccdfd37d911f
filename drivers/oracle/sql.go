package oracle

import (
	"context"
	"database/sql"
	"github.com/loanq/loanq/loankey"
	"strconv"

	"github.com/loanq/loanq/drivers"
)

// dialect is how Oracle writes what databases say differently. Oracle's
// quirks shape it:
//
//   - Binds are positional, :1, :2, … and bound by occurrence in SQL (not
//     PL/SQL): a name used twice is two placeholders and two arguments.
//   - No statement ends with ';': the OCI parses a trailing ';' after plain SQL
//     as an error (ORA-00933/ORA-00911).
//   - SYSTIMESTAMP is the database server's clock in the server's time zone;
//     SYS_EXTRACT_UTC turns it into UTC, which is what every TIMESTAMP column holds.
//   - INSERT … RETURNING id INTO :N hands the new id back through an out bind
//     (sql.Out, appended by InsertID): N is the insert's binds plus one.
//   - ” is NULL: a "" bind is tested with IS NULL.
type dialect struct{}

const now = `SYS_EXTRACT_UTC(SYSTIMESTAMP)`

func (dialect) Placeholder(n int) string { return ":" + strconv.Itoa(n) }
func (dialect) Now() string              { return now }

// NowPlusMillis: NUMTODSINTERVAL of a NULL bind is NULL, so a NULL bind
// gives a NULL timestamp.
func (dialect) NowPlusMillis(ms string) string {
	return now + ` + NUMTODSINTERVAL(` + ms + ` / 1000, 'SECOND')`
}
func (dialect) NowMinusMillis(ms string) string {
	return now + ` - NUMTODSINTERVAL(` + ms + ` / 1000, 'SECOND')`
}

// SecondsSince: the difference of two DATEs is in days.
func (dialect) SecondsSince(ts string) string {
	return `ROUND((CAST(` + now + ` AS DATE) - CAST(` + ts + ` AS DATE)) * 86400)`
}

// MillisSince reads the parts of the INTERVAL DAY TO SECOND between two
// timestamps (a DATE difference would keep whole seconds only). The
// interval is written out in each part: a statement is built from literals,
// constants and the arguments only (e2e TestSQLSourcesUseBinds).
func (dialect) MillisSince(ts string) string {
	return `(EXTRACT(DAY FROM (` + now + ` - CAST(` + ts + ` AS TIMESTAMP))) * 86400000` +
		` + EXTRACT(HOUR FROM (` + now + ` - CAST(` + ts + ` AS TIMESTAMP))) * 3600000` +
		` + EXTRACT(MINUTE FROM (` + now + ` - CAST(` + ts + ` AS TIMESTAMP))) * 60000` +
		` + TRUNC(EXTRACT(SECOND FROM (` + now + ` - CAST(` + ts + ` AS TIMESTAMP))) * 1000))`
}
func (dialect) SecondsBetween(from, to string) string {
	return `ROUND((CAST(` + to + ` AS DATE) - CAST(` + from + ` AS DATE)) * 86400)`
}

// StartOfToday: TRUNC of the UTC clock is midnight of the database's UTC day.
func (dialect) StartOfToday() string { return `CAST(TRUNC(` + now + `) AS TIMESTAMP)` }

// Limit: FETCH FIRST is only unsafe together with FOR UPDATE (ORA-02014);
// the statements that use Limit lock nothing.
func (dialect) Limit(n string) string      { return `FETCH FIRST ` + n + ` ROWS ONLY` }
func (dialect) Integer(expr string) string { return `ROUND(` + expr + `)` }

// InIDs: JSON_TABLE (12.1.0.2).
func (dialect) InIDs(expr, ids string) string {
	return expr + ` IN (SELECT j.id FROM JSON_TABLE(` + ids + `, '$[*]' COLUMNS (id NUMBER(19) PATH '$')) j)`
}

// KeyAsText: TO_CHAR of a NUMBER is its decimal digits (no padding, no
// exponent for integers up to 38 digits); of a character column, itself.
func (dialect) KeyAsText(expr string) string { return `TO_CHAR(` + expr + `)` }

// InKeys: as InIDs, the elements read as the key column's kind (integers as
// NUMBER(19), text as VARCHAR2(200 CHAR)).
func (dialect) InKeys(expr, keys string, kind loankey.Kind) string {
	if kind == loankey.Integer {
		return expr + ` IN (SELECT j.id FROM JSON_TABLE(` + keys + `, '$[*]' COLUMNS (id NUMBER(19) PATH '$')) j)`
	}
	return expr + ` IN (SELECT j.id FROM JSON_TABLE(` + keys + `, '$[*]' COLUMNS (id VARCHAR2(200 CHAR) PATH '$')) j)`
}

// InLoanIDs: loanq's loan_id columns are VARCHAR2(200 CHAR).
func (dialect) InLoanIDs(expr, ids string) string {
	return expr + ` IN (SELECT j.id FROM JSON_TABLE(` + ids + `, '$[*]' COLUMNS (id VARCHAR2(200 CHAR) PATH '$')) j)`
}

// AssignmentsFromJSON: JSON_TABLE with an ordinality column (12.1.0.2).
func (dialect) AssignmentsFromJSON(list string) string {
	return `SELECT j.n, j.loan_id, j.request_id, j.user_name FROM JSON_TABLE(` + list + `, '$[*]' COLUMNS (
    n FOR ORDINALITY, loan_id VARCHAR2(200 CHAR) PATH '$[0]', request_id NUMBER(19) PATH '$[1]', user_name VARCHAR2(100 CHAR) PATH '$[2]')) j`
}
func (dialect) ReturningID() string { return "\nRETURNING id INTO :returned_id" }

// SkipActiveConflict: none; a duplicate key undoes the failing statement only.
func (dialect) SkipActiveConflict() string { return "" }

// InsertID: Oracle has no INSERT that returns a result set; the id comes
// back through an out bind, appended as the statement's last argument.
func (dialect) InsertID(ctx context.Context, q drivers.Querier, query string, args []any) (int64, error) {
	var id int64
	all := append(append(make([]any, 0, len(args)+1), args...), sql.Out{Dest: &id})
	if _, err := q.ExecContext(ctx, query, all...); err != nil {
		return 0, err
	}
	return id, nil
}

// The statements Oracle says its own way; every other one is the portable
// form of drivers.Portable.
var statements = drivers.BuildOnce(dialect{}, capabilities, func(s *drivers.Statements) {
	// A row limit cannot go with FOR UPDATE: the pool is claimed through
	// loanq_lock_rows (pool claim procedure: Driver.LockPool).
	s.PoolClaim.SQL = ""
	s.PoolStats.SQL = `SELECT
  (SELECT COUNT(*) FROM loanq_pool WHERE task_id = :task_id AND filled_at > {{nowMinusMs ":ttl_ms"}}) AS fresh,
  (SELECT {{age "MIN(filled_at)"}} FROM loanq_pool WHERE task_id = :task_id AND filled_at > {{nowMinusMs ":ttl_ms"}}) AS age_s,
  (SELECT COUNT(*) FROM loanq_work_request WHERE task_id = :task_id AND pooled = 1) AS hits,
  (SELECT COUNT(*) FROM loanq_query_run WHERE task_id = :task_id AND pooled > 0) AS refills
FROM dual`
	// Who may act as whom: loanq_may_act_as is migration 00008's rule, the
	// one its triggers apply to every write.
	s.Identity.SQL = `SELECT SYS_CONTEXT('USERENV', 'SESSION_USER') AS account_name, loanq_may_act_as(:user) AS may_act,
       (SELECT user_name FROM loanq_account WHERE account = SYS_CONTEXT('USERENV', 'SESSION_USER')) AS mapped
FROM dual`

	s.Now.SQL = `SELECT {{now}} AS db_now FROM DUAL`

	// Newest by start time, not by id: identity columns are NOORDER, so on
	// RAC each instance hands out ids from its own cached range and a higher
	// id may be an older run (the other dialects' ids follow insertion order).
	s.TaskRuns.SQL = `SELECT id, strategy, holder, started_at, duration_ms, rows_found, requests_served, loans_assigned
FROM loanq_query_run WHERE task_id = :task_id ORDER BY started_at DESC, id DESC
FETCH FIRST 10 ROWS ONLY`

	// The task row is found by its primary key, so the lock covers exactly that
	// row and no row limit is needed; Oracle rejects FETCH FIRST with FOR UPDATE
	// (ORA-02014) and applies ROWNUM before locking, so with SKIP LOCKED a
	// ROWNUM limit returns fewer rows than asked. A foreign-key check of a
	// new work request reads the parent's key index and does not wait for this
	// row lock, so requests are still logged while the criteria query runs.
	// (The portable LockSkip, LockNoWait and LockWait are these.)

	// "" (all tasks) arrives as NULL.
	s.Pipeline.SQL = `SELECT t.name, w.loan_id, w.assigned_at, t.key_kind, {{now}} AS db_now
FROM loanq_work w JOIN loanq_task t ON t.id = w.task_id
WHERE w.user_name = :user AND w.disposition IS NULL AND (:task IS NULL OR t.name = :task)
ORDER BY w.assigned_at, w.id`

	// Wake-ups (docs/algorithm.md, "Waiting"). Oracle bounds a queued lock in
	// the statement itself (FOR UPDATE WAIT n, ORA-30006 when n runs out): no
	// session setting to change or restore. {wait_s} is the bound, a literal.
	s.LockWaitBounded.SQL = `SELECT id FROM loanq_task WHERE id = :task_id FOR UPDATE WAIT {wait_s}`

	// The hold limit: an Oracle session cannot bound its own idle time
	// inside a transaction; a DBA configures the bound (a profile's
	// IDLE_TIME, Resource Manager's MAX_IDLE_BLOCKER_TIME, SQLNET.EXPIRE_TIME
	// for vanished clients), as docs/oracle.md describes: hold limit dba, no
	// HoldLimitSet.

	// The CASE expressions are those of loanq_request_one_pending_uq, so
	// the lookup is that index's range.
	s.RequestPendingFor.SQL = `SELECT id FROM loanq_work_request
WHERE CASE WHEN status = 'pending' THEN task_id END = :task_id
  AND CASE WHEN status = 'pending' THEN user_name END = :user
  AND {{requestAlive "alive_at"}}`

	// "" (all users) arrives as NULL; the age as in Pipeline.
	s.WorkOlder.SQL = `SELECT id, loan_id, user_name, assigned_at,
       EXTRACT(DAY FROM age) * 86400 + EXTRACT(HOUR FROM age) * 3600
         + EXTRACT(MINUTE FROM age) * 60 + TRUNC(EXTRACT(SECOND FROM age)) AS age_s
FROM (
  SELECT id, loan_id, user_name, assigned_at, {{now}} - assigned_at AS age
  FROM loanq_work
  WHERE task_id = :task_id AND disposition IS NULL AND (:user IS NULL OR user_name = :user)
    AND assigned_at <= {{nowMinusMs ":age_ms"}})
ORDER BY assigned_at, id`
})

// catalogueSQL is what Oracle says its own way in the statement catalogues
// of the features outside the engine (drivers.Catalogue; the reasons they
// live here are in drivers/catalogue.go), by catalogue and statement.
var catalogueSQL = drivers.Overrides{
	// Named locks (namedlock/sql.go). Oracle has no INSERT … ON CONFLICT,
	// and MERGE can still raise ORA-00001 under a race: a plain INSERT whose
	// unique violation the caller ignores.
	"namedlock": {
		"NamedLockEnsure": `INSERT INTO loanq_lock (name, token) VALUES (:name, 0)`,
	},
	"dashboard": {
		// The dashboard (dashboard/sql.go). Active work is read per task
		// through the function-based unique index, which holds only active
		// rows (its keys are NULL once a row is dispositioned), and pending
		// requests through (task_id, status, id); both joins start from the
		// few task rows.
		"DashPending": `SELECT r.task_id, COUNT(*) AS pending, {{age "MIN(r.created_at)"}} AS oldest_s
FROM loanq_task t JOIN loanq_work_request r ON r.task_id = t.id AND r.status = 'pending'
  AND {{requestAlive "r.alive_at"}}
GROUP BY r.task_id`,
		"DashActive": `SELECT w.task_id, w.user_name, COUNT(*) AS active, {{age "MIN(w.assigned_at)"}} AS oldest_s,
       COUNT(CASE WHEN {{age "w.assigned_at"}} >= :hold_s THEN 1 END) AS held
FROM loanq_task t JOIN loanq_work w ON CASE WHEN w.disposition IS NULL THEN w.task_id END = t.id
GROUP BY w.task_id, w.user_name`,
	},
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
	return drivers.CriteriaSelect(dialect{}, src) + `
FOR UPDATE OF src.` + src.Key + ` SKIP LOCKED`
}
