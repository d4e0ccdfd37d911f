package bench

import (
	"context"
	"database/sql"
	"errors"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/dsn"
)

// session is what every bench run (items, engine, cli) sets up once and
// takes down once: the database and its driver, the bench's catalogue, and
// then, once the run's checks have passed, the item table and the bench's
// task. close removes what the run made, in reverse order, even when the run
// failed or its context was cancelled.
type session struct {
	d      drivers.Driver
	db     *sql.DB
	target dsn.DSN
	c      *Catalogue
	e      *dispatch.Engine

	drop  func() error // the item table's, once made
	tasks []string     // bench tasks made, deleted by close
}

// openSession opens the DSN (checking its schema) and compiles the bench's
// catalogue for its dialect. It makes nothing in the database.
func openSession(ctx context.Context, raw string, mustExist bool) (*session, error) {
	d, db, target, err := open(ctx, raw, mustExist)
	if err != nil {
		return nil, err
	}
	c, err := For(d)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &session{d: d, db: db, target: target, c: c, e: dispatch.New(db, d)}, nil
}

// start names the server and makes the item table: call it once the run's
// checks have passed, so that a refused run changes nothing.
func (s *session) start(ctx context.Context) (server string, err error) {
	if server, err = serverVersion(ctx, s.db, s.c); err != nil {
		return "", err
	}
	if s.drop, err = createTables(ctx, s.db, s.c); err != nil {
		return "", err
	}
	return server, nil
}

// task creates the run's task over a freshly filled item table (deleting a
// killed run's task of the same name first); close deletes it.
func (s *session) task(ctx context.Context, spec dispatch.TaskSpec) error {
	s.tasks = append(s.tasks, spec.Name)
	return replaceTask(ctx, s.e.Admin(), spec)
}

// close deletes the run's tasks, drops the item table and closes the
// database, joining what fails to *err.
func (s *session) close(ctx context.Context, err *error) {
	var errs []error
	for _, name := range s.tasks {
		errs = append(errs, removeTask(ctx, s.e.Admin(), name))
	}
	if s.drop != nil {
		errs = append(errs, s.drop())
	}
	errs = append(errs, s.db.Close())
	*err = errors.Join(append([]error{*err}, errs...)...)
}
