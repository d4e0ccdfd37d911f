package dispatch

import (
	"database/sql"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
)

// The statements of reasons and notes (docs/reasons.md): a task's declared
// codes, read and written by id. A catalogue of their own ("reasons"); the
// disposition itself is the engine's DisposeLoan, which writes the reason
// and the note, and the database's trigger (migration 00019) checks them.
type reasonStatements struct {
	TaskReasons    drivers.Query[engineio.TaskParams, taskReasonsRow] `purpose:"a task's declared reason codes and the actions that require one"`
	TaskSetReasons drivers.Stmt[taskReasonsParams]                    `purpose:"set a task's reason codes and required actions (task create, task update)"`
}

type taskReasonsRow struct {
	Reasons sql.NullString `col:"reasons"`
	Require sql.NullString `col:"require_reason"`
}

type taskReasonsParams struct {
	TaskID  int64          `bind:"task_id"`
	Reasons sql.NullString `bind:"reasons"`
	Require sql.NullString `bind:"require_reason"`
}

var reasonCatalogue = drivers.NewCatalogue("reasons", portableReasons)

func (st *store) reasonSQL() *reasonStatements { return reasonCatalogue.For(st.driver) }

func portableReasons() *reasonStatements {
	return &reasonStatements{
		TaskReasons:    drivers.Query[engineio.TaskParams, taskReasonsRow]{SQL: `SELECT reasons, require_reason FROM loanq_task WHERE id = :task_id`},
		TaskSetReasons: drivers.Stmt[taskReasonsParams]{SQL: `UPDATE loanq_task SET reasons = :reasons, require_reason = :require_reason WHERE id = :task_id`},
	}
}
