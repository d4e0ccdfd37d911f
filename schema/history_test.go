package schema_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/testkit/testdb"
	"github.com/loanq/loanq/schema"
)

// historyMigration added loanq_history and its triggers (docs/retention.md,
// "Export, then prune").
const historyMigration = 21

// Migration 00021 writes the events of the history that was there before
// it: an assignment per work row at its assigned_at, a disposition per
// disposed row at its disposed_at, in time order; down and up again gives
// the same events.
func TestHistoryMigrationBackfills(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		d, db := testdb.Migrated(t, dsn)
		testdb.CreateLoans(t, d, db, 10)
		e := dispatch.New(db, d)
		if _, _, err := e.Admin().CreateTask(ctx, dispatch.TaskSpec{Name: "bf", Where: "eligible = 1", CreatedBy: "admin"}); err != nil {
			t.Fatal(err)
		}
		p, err := schema.NewProvider(d, db)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.DownTo(ctx, historyMigration-1); err != nil {
			t.Fatalf("migrate down to before %05d: %v", historyMigration, err)
		}
		// History written before the migration: 4 loans, 2 disposed, the
		// first disposition an hour after the second assignment.
		r, err := e.Get(ctx, "bf", "ann", 4, dispatch.GetOptions{Timeout: time.Minute})
		if err != nil || r.Assigned != 4 {
			t.Fatalf("get: %+v %v", r, err)
		}
		for _, l := range r.Loans[:2] {
			if _, err := e.Dispose(ctx, "bf", l.Text, "ann", dispatch.Complete, 0, false); err != nil {
				t.Fatal(err)
			}
		}
		dl := d.Dialect()
		testdb.Exec(t, d, db, "UPDATE loanq_work SET assigned_at = "+dl.NowMinusMillis("7200000")+", disposed_at = CASE WHEN disposed_at IS NULL THEN NULL ELSE "+dl.NowMinusMillis("3600000")+" END")
		if _, err := schema.Up(ctx, d, db); err != nil {
			t.Fatal(err)
		}
		events := func() string {
			t.Helper()
			rows, err := db.QueryContext(ctx, "SELECT h.work_id, h.event, CASE WHEN h.event = 'assigned' AND h.event_at = w.assigned_at THEN 1 WHEN h.event = 'disposed' AND h.event_at = w.disposed_at THEN 1 ELSE 0 END AS at_ok FROM loanq_history h JOIN loanq_work w ON w.id = h.work_id ORDER BY h.id")
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var out string
			for rows.Next() {
				var work, ok int64
				var ev string
				if err := rows.Scan(&work, &ev, &ok); err != nil {
					t.Fatal(err)
				}
				out += fmt.Sprintf("%d %s %d; ", work, ev, ok)
			}
			return out
		}
		w := testdb.Int(t, d, db, "SELECT MIN(id) FROM loanq_work")
		// The four assignments (same time: work id order), then the two
		// dispositions, each at its row's time.
		want := fmt.Sprintf("%d assigned 1; %d assigned 1; %d assigned 1; %d assigned 1; ", w, w+1, w+2, w+3)
		disposed := testdb.Int(t, d, db, "SELECT MIN(id) FROM loanq_work WHERE disposition IS NOT NULL")
		want += fmt.Sprintf("%d disposed 1; %d disposed 1; ", disposed, disposed+1)
		if got := events(); got != want {
			t.Errorf("backfilled events:\n got %s\nwant %s", got, want)
		}
		if _, err := p.DownTo(ctx, historyMigration-1); err != nil {
			t.Fatal(err)
		}
		if _, err := schema.Up(ctx, d, db); err != nil {
			t.Fatal(err)
		}
		if got := events(); got != want {
			t.Errorf("after down and up again:\n got %s\nwant %s", got, want)
		}
		// And the triggers are back: a disposition now is an event.
		if _, err := e.Dispose(ctx, "bf", r.Loans[2].Text, "ann", dispatch.Never, 0, false); err != nil {
			t.Fatal(err)
		}
		if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_history WHERE event = 'disposed'"); n != 3 {
			t.Errorf("%d dispositions after one more, want 3", n)
		}
	})
}
