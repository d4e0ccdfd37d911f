package sqlite

import (
	"context"
	"github.com/loanq/loanq/loankey"

	"github.com/loanq/loanq/drivers"
)

// dialect is how SQLite writes what databases say differently. Times are
// stored as fixed-width ISO-8601 UTC text with milliseconds, so that
// comparing two stored times as text compares the times.
type dialect struct{}

const nowExpr = `strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`

func (dialect) Placeholder(int) string { return "?" }
func (dialect) Now() string            { return nowExpr }

// NowPlusMillis: a NULL bind gives NULL (return_at of dispositions other
// than return).
func (dialect) NowPlusMillis(ms string) string {
	return `strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '+' || (` + ms + ` / 1000.0) || ' seconds')`
}
func (dialect) NowMinusMillis(ms string) string {
	return `strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-' || (` + ms + ` / 1000.0) || ' seconds')`
}
func (dialect) SecondsSince(ts string) string {
	return `CAST((julianday('now') - julianday(` + ts + `)) * 86400 AS INTEGER)`
}
func (dialect) MillisSince(ts string) string {
	return `CAST((julianday('now') - julianday(` + ts + `)) * 86400000 AS INTEGER)`
}
func (dialect) SecondsBetween(from, to string) string {
	return `CAST((julianday(` + to + `) - julianday(` + from + `)) * 86400 AS INTEGER)`
}

// StartOfToday: midnight UTC in the stored text form.
func (dialect) StartOfToday() string       { return `date('now') || 'T00:00:00.000Z'` }
func (dialect) Limit(n string) string      { return `LIMIT ` + n }
func (dialect) Integer(expr string) string { return `CAST(` + expr + ` AS INTEGER)` }
func (dialect) InIDs(expr, ids string) string {
	return expr + ` IN (SELECT value FROM json_each(` + ids + `))`
}

// KeyAsText: CAST AS TEXT gives an integer's decimal digits; loanq's
// loan_id columns have TEXT affinity (migration 00013), so the comparison
// is text with text, through their index.
func (dialect) KeyAsText(expr string) string { return `CAST(` + expr + ` AS TEXT)` }

// InKeys: json_each's values are integers for an integer task's list and
// text otherwise, each compared with the key column in its own affinity.
func (dialect) InKeys(expr, keys string, _ loankey.Kind) string {
	return expr + ` IN (SELECT value FROM json_each(` + keys + `))`
}

// InLoanIDs: the list's strings against loanq's TEXT loan_id columns.
func (dialect) InLoanIDs(expr, ids string) string {
	return expr + ` IN (SELECT value FROM json_each(` + ids + `))`
}

// AssignmentsFromJSON: json_each's key is the element's position.
func (dialect) AssignmentsFromJSON(list string) string {
	return `SELECT key AS n, json_extract(value, '$[0]') AS loan_id, json_extract(value, '$[1]') AS request_id,
       json_extract(value, '$[2]') AS user_name FROM json_each(` + list + `)`
}
func (dialect) ReturningID() string { return "\nRETURNING id" }

// SkipActiveConflict: none; no rows strategy, which is what needs it.
func (dialect) SkipActiveConflict() string { return "" }

func (dialect) InsertID(ctx context.Context, q drivers.Querier, query string, args []any) (int64, error) {
	return drivers.ReturnedID(ctx, q, query, args)
}

// The statements SQLite says its own way, or does not send; every other one
// is the portable form of drivers.Portable. SQLite has no row locks and one
// writer at a time: every write transaction starts with BEGIN IMMEDIATE (set
// in the connection string), so it takes the database's write lock up front
// instead of failing on upgrade from a read lock. The task lock is the lease
// row; the row-lock strategies (skip, nowait, wait, rows) are not available,
// nor their statements.
var statements = drivers.BuildOnce(dialect{}, capabilities, func(s *drivers.Statements) {
	// One writer at a time: the claim's transaction holds the write lock
	// (BEGIN IMMEDIATE), so the first candidates are its own.
	s.PoolClaim.SQL = `SELECT loan_id FROM loanq_pool
WHERE task_id = :task_id AND filled_at > {{nowMinusMs ":ttl_ms"}}
ORDER BY pos LIMIT :limit`
	for _, rowLock := range []*string{&s.LockSkip.SQL, &s.LockNoWait.SQL, &s.LockWait.SQL,
		&s.LockWaitBounded.SQL, &s.UserLockEnsure.SQL, &s.UserLock.SQL, &s.WorkInsertRows.SQL} {
		*rowLock = ""
	}
	// A serving round's requests, finished in one statement (UPDATE … FROM:
	// SQLite 3.33).
	s.RequestFinishMany.SQL = `UPDATE loanq_work_request
SET assigned = f.assigned, status = f.status, served_at = ` + nowExpr + `
FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS assigned, json_extract(value, '$[2]') AS status
      FROM json_each(:outcomes)) AS f
WHERE loanq_work_request.id = f.id AND loanq_work_request.task_id = :task_id
  AND loanq_work_request.status = 'pending' AND {{requestAlive "loanq_work_request.alive_at"}}`
	// No row locks: a waiter polls RequestWake (a primary-key read; WAL
	// readers never wait).
})

// catalogueSQL is what SQLite says its own way in the statement catalogues
// of the features outside the engine (drivers.Catalogue): nothing, every
// one of their statements is the portable one.
var catalogueSQL drivers.Overrides
