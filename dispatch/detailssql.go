package dispatch

import (
	"context"
	"database/sql"
	"strings"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
)

// The statements of a task's display and of work next (details.go,
// next.go): a catalogue of their own (drivers.Catalogue "details"), not
// part of the engine's drivers.Statements; `loanq sql` prints them after
// the engine's. Every dialect sends the portable text. The loans' details
// themselves are read by a statement built per task from its source and
// columns (drivers.LoanDetails), as the criteria query is.
type detailsStatements struct {
	// TaskSetDisplay stores --priority, --show and --link, in the
	// transaction that stores the rest of the definition.
	TaskSetDisplay drivers.Stmt[taskDisplayParams] `purpose:"task: set priority, shown columns and link"`
	// NextCandidates: every task with its priority, when it was created
	// and when anyone last asked it for work (NULL: never), the order of
	// work next (nextOrder).
	NextCandidates drivers.Query[engineio.NoParams, nextCandidateRow] `purpose:"work next: the tasks, their priority and last request"`
}

var detailsCatalogue = drivers.NewCatalogue("details", portableDetails)

func (st *store) detailsSQL() *detailsStatements { return detailsCatalogue.For(st.driver) }

func portableDetails() *detailsStatements {
	return &detailsStatements{
		TaskSetDisplay: drivers.Stmt[taskDisplayParams]{SQL: `UPDATE loanq_task SET priority = :priority, show_columns = :show, link_template = :link WHERE id = :id`},
		// MAX over loanq_work_request_rate_ix (task_id, created_at): one
		// index probe per task.
		NextCandidates: drivers.Query[engineio.NoParams, nextCandidateRow]{SQL: `SELECT t.id, t.name, t.priority, t.created_at,
  (SELECT MAX(r.created_at) FROM loanq_work_request r WHERE r.task_id = t.id) AS last_asked_at
FROM loanq_task t
ORDER BY t.name`},
	}
}

type (
	// taskDisplayParams binds TaskSetDisplay (NULL: nothing shown, no link).
	taskDisplayParams struct {
		ID       int64          `bind:"id"`
		Priority int64          `bind:"priority"`
		Show     sql.NullString `bind:"show"`
		Link     sql.NullString `bind:"link"`
	}
	// nextCandidateRow is a task as work next orders it.
	nextCandidateRow struct {
		ID          int64         `col:"id"`
		Name        string        `col:"name"`
		Priority    int64         `col:"priority"`
		CreatedAt   engineio.Time `col:"created_at"`
		LastAskedAt engineio.Time `col:"last_asked_at"` // zero: never asked
	}
)

// storeDisplay writes a task's priority, shown columns and link in tx.
func (a *Admin) storeDisplay(ctx context.Context, tx drivers.Querier, id int64, priority int, show []string, link string) error {
	text := func(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }
	_, err := a.detailsSQL().TaskSetDisplay.Exec(ctx, tx, taskDisplayParams{ID: id, Priority: int64(priority),
		Show: text(strings.Join(show, ",")), Link: text(link)})
	return err
}

// splitShow reads show_columns back ("" or NULL: none).
func splitShow(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	out := strings.Split(s, ",")
	for i := range out {
		out[i] = strings.TrimSpace(out[i])
	}
	return out
}

// checkDisplay checks --priority and --link (against --show) without a
// database; the columns themselves are checked against the source by
// checkDetails.
func (s *TaskSpec) checkDisplay() error {
	s.Link = strings.TrimSpace(s.Link)
	if err := checkPriority(s.Priority); err != nil {
		return err
	}
	if _, err := ParseShow(strings.Join(s.Show, ",")); err != nil {
		return err
	}
	return CheckLink(s.Link, s.Show)
}

// applyDisplay applies the display changes of c to s.
func (c TaskChange) applyDisplay(s *TaskSpec) {
	if c.Priority != nil {
		s.Priority = *c.Priority
	}
	if c.Show != nil {
		s.Show = *c.Show
	}
	if c.Link != nil {
		s.Link = strings.TrimSpace(*c.Link)
	}
}
