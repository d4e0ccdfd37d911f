package dispatch

import (
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
)

// The supervisor view's statements (supervise.go: `loanq work list`,
// `loanq task stats`; docs/algorithm.md, "The supervisor view"): a
// catalogue of their own (drivers.Catalogue "supervise"), not part of the
// engine's drivers.Statements; `loanq sql` prints them after the engine's.
// Every dialect sends the portable text. The reads of work list and of the
// pending and active counts bind nothing and read no clock: ages are
// computed from the database clock read with Now.
type superviseStatements struct {
	ActiveWorkAll     drivers.Query[engineio.NoParams, activeAllRow]       `purpose:"work list: everyone's active work, oldest first (task, loan, user, assigned_at)"`
	StatsPending      drivers.Query[engineio.NoParams, taskCountRow]       `purpose:"task stats: pending requests per task"`
	StatsActiveByUser drivers.Query[engineio.NoParams, taskUserCountRow]   `purpose:"task stats: active work per task and user"`
	StatsDispositions drivers.Query[windowParams, taskDispositionCountRow] `purpose:"task stats: dispositions in the last window, per task and kind"`
	// StatsRuns: the criteria-query runs started in the last window (by the
	// database clock), newest first; the caller computes the percentiles, as
	// the dialects share no percentile function.
	StatsRuns drivers.Query[windowParams, statsRunRow] `purpose:"task stats: criteria-query runs in the last window"`
}

var superviseCatalogue = drivers.NewCatalogue("supervise", portableSupervise)

// superviseSQL is the supervisor view's catalogue compiled for the
// engine's driver.
func (a *Admin) superviseSQL() *superviseStatements { return superviseCatalogue.For(a.driver) }

func portableSupervise() *superviseStatements {
	return &superviseStatements{
		ActiveWorkAll: drivers.Query[engineio.NoParams, activeAllRow]{SQL: `SELECT t.name, w.loan_id, w.user_name, w.assigned_at, t.key_kind
FROM loanq_work w JOIN loanq_task t ON t.id = w.task_id
WHERE w.disposition IS NULL
ORDER BY w.assigned_at, w.id`},
		StatsPending: drivers.Query[engineio.NoParams, taskCountRow]{SQL: `SELECT t.name, COUNT(*) AS n
FROM loanq_work_request r JOIN loanq_task t ON t.id = r.task_id
WHERE r.status = 'pending' AND {{requestAlive "r.alive_at"}}
GROUP BY t.name`},
		StatsActiveByUser: drivers.Query[engineio.NoParams, taskUserCountRow]{SQL: `SELECT t.name, w.user_name, COUNT(*) AS n
FROM loanq_work w JOIN loanq_task t ON t.id = w.task_id
WHERE w.disposition IS NULL
GROUP BY t.name, w.user_name`},
		StatsDispositions: drivers.Query[windowParams, taskDispositionCountRow]{SQL: `SELECT t.name, w.disposition, COUNT(*) AS n
FROM loanq_work w JOIN loanq_task t ON t.id = w.task_id
WHERE w.disposition IS NOT NULL AND w.disposed_at > {{nowMinusMs ":window_ms"}}
GROUP BY t.name, w.disposition`},
		StatsRuns: drivers.Query[windowParams, statsRunRow]{SQL: `SELECT t.name, r.duration_ms, r.requests_served
FROM loanq_query_run r JOIN loanq_task t ON t.id = r.task_id
WHERE r.started_at > {{nowMinusMs ":window_ms"}}
ORDER BY r.started_at DESC, r.id DESC`},
	}
}

// windowParams is a time window ending now, in milliseconds (bind tags as
// in drivers/params.go).
type windowParams struct {
	WindowMS int64 `bind:"window_ms"`
}

// The rows (col tags as in drivers/rows.go).
type (
	// activeAllRow is one active assignment (ActiveWorkAll).
	activeAllRow struct {
		Task       string        `col:"name"`
		LoanID     string        `col:"loan_id"`
		User       string        `col:"user_name"`
		AssignedAt engineio.Time `col:"assigned_at"`
		KeyKind    string        `col:"key_kind"`
	}
	// taskCountRow is a count per task (by name).
	taskCountRow struct {
		Task string `col:"name"`
		N    int64  `col:"n"`
	}
	// taskUserCountRow is a count per task (by name) and user.
	taskUserCountRow struct {
		Task string `col:"name"`
		User string `col:"user_name"`
		N    int64  `col:"n"`
	}
	// taskDispositionCountRow is a count per task (by name) and
	// disposition.
	taskDispositionCountRow struct {
		Task        string `col:"name"`
		Disposition string `col:"disposition"`
		N           int64  `col:"n"`
	}
	// statsRunRow is one criteria-query run of the stats window.
	statsRunRow struct {
		Task           string `col:"name"`
		DurationMS     int64  `col:"duration_ms"`
		RequestsServed int64  `col:"requests_served"`
	}
)
