package drivers

// SupervisorQueries are the portable statements of the supervisor view
// (`loanq work list`, `loanq task stats`): they bind nothing and read no
// clock, so every dialect sends the same text; ages are computed from the
// database clock read with Statements.Now. The time-window statements of
// task stats differ per dialect and live in Statements (StatsDispositions,
// StatsRuns). `loanq sql` prints them.
var SupervisorQueries = []Named{
	{Field: "ActiveWorkAll", Purpose: "work list: everyone's active work, oldest first (task, loan, user, assigned_at)",
		SQL: `SELECT t.name, w.loan_id, w.user_name, w.assigned_at
FROM loanq_work w JOIN loanq_task t ON t.id = w.task_id
WHERE w.disposition IS NULL
ORDER BY w.assigned_at, w.id`},
	{Field: "StatsPending", Purpose: "task stats: pending requests per task",
		SQL: `SELECT t.name, COUNT(*)
FROM loanq_work_request r JOIN loanq_task t ON t.id = r.task_id
WHERE r.status = 'pending'
GROUP BY t.name`},
	{Field: "StatsActiveByUser", Purpose: "task stats: active work per task and user",
		SQL: `SELECT t.name, w.user_name, COUNT(*)
FROM loanq_work w JOIN loanq_task t ON t.id = w.task_id
WHERE w.disposition IS NULL
GROUP BY t.name, w.user_name`},
}

// SupervisorQuery returns one supervisor query by field name.
func SupervisorQuery(field string) Named {
	for _, n := range SupervisorQueries {
		if n.Field == field {
			return n
		}
	}
	panic("drivers: no supervisor query " + field)
}
