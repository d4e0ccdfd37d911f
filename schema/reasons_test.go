package schema_test

import (
	"context"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/testkit/testdb"
	"github.com/loanq/loanq/schema"
)

// reasonsMigration added the reason codes and the new tasks' default max
// hold (docs/reasons.md, docs/abandoned-work.md).
const reasonsMigration = 19

// Migration 00019 changes no task's max hold, down or up: a task created
// before it without --max-hold keeps "never", one with 1h keeps 1h.
func TestReasonsMigrationKeepsTasks(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		d, db := testdb.Migrated(t, dsn)
		testdb.CreateLoans(t, d, db, 3)
		e := dispatch.New(db, d)
		for _, s := range []dispatch.TaskSpec{
			{Name: "old-never", Where: "eligible = 1", CreatedBy: "admin"},
			{Name: "old-hour", Where: "eligible = 1", MaxHold: time.Hour, CreatedBy: "admin"},
		} {
			if _, _, err := e.Admin().CreateTask(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		check := func(when string) {
			t.Helper()
			if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_task WHERE name = 'old-never' AND max_hold_ms IS NULL"); n != 1 {
				t.Errorf("%s: the task without a max hold got one", when)
			}
			if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_task WHERE name = 'old-hour' AND max_hold_ms = 3600000"); n != 1 {
				t.Errorf("%s: the task with a max hold of 1h lost it", when)
			}
		}
		p, err := schema.NewProvider(d, db)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.DownTo(ctx, reasonsMigration-1); err != nil {
			t.Fatalf("migrate down to before %05d: %v", reasonsMigration, err)
		}
		check("after down of 00019")
		if _, err := schema.Up(ctx, d, db); err != nil {
			t.Fatal(err)
		}
		check("after up of 00019")
		if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_task WHERE reasons IS NULL AND require_reason IS NULL"); n != 2 {
			t.Errorf("after up: %d tasks without reason codes, want 2", n)
		}
	})
}
