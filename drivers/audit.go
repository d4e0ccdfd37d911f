package drivers

// AuditQueries check loanq's invariants on a database's final state. They are
// plain SQL with no binds and no dialect features, so every dialect sends
// them as written here; `loanq sql` prints them with each dialect's
// statements. Each returns one count that must be 0.
var AuditQueries = []Named{
	{Field: "AuditDuplicateActive", Purpose: "(task, loan) pairs active in more than one pipeline (the invariant)",
		SQL: `SELECT COUNT(*) FROM (
  SELECT task_id, loan_id FROM loanq_work WHERE disposition IS NULL
  GROUP BY task_id, loan_id HAVING COUNT(*) > 1) d`},
	{Field: "AuditCountMismatch", Purpose: "served requests whose assigned count differs from their work rows",
		SQL: `SELECT COUNT(*) FROM loanq_work_request r
WHERE r.status <> 'pending'
  AND r.assigned <> (SELECT COUNT(*) FROM loanq_work w WHERE w.request_id = r.id)`},
	{Field: "AuditBadStatus", Purpose: "requests whose status does not match their counts",
		SQL: `SELECT COUNT(*) FROM loanq_work_request
WHERE (status = 'assigned' AND assigned <> requested)
   OR (status = 'partial' AND (assigned = 0 OR assigned >= requested))
   OR (status = 'empty' AND assigned <> 0)
   OR (status = 'pending' AND assigned <> 0)`},
	{Field: "AuditOverCap", Purpose: "users holding more active work in a task than its max_active",
		SQL: `SELECT COUNT(*) FROM (
  SELECT w.task_id, w.user_name FROM loanq_work w JOIN loanq_task t ON t.id = w.task_id
  WHERE w.disposition IS NULL AND t.max_active IS NOT NULL
  GROUP BY w.task_id, w.user_name, t.max_active HAVING COUNT(*) > t.max_active) c`},
	{Field: "AuditPending", Purpose: "requests still pending (0 once every caller or a recheck has run)",
		SQL: `SELECT COUNT(*) FROM loanq_work_request WHERE status = 'pending'`},
}
