package dispatch

import (
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
)

// The statements of `loanq task delete` (DeleteTask, tasks.go): a
// catalogue of their own (drivers.Catalogue "taskdelete"), not part of the
// engine's drivers.Statements; `loanq sql` prints them after the engine's.
// Every dialect sends the portable text but MySQL's DeleteHistory
// (drivers/mysql/sql.go). The delete also locks the task
// (LockWait) and empties its pool (PoolClear), statements of the engine.
type taskDeleteStatements struct {
	ActiveWorkCount drivers.Query[engineio.TaskParams, engineio.Count] `purpose:"task delete: active assignments that deleting the task would drop"`
	DeleteHistory   drivers.Stmt[engineio.TaskParams]                  `purpose:"task delete: the history events of the task's work rows (before the rows)"`
	DeleteWork      drivers.Stmt[engineio.TaskParams]                  `purpose:"task delete: the task's assignments and their history (children of requests, first)"`
	DeleteRequests  drivers.Stmt[engineio.TaskParams]                  `purpose:"task delete: the task's work requests"`
	DeleteQueryRuns drivers.Stmt[engineio.TaskParams]                  `purpose:"task delete: the task's criteria-query log"`
	DeleteTaskUsers drivers.Stmt[engineio.TaskParams]                  `purpose:"task delete: the task's per-user cap lock rows (strategy rows)"`
	DeleteTaskRow   drivers.Stmt[engineio.TaskParams]                  `purpose:"task delete: the task itself, last (the others reference it)"`
}

var taskDeleteCatalogue = drivers.NewCatalogue("taskdelete", portableTaskDelete)

// taskDeleteSQL is task delete's catalogue compiled for the engine's
// driver.
func (a *Admin) taskDeleteSQL() *taskDeleteStatements { return taskDeleteCatalogue.For(a.driver) }

func portableTaskDelete() *taskDeleteStatements {
	return &taskDeleteStatements{
		ActiveWorkCount: drivers.Query[engineio.TaskParams, engineio.Count]{SQL: `SELECT COUNT(*) AS n FROM loanq_work WHERE task_id = :task_id AND disposition IS NULL`},
		DeleteHistory: drivers.Stmt[engineio.TaskParams]{SQL: `DELETE FROM loanq_history
WHERE work_id IN (SELECT w.id FROM loanq_work w WHERE w.task_id = :task_id)`},
		DeleteWork:      drivers.Stmt[engineio.TaskParams]{SQL: `DELETE FROM loanq_work WHERE task_id = :task_id`},
		DeleteRequests:  drivers.Stmt[engineio.TaskParams]{SQL: `DELETE FROM loanq_work_request WHERE task_id = :task_id`},
		DeleteQueryRuns: drivers.Stmt[engineio.TaskParams]{SQL: `DELETE FROM loanq_query_run WHERE task_id = :task_id`},
		DeleteTaskUsers: drivers.Stmt[engineio.TaskParams]{SQL: `DELETE FROM loanq_task_user WHERE task_id = :task_id`},
		DeleteTaskRow:   drivers.Stmt[engineio.TaskParams]{SQL: `DELETE FROM loanq_task WHERE id = :task_id`},
	}
}
