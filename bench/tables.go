package bench

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/problem"
)

// The bench owns its objects: the item table (and Oracle's claim procedure)
// exist only while `loanq bench` runs. createTables drops what a killed run
// left and creates them afresh; the returned function drops them again and
// is deferred by every run, so a production schema never keeps them (`loanq
// migrate` creates loanq's own tables only).

// cleanupTimeout bounds the clean-up after a run, which runs even when the
// run's context was cancelled (Ctrl-C).
const cleanupTimeout = 30 * time.Second

// createTables creates the bench's objects and returns the function that
// drops them. The drop uses a context of its own: an interrupted run still
// removes its table.
func createTables(ctx context.Context, db *sql.DB, c *Catalogue) (drop func() error, err error) {
	if err := execAll(ctx, db, c.Drop, "dropping a previous run's bench table"); err != nil {
		return nil, err
	}
	if err := execAll(ctx, db, c.Create, "creating the bench table (the bench's user needs the right to create tables)"); err != nil {
		_ = execAll(context.WithoutCancel(ctx), db, c.Drop, "")
		return nil, err
	}
	return func() error {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		return execAll(dctx, db, c.Drop, "dropping the bench table")
	}, nil
}

func execAll(ctx context.Context, db *sql.DB, stmts []string, doing string) error {
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", doing, err)
		}
	}
	return nil
}

// benchTasks are the names of the tasks the benches create; a task of any
// other name belongs to the database's users.
var benchTasks = map[string]bool{EngineTask: true, CLITask: true}

// refuseUserTasks refuses a database that holds tasks of its users, unless
// allowed: the engine and CLI benches create a task of their own, load the
// server with work gets, and are meant for a database of their own.
func refuseUserTasks(ctx context.Context, e *dispatch.Engine, allow bool) error {
	if allow {
		return nil
	}
	tasks, err := e.Tasks(ctx)
	if err != nil {
		return fmt.Errorf("listing the database's tasks: %w", err)
	}
	var users []string
	for _, t := range tasks {
		if !benchTasks[t.Name] {
			users = append(users, t.Name)
		}
	}
	if len(users) == 0 {
		return nil
	}
	shown := users
	if len(shown) > 5 {
		shown = append(shown[:5:5], "…")
	}
	return problem.Usagef("this database holds %d task(s) of its users (%s): run the bench on a database of its own, or give --allow-user-tasks to run it here anyway (it leaves no task, request or work row behind)",
		len(users), strings.Join(shown, ", "))
}

// removeTask deletes a bench task with its history (requests, work, query
// runs, pool), with a context of its own like the table's drop.
func removeTask(ctx context.Context, e *dispatch.Admin, name string) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if _, err := e.DeleteTask(dctx, name, true); err != nil && problem.KindOf(err) != problem.Usage {
		return fmt.Errorf("removing the bench task %s: %w", name, err)
	}
	return nil
}
