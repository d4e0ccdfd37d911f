package dashboard

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// seeded is a migrated database with two tasks and some work in it.
func seeded(t testing.TB, dsn string) *Source {
	t.Helper()
	d, db := testdb.Migrated(t, dsn)
	testdb.CreateLoans(t, d, db, 40)
	e := dispatch.New(db, d)
	ctx := context.Background()
	for _, name := range []string{"alpha", "beta"} {
		if _, _, err := e.Admin().CreateTask(ctx, dispatch.TaskSpec{Name: name, Where: "eligible = 1", Order: "priority", CreatedBy: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	for i, u := range []string{"ana", "ben", "ana"} {
		r, err := e.Get(ctx, []string{"alpha", "beta"}[i%2], u, 3, dispatch.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Dispose(ctx, r.Task, r.Loans[0].String(), u, "complete", 0, false); err != nil {
			t.Fatal(err)
		}
	}
	return &Source{DB: db, Driver: d, Admin: e.Admin(), TTL: time.Hour}
}

// Any number of concurrent viewers within one cache interval cost one
// refresh: the figures are read once and shared.
func TestViewersShareOneRefresh(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		src := seeded(t, dsn)
		var wg sync.WaitGroup
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := src.Get(context.Background()); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if n := src.Refreshes(); n != 1 {
			t.Fatalf("20 viewers within one interval: %d refreshes, want 1", n)
		}
		snap, _ := src.Get(context.Background())
		// 2 tasks: the task list, pending, active, done, the run histogram and
		// the latest runs of each task; the first refresh also reads the floor.
		if snap.Refresh.Queries != 11 || snap.TotalActive != 6 || snap.TotalToday != 3 {
			t.Fatalf("refresh: %+v, active %d, done today %d; want 11 queries, 6 active, 3 done", snap.Refresh, snap.TotalActive, snap.TotalToday)
		}
		src.TTL = 0
		if snap, _ = src.Get(context.Background()); snap.Refresh.Queries != 7 {
			t.Fatalf("second refresh: %+v; want 7 queries (the floor is kept)", snap.Refresh)
		}
	})
}

// Dispositions and criteria-query runs are counted below and above a floor
// id that is raised once an hour: work that was active when the floor was
// read and ended later, and new work and runs, must be counted exactly,
// before and after the floor moves.
func TestDispositionsAcrossTheFloor(t *testing.T) {
	// Serial: each dialect sets the package's floorSlack for its run.
	testdb.EachSerial(t, func(t *testing.T, dsn string) {
		floorSlack = 0 // so that the floor really splits the small history
		t.Cleanup(func() { floorSlack = 1000 })
		src := seeded(t, dsn)
		src.TTL = 0
		ctx := context.Background()
		// The work ended so far ended long ago: below the floor.
		old, recent := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC)
		testdb.Exec(t, src.Driver, src.DB, "UPDATE loanq_work SET disposed_at = ? WHERE disposition IS NOT NULL", old)
		check := func(when string) {
			t.Helper()
			snap, err := src.Get(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range snap.Tasks {
				runs := testdb.Int(t, src.Driver, src.DB, `SELECT COUNT(*) FROM loanq_query_run r JOIN loanq_task t ON t.id = r.task_id WHERE t.name = ?`, f.Name)
				served := testdb.Int(t, src.Driver, src.DB, `SELECT SUM(requests_served) FROM loanq_query_run r JOIN loanq_task t ON t.id = r.task_id WHERE t.name = ?`, f.Name)
				if f.Runs != runs || f.RequestsServed != served || int64(f.DurationBucketsC[len(f.DurationBucketsC)-1]) != runs {
					t.Errorf("%s: %s: %d runs serving %d requests (histogram count %d); the database has %d and %d", when, f.Name,
						f.Runs, f.RequestsServed, f.DurationBucketsC[len(f.DurationBucketsC)-1], runs, served)
				}
				for _, kind := range Dispositions {
					q := `SELECT COUNT(*) FROM loanq_work w JOIN loanq_task t ON t.id = w.task_id WHERE t.name = ? AND w.disposition = ?`
					all := testdb.Int(t, src.Driver, src.DB, q, f.Name, kind)
					today := testdb.Int(t, src.Driver, src.DB, q+" AND w.disposed_at > ?", f.Name, kind, recent)
					if int64(f.DoneTotal[kind]) != all || int64(f.DoneToday[kind]) != today {
						t.Errorf("%s: %s %s: %d in all, %d today; the database has %d and %d", when, f.Name, kind,
							f.DoneTotal[kind], f.DoneToday[kind], all, today)
					}
				}
			}
		}
		check("first refresh")
		floor := src.floor
		if floor <= 1 || len(src.below) == 0 {
			t.Fatalf("floor %d with %d counts below it: the test does not split the history", floor, len(src.below))
		}
		// End every active item (all were above the floor), and add new work.
		for _, u := range []string{"ana", "ben"} {
			items, err := dispatch.New(src.DB, src.Driver).Pipeline(ctx, u, "")
			if err != nil {
				t.Fatal(err)
			}
			for i, it := range items {
				if _, err := dispatch.New(src.DB, src.Driver).Dispose(ctx, it.Task, it.LoanID.String(), u, Dispositions[i%3], 0, false); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := dispatch.New(src.DB, src.Driver).Get(ctx, "beta", "chloe", 2, dispatch.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		check("after dispositions, same floor")
		if src.floor != floor {
			t.Fatalf("the floor moved within the hour: %d then %d", floor, src.floor)
		}
		src.floorAt = time.Time{} // an hour later
		check("after the floor was read again")
	})
}

// A refresh that does not end: Health says how long it has run without
// waiting for it past the caller's context, and Get answers with the last
// figures and ErrSlow. (web's TestHealthzDegraded: what /healthz makes of it.)
func TestHungRefresh(t *testing.T) {
	src := seeded(t, testdb.Fresh(t, "sqlite"))
	if _, err := src.Get(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A refresh under way for 11 s, as a hung database leaves it.
	src.mu.Lock()
	src.flight = &flight{done: make(chan struct{}), since: time.Now().Add(-11 * time.Second)}
	src.at = time.Now().Add(-time.Hour)
	src.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if h := src.Health(ctx, time.Second); !h.OK || h.RefreshingFor < 11*time.Second {
		t.Fatalf("Health during an 11 s refresh: %+v; want the last refresh's state and the refresh under way", h)
	}
	snap, err := src.Get(ctx)
	if snap == nil || err != ErrSlow {
		t.Fatalf("Get during a hung refresh: %v, %v; want the last figures and ErrSlow", snap, err)
	}
	src.mu.Lock()
	close(src.flight.done)
	src.flight = nil
	src.mu.Unlock()
}

// Bounded keeps the busiest tasks and processors in their usual order and
// says how many it left out; the totals are untouched.
func TestBounded(t *testing.T) {
	snap := &Snapshot{TotalPending: 9}
	for i := 0; i < 3000; i++ {
		f := &TaskFigure{Name: fmt.Sprintf("t%04d", i), DoneToday: zeroKinds()}
		switch i % 1000 {
		case 7:
			f.Pending = 3
		case 8:
			f.Active = 2
		case 9:
			f.DoneToday["complete"] = 1
		case 10:
			f.OverHold = 1
		}
		snap.Tasks = append(snap.Tasks, f)
		snap.Users = append(snap.Users, &UserFigure{User: fmt.Sprintf("u%04d", 2999-i), Active: i % 500})
	}
	b := snap.Bounded(100)
	if len(b.Tasks) != 100 || b.TasksTotal != 3000 || b.TasksOmitted != 2900 || len(b.Users) != 100 || b.UsersOmitted != 2900 || b.TotalPending != 9 {
		t.Fatalf("bounded: %d tasks (total %d, omitted %d), %d users (omitted %d)", len(b.Tasks), b.TasksTotal, b.TasksOmitted, len(b.Users), b.UsersOmitted)
	}
	names := map[string]bool{}
	for i, f := range b.Tasks {
		names[f.Name] = true
		if i > 0 && b.Tasks[i-1].Name >= f.Name {
			t.Fatalf("tasks not in name order: %s then %s", b.Tasks[i-1].Name, f.Name)
		}
	}
	for _, k := range []int{7, 8, 9, 10, 1007, 2008, 2009, 2010} {
		if !names[fmt.Sprintf("t%04d", k)] {
			t.Errorf("task t%04d (with work) was left out", k)
		}
	}
	shown, least := map[string]bool{}, 1<<30
	for i, u := range b.Users {
		shown[u.User] = true
		least = min(least, u.Active)
		if i > 0 && b.Users[i-1].User <= u.User { // snap.Users' own order, kept
			t.Fatalf("processors out of their order: %s then %s", b.Users[i-1].User, u.User)
		}
	}
	for _, u := range snap.Users {
		if !shown[u.User] && u.Active > least {
			t.Fatalf("processor %s (%d active) left out, one with %d shown", u.User, u.Active, least)
		}
	}
	if len(snap.Tasks) != 3000 || snap.TasksTotal != 0 {
		t.Fatal("Bounded changed the shared snapshot")
	}
	if all := snap.Bounded(0); len(all.Tasks) != 3000 || all.TasksOmitted != 0 || all.TasksTotal != 3000 {
		t.Fatalf("Bounded(0): %d tasks, omitted %d", len(all.Tasks), all.TasksOmitted)
	}
}

// BenchmarkRefresh measures what one refresh costs the database (every
// statement of it, uncached, and each statement's share) over a work history
// of LOANQ_BENCH_HISTORY rows (default 10 000) and a fifth as many
// criteria-query runs, in 5 tasks. The figures in docs/dashboard.md come from:
//
//	LOANQ_BENCH_HISTORY=100000 scripts/test.sh -run '^$' -bench Refresh -benchtime 100x ./dashboard/
func BenchmarkRefresh(b *testing.B) {
	for _, dialect := range testdb.Dialects {
		b.Run(dialect, func(b *testing.B) {
			rows := int64(10000)
			if v, err := strconv.ParseInt(os.Getenv("LOANQ_BENCH_HISTORY"), 10, 64); err == nil && v > 0 {
				rows = v
			}
			src := history(b, testdb.Fresh(b, dialect), rows)
			src.TTL = 0
			ctx := context.Background()
			first, err := src.Get(ctx)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			var queries int
			steps := map[string]int64{}
			for i := 0; i < b.N; i++ {
				snap, err := src.Get(ctx)
				if err != nil {
					b.Fatal(err)
				}
				queries = snap.Refresh.Queries
				for k, v := range snap.Refresh.StepsUS {
					steps[k] += v
				}
			}
			b.ReportMetric(float64(queries), "queries/refresh")
			// The first refresh also reads the floors (hourly afterwards).
			b.ReportMetric(float64(first.Refresh.DurationUS), "µs/first-refresh")
			for k, v := range steps {
				b.ReportMetric(float64(v)/float64(b.N), "µs/"+k)
			}
		})
	}
}

// history builds a history of at least rows work rows and rows/5 runs by
// doubling a few real ones (each copy is a dispositioned row, so the
// one-active-row index is not involved); all but the latest 500 rows ended
// long ago.
func history(b *testing.B, dsn string, rows int64) *Source {
	d, db := testdb.Migrated(b, dsn)
	testdb.CreateLoans(b, d, db, 200)
	e := dispatch.New(db, d)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		name := fmt.Sprintf("task-%d", i)
		if _, _, err := e.Admin().CreateTask(ctx, dispatch.TaskSpec{Name: name, Where: "eligible = 1", Order: "priority", CreatedBy: "b"}); err != nil {
			b.Fatal(err)
		}
		for _, u := range []string{"ana", "ben", "chloe", "dev"} {
			r, err := e.Get(ctx, name, u, 2, dispatch.GetOptions{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := e.Dispose(ctx, name, r.Loans[0].String(), u, "complete", 0, false); err != nil {
				b.Fatal(err)
			}
		}
	}
	for testdb.Int(b, d, db, "SELECT COUNT(*) FROM loanq_work") < rows {
		testdb.Exec(b, d, db, `INSERT INTO loanq_work (task_id, loan_id, user_name, request_id, assigned_at, disposition, disposed_at)
SELECT task_id, loan_id + 1000000 + id * 1000, user_name, request_id, assigned_at, 'complete', COALESCE(disposed_at, assigned_at)
FROM loanq_work`)
	}
	for testdb.Int(b, d, db, "SELECT COUNT(*) FROM loanq_query_run") < rows/5 {
		testdb.Exec(b, d, db, `INSERT INTO loanq_query_run (task_id, strategy, holder, started_at, duration_ms, rows_found, requests_served, loans_assigned)
SELECT task_id, strategy, holder, started_at, duration_ms + id, rows_found, requests_served, loans_assigned FROM loanq_query_run`)
	}
	// Most of a real history ended before today; keep the latest 500 rows
	// today, and the active work recent.
	last := testdb.Int(b, d, db, "SELECT MAX(id) FROM loanq_work")
	testdb.Exec(b, d, db, "UPDATE loanq_work SET disposition = 'complete', disposed_at = ? WHERE id < ?",
		time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), last-500)
	for i := 0; i < 5; i++ {
		for _, u := range []string{"ana", "ben", "chloe", "dev"} {
			if _, err := e.Get(ctx, fmt.Sprintf("task-%d", i), u, 2, dispatch.GetOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	return &Source{DB: db, Driver: d, Admin: e.Admin(), TTL: time.Hour}
}
