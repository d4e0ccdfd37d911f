package dispatch

import (
	"database/sql"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
)

// ReportStatements are the reads of a task's history that the demo's
// per-task report (demo/summary.go) and the bench's checks of a run
// (bench/engine.go, bench/cli.go) make: a catalogue of their own
// (drivers.Catalogue "report"), not part of the engine's
// drivers.Statements; `loanq sql` prints them after the engine's. Every
// dialect sends the portable text.
type ReportStatements struct {
	RequestsByUser drivers.Query[engineio.TaskParams, UserStatusCountRow]      `purpose:"report: a task's requests by user and status"`
	WorkByUser     drivers.Query[engineio.TaskParams, UserDispositionCountRow] `purpose:"report: a task's assignments by user and disposition (NULL: active)"`
	QueryRunTotals drivers.Query[engineio.TaskParams, RunTotalsRow]            `purpose:"report: a task's criteria-query runs, requests served and loans assigned"`
	WorkDuplicates drivers.Query[engineio.TaskParams, DuplicatesRow]           `purpose:"bench --target engine: a task's work rows, and how many of them assign a loan a second time"`
	WorkInOrder    drivers.Query[engineio.TaskParams, WorkLoanRow]             `purpose:"bench --target engine: a task's loans in the order their work rows were inserted (the rounds' priority order)"`
}

var reportCatalogue = drivers.NewCatalogue("report", portableReport)

// ReportSQL returns the report statements compiled for d.
func ReportSQL(d drivers.Driver) *ReportStatements { return reportCatalogue.For(d) }

func portableReport() *ReportStatements {
	return &ReportStatements{
		RequestsByUser: drivers.Query[engineio.TaskParams, UserStatusCountRow]{SQL: `SELECT user_name, status, COUNT(*) AS n FROM loanq_work_request WHERE task_id = :task_id GROUP BY user_name, status`},
		WorkByUser:     drivers.Query[engineio.TaskParams, UserDispositionCountRow]{SQL: `SELECT user_name, disposition, COUNT(*) AS n FROM loanq_work WHERE task_id = :task_id GROUP BY user_name, disposition`},
		QueryRunTotals: drivers.Query[engineio.TaskParams, RunTotalsRow]{SQL: `SELECT COUNT(*) AS runs, COALESCE(SUM(requests_served), 0) AS served, COALESCE(SUM(loans_assigned), 0) AS assigned FROM loanq_query_run WHERE task_id = :task_id`},
		WorkDuplicates: drivers.Query[engineio.TaskParams, DuplicatesRow]{SQL: `SELECT COUNT(*) AS n, COUNT(*) - COUNT(DISTINCT loan_id) AS duplicates FROM loanq_work WHERE task_id = :task_id`},
		WorkInOrder:    drivers.Query[engineio.TaskParams, WorkLoanRow]{SQL: `SELECT loan_id FROM loanq_work WHERE task_id = :task_id ORDER BY id`},
	}
}

// The report's rows (col tags as in drivers/rows.go).
type (
	// UserStatusCountRow is a count per user and request status.
	UserStatusCountRow struct {
		User   string `col:"user_name"`
		Status string `col:"status"`
		N      int64  `col:"n"`
	}
	// UserDispositionCountRow is a count per user and disposition (NULL:
	// active).
	UserDispositionCountRow struct {
		User        string         `col:"user_name"`
		Disposition sql.NullString `col:"disposition"`
		N           int64          `col:"n"`
	}
	// RunTotalsRow is a task's criteria-query runs, requests served and
	// loans assigned.
	RunTotalsRow struct {
		Runs     int64 `col:"runs"`
		Served   int64 `col:"served"`
		Assigned int64 `col:"assigned"`
	}
	// WorkLoanRow is one work row's loan key.
	WorkLoanRow struct {
		Loan string `col:"loan_id"`
	}
	// DuplicatesRow is a task's work rows and how many assign a loan again.
	DuplicatesRow struct {
		N          int64 `col:"n"`
		Duplicates int64 `col:"duplicates"`
	}
)
