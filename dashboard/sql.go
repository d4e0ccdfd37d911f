package dashboard

import (
	"database/sql"
	"fmt"
	"strings"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
)

// The dashboard's statements (`loanq serve`'s page, /api/dashboard and
// /metrics; docs/dashboard.md): a catalogue of their own (drivers.Catalogue
// "dashboard"), not part of the engine's drivers.Statements, with their
// parameter and row types here. `loanq sql` prints them after the engine's.
// What a dialect says its own way (DashPending and DashActive on MySQL and
// Oracle, through the indexes that hold only active work and pending
// requests there) is in its drivers/<db>/sql.go, catalogueSQL["dashboard"].
//
// Read-only, from loanq's own tables only (never a task's criteria query),
// each through an index where the dialect has one that fits. Ages are
// whole seconds measured against the database clock; "today" is the UTC
// day of the database clock.
//
// A new figure: a field here (a Query with its row type), its portable text
// in portable, a reader in figures.go (a refreshing method, listed in
// refresh), the page (assets/), a metric in metrics.go if Prometheus should
// see it.
type statements struct {
	DashPending drivers.Query[engineio.NoParams, pendingRow] `purpose:"dashboard: pending requests per task and the oldest one's age"`
	DashActive  drivers.Query[activeParams, activeRow]       `purpose:"dashboard: active work per task and user, oldest age, held past the limit"`
	// The work history has no index on disposed_at, so dispositions are
	// counted in two parts split at a "floor" id: rows below it had all
	// ended before today when the floor was read, and never change again
	// (a disposition is set once), so they are counted once an hour; rows
	// from the floor up are a primary-key range, counted at every refresh.
	//
	// DashDoneFloor reads the whole history: run once an hour.
	DashDoneFloor drivers.Query[engineio.NoParams, floorRow] `purpose:"dashboard: the floor id under which the work history no longer changes (hourly)"`
	// DashDoneBefore is run with each new floor.
	DashDoneBefore drivers.Query[floorParams, doneBeforeRow] `purpose:"dashboard: dispositions below the floor id (hourly)"`
	// DashDone: A primary-key range from the floor.
	DashDone drivers.Query[floorParams, doneRow] `purpose:"dashboard: dispositions from the floor id up, in all and today"`
	// DashRuns: the latest criteria-query runs of a task, newest first.
	DashRuns drivers.Query[taskLimitParams, runRow] `purpose:"dashboard: a task's latest criteria-query runs, with their age"`
	// DashDispositions: A task's latest ended assignments, newest assignment
	// first.
	DashDispositions drivers.Query[taskLimitParams, dispositionRow] `purpose:"dashboard: a task's latest dispositions"`

	// The criteria-run histogram: DashRunHistogram sums the query-run log
	// from a floor id up, per task and duration bucket;
	// DashRunHistogramBelow below it (runs never change once logged, so that
	// part is summed once an hour).
	DashRunHistogram      drivers.Query[floorParams, histogramRow]   `purpose:"dashboard: criteria runs per task and duration bucket, from the floor id up"`
	DashRunHistogramBelow drivers.Query[floorParams, histogramRow]   `purpose:"dashboard: criteria runs per task and duration bucket, below the floor id (hourly)"`
	DashRunMaxID          drivers.Query[engineio.NoParams, maxIDRow] `purpose:"dashboard: the highest criteria-run id (the floor)"`
}

// catalogue is compiled for a driver at its first use (Source.sql).
var catalogue = drivers.NewCatalogue("dashboard", portable)

// runDurationBucketsMS are the upper bounds, in milliseconds, of the
// buckets of the criteria-run duration histogram (/metrics): from a fast
// indexed query to the 30 s-and-more queries loanq is built for.
var runDurationBucketsMS = []int64{10, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 120000}

// portable: active rows and pending requests are found through the
// partial indexes that hold only them where the database has partial
// indexes. The work history has no index on disposed_at, so dispositions
// are counted in two parts split at a "floor" id: rows below it had all
// ended before today when the floor was read and never change again, so
// they are counted once an hour; rows from the floor up are a primary-key
// range, counted at every refresh.
func portable() *statements {
	return &statements{
		DashPending: drivers.Query[engineio.NoParams, pendingRow]{SQL: `SELECT task_id, COUNT(*) AS pending, {{age "MIN(created_at)"}} AS oldest_s
FROM loanq_work_request WHERE status = 'pending' AND {{requestAlive "alive_at"}} GROUP BY task_id`},
		DashActive: drivers.Query[activeParams, activeRow]{SQL: `SELECT task_id, user_name, COUNT(*) AS active, {{age "MIN(assigned_at)"}} AS oldest_s,
       COUNT(CASE WHEN {{age "assigned_at"}} >= :hold_s THEN 1 END) AS held
FROM loanq_work WHERE disposition IS NULL GROUP BY task_id, user_name`},
		DashDoneFloor: drivers.Query[engineio.NoParams, floorRow]{SQL: `SELECT MIN(CASE WHEN disposition IS NULL THEN id END) AS active_floor,
       MIN(CASE WHEN disposed_at >= {{startOfToday}} THEN id END) AS today_floor, MAX(id) AS max_id
FROM loanq_work`},
		DashDoneBefore: drivers.Query[floorParams, doneBeforeRow]{SQL: `SELECT task_id, user_name, disposition, COUNT(*) AS n
FROM loanq_work WHERE id < :floor AND disposition IS NOT NULL GROUP BY task_id, user_name, disposition`},
		DashDone: drivers.Query[floorParams, doneRow]{SQL: `SELECT task_id, user_name, disposition, COUNT(*) AS n,
       COUNT(CASE WHEN disposed_at >= {{startOfToday}} THEN 1 END) AS today
FROM loanq_work WHERE id >= :floor AND disposition IS NOT NULL GROUP BY task_id, user_name, disposition`},
		DashRuns: drivers.Query[taskLimitParams, runRow]{SQL: `SELECT id, {{age "started_at"}} AS age_s, duration_ms, rows_found, requests_served, loans_assigned
FROM loanq_query_run WHERE task_id = :task_id ORDER BY id DESC {{limit ":limit"}}`},
		DashDispositions: drivers.Query[taskLimitParams, dispositionRow]{SQL: `SELECT loan_id, user_name, disposition, {{age "disposed_at"}} AS age_s,
       {{secondsBetween "assigned_at" "disposed_at"}} AS held_s, reason, note
FROM loanq_work WHERE task_id = :task_id AND disposition IS NOT NULL ORDER BY id DESC {{limit ":limit"}}`},

		DashRunHistogram:      drivers.Query[floorParams, histogramRow]{SQL: runHistogram(">=")},
		DashRunHistogramBelow: drivers.Query[floorParams, histogramRow]{SQL: runHistogram("<")},
		DashRunMaxID:          drivers.Query[engineio.NoParams, maxIDRow]{SQL: `SELECT MAX(id) AS max_id FROM loanq_query_run`},
	}
}

// runHistogram sums the query-run log per task and duration bucket, for ids
// op the floor.
func runHistogram(op string) string {
	var b strings.Builder
	b.WriteString("CASE")
	for i, le := range runDurationBucketsMS {
		fmt.Fprintf(&b, " WHEN duration_ms <= %d THEN %d", le, i)
	}
	fmt.Fprintf(&b, " ELSE %d END", len(runDurationBucketsMS))
	bucket := b.String()
	return `SELECT task_id, ` + bucket + ` AS bucket, COUNT(*) AS runs, SUM(duration_ms) AS total_ms,
       SUM(requests_served) AS served, SUM(loans_assigned) AS assigned
FROM loanq_query_run WHERE id ` + op + ` :floor
GROUP BY task_id, ` + bucket
}

// The parameters (bind tags as in drivers/params.go).
type (
	// activeParams is the age, in seconds, past which work counts as held
	// long.
	activeParams struct {
		HoldSeconds int64 `bind:"hold_s"`
	}
	// floorParams is an id under or from which rows are counted.
	floorParams struct {
		Floor int64 `bind:"floor"`
	}
	// taskLimitParams is a task and a row count.
	taskLimitParams struct {
		TaskID int64 `bind:"task_id"`
		Limit  int   `bind:"limit"`
	}
)

// The rows (col tags as in drivers/rows.go).
type (
	// pendingRow is a task's pending requests and the oldest one's age.
	pendingRow struct {
		TaskID  int64         `col:"task_id"`
		Pending int           `col:"pending"`
		OldestS sql.NullInt64 `col:"oldest_s"`
	}
	// activeRow is a user's active work in a task.
	activeRow struct {
		TaskID  int64         `col:"task_id"`
		User    string        `col:"user_name"`
		Active  int           `col:"active"`
		OldestS sql.NullInt64 `col:"oldest_s"`
		Held    int           `col:"held"`
	}
	// floorRow is the work history's floors (each NULL when none).
	floorRow struct {
		ActiveFloor sql.NullInt64 `col:"active_floor"`
		TodayFloor  sql.NullInt64 `col:"today_floor"`
		MaxID       sql.NullInt64 `col:"max_id"`
	}
	// doneBeforeRow is a count of dispositions per task, user and kind.
	doneBeforeRow struct {
		TaskID      int64  `col:"task_id"`
		User        string `col:"user_name"`
		Disposition string `col:"disposition"`
		N           int    `col:"n"`
	}
	// doneRow is doneBeforeRow with how many were made today.
	doneRow struct {
		TaskID      int64  `col:"task_id"`
		User        string `col:"user_name"`
		Disposition string `col:"disposition"`
		N           int    `col:"n"`
		Today       int    `col:"today"`
	}
	// runRow is one of a task's latest criteria-query runs.
	runRow struct {
		ID             int64 `col:"id"`
		AgeS           int64 `col:"age_s"`
		DurationMS     int64 `col:"duration_ms"`
		RowsFound      int   `col:"rows_found"`
		RequestsServed int   `col:"requests_served"`
		LoansAssigned  int   `col:"loans_assigned"`
	}
	// dispositionRow is one of a task's latest dispositions.
	dispositionRow struct {
		LoanID      string         `col:"loan_id"`
		User        string         `col:"user_name"`
		Disposition string         `col:"disposition"`
		AgeS        sql.NullInt64  `col:"age_s"`
		HeldS       sql.NullInt64  `col:"held_s"`
		Reason      sql.NullString `col:"reason"`
		Note        sql.NullString `col:"note"`
	}
	// histogramRow is the criteria runs of a task in one duration bucket.
	histogramRow struct {
		TaskID int64 `col:"task_id"`
		// Bucket is the index in runDurationBucketsMS of the first bound
		// the duration does not exceed, len(runDurationBucketsMS) above
		// them all.
		Bucket int64 `col:"bucket"`
		Runs   int64 `col:"runs"`
		// Sums: a DECIMAL on MySQL and Oracle, hence floats.
		TotalMS  sql.NullFloat64 `col:"total_ms"`
		Served   sql.NullFloat64 `col:"served"`
		Assigned sql.NullFloat64 `col:"assigned"`
	}
	// maxIDRow is a highest id (NULL: none).
	maxIDRow struct {
		MaxID sql.NullInt64 `col:"max_id"`
	}
)

// sql is the dashboard's catalogue compiled for the source's driver.
func (s *Source) sql() *statements { return catalogue.For(s.Driver) }
