package dispatch

import (
	"database/sql"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
)

// History retention's statements (`loanq prune`, prune.go,
// docs/retention.md): a catalogue of their own (drivers.Catalogue
// "prune"), not part of the engine's drivers.Statements. `loanq sql`
// prints them after the engine's. What a dialect says its own way (the
// deletes on MySQL/MariaDB, which force a join through the index) is in its
// drivers/<db>/sql.go, catalogueSQL["prune"].
//
// A request goes with all its work rows or stays whole (so a closed
// request's assigned count still matches its rows: AuditCountMismatch). It
// goes when it was closed more than age_ms ago and none of its rows still
// decides eligibility or is recent: active, 'never', a return whose time
// is still ahead, or ended less than age_ms ago. Each batch's ids are read
// first (a read that locks nothing), then deleted by id in short
// transactions (the work rows, then the requests: prune.go says why two);
// ended rows never change again, so what the read found prunable still is
// at the delete, which checks it again anyway.
type pruneStatements struct {
	// PruneRequestBounds: the lowest and highest id of the requests closed
	// more than age ms ago (NULL when none); the batches walk the primary key
	// between them.
	PruneRequestBounds drivers.Query[pruneBoundsParams, boundsRow] `purpose:"prune: id range of the requests closed before the cutoff"`
	// PruneRequestBatch: the next prunable requests after the id after, in
	// id order.
	PruneRequestBatch drivers.Query[pruneBatchParams, engineio.IDRow] `purpose:"prune: the next batch of requests that can go with all their work rows"`
	PruneWorkCount    drivers.Query[idListParams, engineio.Count]     `purpose:"prune --dry-run: work rows of a batch of requests"`
	// PruneHistoryCount: the events of those work rows (dry run).
	PruneHistoryCount drivers.Query[idListParams, engineio.Count] `purpose:"prune --dry-run: history events of the work rows of a batch of requests"`
	// PruneHistory deletes the events (loanq_history) of the work rows
	// PruneWork deletes, in its transaction and before it: an event goes
	// with its work row, never before it (the export joins them).
	PruneHistory drivers.Stmt[pruneIDsParams] `purpose:"prune: delete the history events of the work rows of a batch of requests"`
	// PruneWork deletes the ended, no longer deciding work rows of those
	// requests.
	PruneWork drivers.Stmt[pruneIDsParams] `purpose:"prune: delete the work rows of a batch of requests"`
	// PruneRequests deletes those closed requests that have no work row left.
	// Sent after PruneWork's transaction has committed.
	PruneRequests drivers.Stmt[idListParams] `purpose:"prune: delete a batch of closed requests left without work rows"`
	// PruneRunBounds: the lowest and highest id of the task's criteria-query
	// runs started more than age ms ago, leaving out its PruneKeepRuns latest
	// runs (NULL when none).
	PruneRunBounds drivers.Query[pruneBoundsParams, boundsRow]     `purpose:"prune: id range of a task's old criteria-query runs, its latest ones left out"`
	PruneRunBatch  drivers.Query[pruneBatchParams, engineio.IDRow] `purpose:"prune: the next batch of a task's old criteria-query runs"`
	// PruneRuns deletes those criteria-query runs.
	PruneRuns drivers.Stmt[pruneIDsParams] `purpose:"prune: delete a batch of criteria-query runs"`
}

// PruneKeepRuns is how many of a task's latest criteria-query runs a prune
// always keeps, however old: the engine sizes its hold limit and coalescing
// from the latest 10, and the dashboard charts the latest 40. Written as a
// literal in PruneRunBounds (statements are fixed text; a test compares).
const PruneKeepRuns = 40

var pruneCatalogue = drivers.NewCatalogue("prune", portablePrune)

// pruneSQL is the prune catalogue compiled for the engine's driver.
func (a *Admin) pruneSQL() *pruneStatements { return pruneCatalogue.For(a.driver) }

// portablePrune: the bounds are ranges of the indexes of migration 00009;
// the batches are primary-key ranges; the deletes go by id.
func portablePrune() *pruneStatements {
	return &pruneStatements{
		PruneRequestBounds: drivers.Query[pruneBoundsParams, boundsRow]{SQL: `SELECT MIN(id) AS lo, MAX(id) AS hi FROM loanq_work_request
WHERE served_at < {{nowMinusMs ":age_ms"}} AND (:task_id = 0 OR task_id = :task_id)`},
		PruneRequestBatch: drivers.Query[pruneBatchParams, engineio.IDRow]{SQL: `SELECT r.id FROM loanq_work_request r
WHERE r.id > :after AND r.id <= :upto AND r.served_at < {{nowMinusMs ":age_ms"}}
  AND (:task_id = 0 OR r.task_id = :task_id)
  AND NOT EXISTS (
    SELECT 1 FROM loanq_work w
    WHERE w.request_id = r.id
      AND (w.disposition IS NULL
           OR w.disposition = 'never'
           OR (w.disposition = 'return' AND w.return_at > {{now}})
           OR w.disposed_at >= {{nowMinusMs ":age_ms"}}))
ORDER BY r.id {{limit ":limit"}}`},
		PruneWorkCount: drivers.Query[idListParams, engineio.Count]{SQL: `SELECT COUNT(*) AS n FROM loanq_work WHERE {{inIDs "request_id" ":ids"}}`},
		PruneHistoryCount: drivers.Query[idListParams, engineio.Count]{SQL: `SELECT COUNT(*) AS n FROM loanq_history h
WHERE h.work_id IN (SELECT w.id FROM loanq_work w WHERE {{inIDs "w.request_id" ":ids"}})`},
		PruneHistory: drivers.Stmt[pruneIDsParams]{SQL: `DELETE FROM loanq_history
WHERE work_id IN (
  SELECT w.id FROM loanq_work w
  WHERE {{inIDs "w.request_id" ":ids"}}
    AND w.disposition IS NOT NULL AND w.disposition <> 'never'
    AND (w.return_at IS NULL OR w.return_at <= {{now}})
    AND w.disposed_at < {{nowMinusMs ":age_ms"}})`},
		PruneWork: drivers.Stmt[pruneIDsParams]{SQL: `DELETE FROM loanq_work
WHERE {{inIDs "request_id" ":ids"}}
  AND disposition IS NOT NULL AND disposition <> 'never'
  AND (return_at IS NULL OR return_at <= {{now}})
  AND disposed_at < {{nowMinusMs ":age_ms"}}`},
		PruneRequests: drivers.Stmt[idListParams]{SQL: `DELETE FROM loanq_work_request
WHERE {{inIDs "id" ":ids"}} AND status <> 'pending'
  AND NOT EXISTS (SELECT 1 FROM loanq_work w WHERE w.request_id = loanq_work_request.id)`},
		PruneRunBounds: drivers.Query[pruneBoundsParams, boundsRow]{SQL: `SELECT MIN(id) AS lo, MAX(id) AS hi FROM loanq_query_run
WHERE task_id = :task_id AND started_at < {{nowMinusMs ":age_ms"}}
  AND id < (SELECT MIN(id) FROM (
    SELECT id FROM loanq_query_run WHERE task_id = :task_id ORDER BY id DESC {{limit "40"}}) k)`},
		PruneRunBatch: drivers.Query[pruneBatchParams, engineio.IDRow]{SQL: `SELECT id FROM loanq_query_run
WHERE task_id = :task_id AND id > :after AND id <= :upto AND started_at < {{nowMinusMs ":age_ms"}}
ORDER BY id {{limit ":limit"}}`},
		PruneRuns: drivers.Stmt[pruneIDsParams]{SQL: `DELETE FROM loanq_query_run
WHERE {{inIDs "id" ":ids"}} AND started_at < {{nowMinusMs ":age_ms"}}`},
	}
}

// The parameters (bind tags as in drivers/params.go).
type (
	// pruneBoundsParams is the history a prune looks at: rows older than
	// age_ms (by the database clock), of one task or of every task
	// (task_id 0).
	pruneBoundsParams struct {
		TaskID int64 `bind:"task_id"`
		AgeMS  int64 `bind:"age_ms"`
	}
	// pruneBatchParams is one batch of a prune: up to limit ids after after
	// and up to upto (a primary-key range), of rows older than age_ms, of
	// one task or of every task (task_id 0).
	pruneBatchParams struct {
		TaskID int64 `bind:"task_id"`
		AgeMS  int64 `bind:"age_ms"`
		After  int64 `bind:"after"`
		Upto   int64 `bind:"upto"`
		Limit  int   `bind:"limit"`
	}
	// pruneIDsParams is a batch of ids as a JSON array text ("[3,7,9]") and
	// the prune's age in milliseconds.
	pruneIDsParams struct {
		IDs   string `bind:"ids"`
		AgeMS int64  `bind:"age_ms"`
	}
	// idListParams is a batch of ids as a JSON array text ("[3,7,9]").
	idListParams struct {
		IDs string `bind:"ids"`
	}
)

// boundsRow is an id range (NULL when empty).
type boundsRow struct {
	Lo sql.NullInt64 `col:"lo"`
	Hi sql.NullInt64 `col:"hi"`
}
