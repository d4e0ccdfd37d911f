package dispatch_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// fast rechecks keep the tests quick; production defaults are 5 s, 10 s, 20 s.
var fast = dispatch.GetOptions{Backoff: []time.Duration{20 * time.Millisecond, 50 * time.Millisecond}, Timeout: 2 * time.Minute}

type fixture struct {
	d   drivers.Driver
	db  *sql.DB
	dsn string
	e   *dispatch.Engine
}

func setup(t *testing.T, dsn string, loans int) *fixture {
	t.Helper()
	d, db := testdb.Migrated(t, dsn)
	testdb.CreateLoans(t, d, db, loans)
	return &fixture{d: d, db: db, dsn: dsn, e: dispatch.New(db, d)}
}

func (f *fixture) task(t *testing.T, spec dispatch.TaskSpec) *dispatch.Task {
	t.Helper()
	if spec.Where == "" {
		spec.Where = "eligible = 1"
	}
	if spec.Order == "" {
		spec.Order = "priority"
	}
	spec.CreatedBy = "admin"
	task, created, err := f.e.Admin().CreateTask(context.Background(), spec)
	if err != nil || !created {
		t.Fatalf("CreateTask %s: created=%v err=%v", spec.Name, created, err)
	}
	return task
}

// engine returns a new engine on its own pool, as another node would have.
func (f *fixture) engine(t *testing.T) *dispatch.Engine {
	_, db := testdb.Open(t, f.dsn)
	return dispatch.New(db, f.d)
}

// audit fails the test on any invariant violation in the final state.
func (f *fixture) audit(t *testing.T) {
	t.Helper()
	findings, err := f.e.Admin().Audit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range findings {
		if x.Count != 0 {
			t.Errorf("audit %s: %d (%s)", x.Check, x.Count, x.Purpose)
		}
	}
}

func (f *fixture) count(t *testing.T, q string, args ...any) int64 {
	t.Helper()
	return testdb.Int(t, f.d, f.db, q, args...)
}

// snapshot summarises the loanq tables (row counts and key sums).
func snapshot(t *testing.T, f *fixture) string {
	return fmt.Sprintf("tasks=%d requests=%d/%d work=%d/%d runs=%d loans=%d",
		f.count(t, "SELECT COUNT(*) FROM loanq_task"),
		f.count(t, "SELECT COUNT(*) FROM loanq_work_request"),
		f.count(t, "SELECT COALESCE(SUM(assigned), 0) FROM loanq_work_request"),
		f.count(t, "SELECT COUNT(*) FROM loanq_work"),
		f.count(t, "SELECT COUNT(*) FROM loanq_work WHERE disposition IS NULL"),
		f.count(t, "SELECT COUNT(*) FROM loanq_query_run"),
		f.count(t, "SELECT COUNT(*) FROM loan"))
}
