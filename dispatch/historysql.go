package dispatch

import (
	"database/sql"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
)

// The history export's statements (`loanq history`, history.go,
// docs/retention.md "Export, then prune"): a catalogue of their own
// (drivers.Catalogue "history"), not part of the engine's
// drivers.Statements. Every dialect sends the portable text but MySQL's,
// which forces the join order (drivers/mysql/sql.go says why).
//
// The events are loanq_history's rows, written by the database's triggers
// on loanq_work (migration 00021); the export joins each to its work row
// and task. It walks loanq_history's primary key in batches (keyset: id >
// after, in id order, at most limit rows), so a batch costs the same at
// the millionth row as at the first and the reader holds one batch at a
// time.
type historyStatements struct {
	// HistoryBatch: the next events after the id after, in id order, of
	// one task or every task (task_id 0), one assignee or all (any_user
	// 1), at or after the since horizon or all (any_since 1). young is 1
	// for an event written after the settle horizon: the export stops at
	// the first one (history.go says why).
	HistoryBatch drivers.Query[historyBatchParams, eventRow] `purpose:"history: the next batch of events after a cursor, with their work rows and tasks"`
}

var historyCatalogue = drivers.NewCatalogue("history", portableHistory)

// historySQL is the history catalogue compiled for the admin's driver.
func (a *Admin) historySQL() *historyStatements { return historyCatalogue.For(a.driver) }

// portableHistory: the batch is a range of loanq_history's primary key;
// the work row and the task are read by their primary keys.
func portableHistory() *historyStatements {
	return &historyStatements{
		HistoryBatch: drivers.Query[historyBatchParams, eventRow]{SQL: `SELECT h.id, h.event, h.event_at, t.name, t.key_kind, w.loan_id, w.user_name,
       w.request_id, w.id AS work_id, w.assigned_at, w.disposition, w.disposed_at, w.disposed_by,
       w.reason, w.note, w.return_at,
       CASE WHEN h.event_at < {{nowMinusMs ":settle_ms"}} THEN 0 ELSE 1 END AS young
FROM loanq_history h
JOIN loanq_work w ON w.id = h.work_id
JOIN loanq_task t ON t.id = w.task_id
WHERE h.id > :after
  AND (:task_id = 0 OR w.task_id = :task_id)
  AND (:any_user = 1 OR w.user_name = :user_name)
  AND (:any_since = 1 OR h.event_at >= {{nowMinusMs ":since_ms"}})
ORDER BY h.id {{limit ":limit"}}`},
	}
}

// historyBatchParams is one batch of the export (bind tags as in
// drivers/params.go). The horizons are ages by the database clock:
// settle_ms and since_ms grow with the time the export has run, so that
// they name the same instants in every batch (history.go).
type historyBatchParams struct {
	After    int64  `bind:"after"`
	TaskID   int64  `bind:"task_id"`
	AnyUser  int    `bind:"any_user"`
	User     string `bind:"user_name"`
	AnySince int    `bind:"any_since"`
	SinceMS  int64  `bind:"since_ms"`
	SettleMS int64  `bind:"settle_ms"`
	Limit    int    `bind:"limit"`
}

// eventRow is one event with its work row and task (HistoryBatch).
type eventRow struct {
	ID          int64          `col:"id"`
	Event       string         `col:"event"`
	At          engineio.Time  `col:"event_at"`
	Task        string         `col:"name"`
	KeyKind     string         `col:"key_kind"`
	LoanID      string         `col:"loan_id"`
	User        string         `col:"user_name"`
	RequestID   int64          `col:"request_id"`
	WorkID      int64          `col:"work_id"`
	AssignedAt  engineio.Time  `col:"assigned_at"`
	Disposition sql.NullString `col:"disposition"`
	DisposedAt  engineio.Time  `col:"disposed_at"`
	DisposedBy  sql.NullString `col:"disposed_by"`
	Reason      sql.NullString `col:"reason"`
	Note        sql.NullString `col:"note"`
	ReturnAt    engineio.Time  `col:"return_at"`
	Young       int            `col:"young"`
}
