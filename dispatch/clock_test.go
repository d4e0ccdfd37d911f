package dispatch_test

import (
	"github.com/loanq/loanq/drivers/engineio"

	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// A `return --after` disposition's times come from the database clock, not
// the node's: the disposition is written through a connection whose database
// clock is moved to 2030, and its disposed_at and return_at follow that clock
// exactly, and so does the start of a criteria run (the clock minus the time
// since the run started, computed by the database). MariaDB moves a session's clock with its `timestamp` variable (the
// driver sets DSN parameters on every connection); PostgreSQL resolves
// clock_timestamp() through search_path, and a function of that name in a
// schema placed before pg_catalog stands in for it. SQLite's clock is the
// process's own and cannot be moved per connection.
func TestReturnTimeFollowsMovedDatabaseClock(t *testing.T) {
	moved := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, dialect := range []string{"postgres", "mysql"} {
		t.Run(dialect, func(t *testing.T) {
			dsn := testdb.Fresh(t, dialect)
			f := setup(t, dsn, 1)
			ctx := context.Background()
			f.task(t, dispatch.TaskSpec{Name: "clock"})
			if _, err := f.e.Get(ctx, "clock", "oliver", 1, fast); err != nil {
				t.Fatal(err)
			}
			sep := "?"
			if strings.Contains(dsn, "?") {
				sep = "&"
			}
			var movedDSN string
			switch dialect {
			case "mysql":
				movedDSN = dsn + sep + "timestamp=" + strconv.FormatInt(moved.Unix(), 10)
			case "postgres":
				testdb.Exec(t, f.d, f.db, "CREATE SCHEMA fakeclock")
				testdb.Exec(t, f.d, f.db, "CREATE FUNCTION fakeclock.clock_timestamp() RETURNS timestamptz LANGUAGE sql AS $$ SELECT timestamptz '2030-01-01 00:00:00+00' $$")
				movedDSN = dsn + sep + "search_path=fakeclock,public,pg_catalog"
			}
			d2, db2 := testdb.Open(t, movedDSN)
			e2 := dispatch.New(db2, d2)
			clk, err := d2.Statements().Now.One(ctx, db2, engineio.NoParams{})
			if now := clk.Now.T; err != nil || !now.Equal(moved) {
				t.Fatalf("the moved connection's database clock reads %s (%v), want %s", now, err, moved)
			}
			if _, err := e2.Dispose(ctx, "clock", "1", "oliver", "return", 2*time.Hour, true); err != nil {
				t.Fatal(err)
			}
			var disposed, returnAt time.Time
			if err := f.db.QueryRowContext(ctx, "SELECT disposed_at, return_at FROM loanq_work WHERE disposition = 'return'").Scan(&disposed, &returnAt); err != nil {
				t.Fatal(err)
			}
			if !disposed.Equal(moved) || !returnAt.Equal(moved.Add(2*time.Hour)) {
				t.Fatalf("disposed_at %s, return_at %s: want %s and %s, from the database clock",
					disposed.UTC(), returnAt.UTC(), moved, moved.Add(2*time.Hour))
			}

			// A criteria run's start is the database clock at the start of
			// the run: the clock (frozen here) minus the time since, so at
			// least the run's --query-delay before the clock.
			delay := 300 * time.Millisecond
			task := f.task(t, dispatch.TaskSpec{Name: "clock-run", QueryDelay: delay})
			if _, err := e2.Get(ctx, "clock-run", "oliver", 1, fast); err != nil {
				t.Fatal(err)
			}
			runs, err := f.e.Admin().Runs(ctx, task)
			if err != nil || len(runs) != 1 {
				t.Fatalf("runs: %+v, %v", runs, err)
			}
			r := runs[0]
			if ago := moved.Sub(r.StartedAt); ago < delay || ago < time.Duration(r.DurationMS)*time.Millisecond || ago > delay+time.Minute {
				t.Fatalf("run started at %s (duration %d ms), %s before the database clock %s: want at least its duration before it, from that clock",
					r.StartedAt, r.DurationMS, ago, moved)
			}
		})
	}
}
