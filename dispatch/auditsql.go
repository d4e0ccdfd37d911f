package dispatch

import (
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
)

// The audit's statements (audit.go): loanq's invariants checked on a
// database's state, each one count that must be 0. A catalogue of their
// own (drivers.Catalogue "audit"), not part of the engine's
// drivers.Statements; `loanq sql` prints them after the engine's. Every
// dialect sends the portable text.
type auditStatements struct {
	AuditDuplicateActive drivers.Query[engineio.NoParams, engineio.Count] `purpose:"audit: (task, loan) pairs active in more than one pipeline (the invariant)"`
	AuditCountMismatch   drivers.Query[engineio.NoParams, engineio.Count] `purpose:"audit: served requests whose assigned count differs from their work rows"`
	AuditBadStatus       drivers.Query[engineio.NoParams, engineio.Count] `purpose:"audit: requests whose status does not match their counts"`
	AuditOverCap         drivers.Query[engineio.NoParams, engineio.Count] `purpose:"audit: users holding more active work in a task than its max_active"`
	AuditPending         drivers.Query[engineio.NoParams, engineio.Count] `purpose:"audit: requests still pending (0 once every caller or a recheck has run)"`
}

var auditCatalogue = drivers.NewCatalogue("audit", portableAudit)

func portableAudit() *auditStatements {
	return &auditStatements{
		AuditDuplicateActive: drivers.Query[engineio.NoParams, engineio.Count]{SQL: `SELECT COUNT(*) AS n FROM (
  SELECT task_id, loan_id FROM loanq_work WHERE disposition IS NULL
  GROUP BY task_id, loan_id HAVING COUNT(*) > 1) d`},
		AuditCountMismatch: drivers.Query[engineio.NoParams, engineio.Count]{SQL: `SELECT COUNT(*) AS n FROM loanq_work_request r
WHERE r.status <> 'pending'
  AND r.assigned <> (SELECT COUNT(*) FROM loanq_work w WHERE w.request_id = r.id)`},
		AuditBadStatus: drivers.Query[engineio.NoParams, engineio.Count]{SQL: `SELECT COUNT(*) AS n FROM loanq_work_request
WHERE (status = 'assigned' AND assigned <> requested)
   OR (status = 'partial' AND (assigned = 0 OR assigned >= requested))
   OR (status = 'empty' AND assigned <> 0)
   OR (status = 'pending' AND assigned <> 0)`},
		AuditOverCap: drivers.Query[engineio.NoParams, engineio.Count]{SQL: `SELECT COUNT(*) AS n FROM (
  SELECT w.task_id, w.user_name FROM loanq_work w JOIN loanq_task t ON t.id = w.task_id
  WHERE w.disposition IS NULL AND t.max_active IS NOT NULL
  GROUP BY w.task_id, w.user_name, t.max_active HAVING COUNT(*) > t.max_active) c`},
		// Pending and alive: one past its last sign of life is expired
		// (docs/algorithm.md, "Abandoned requests"), ended at the next look.
		AuditPending: drivers.Query[engineio.NoParams, engineio.Count]{SQL: `SELECT COUNT(*) AS n FROM loanq_work_request WHERE status = 'pending' AND {{requestAlive "alive_at"}}`},
	}
}
