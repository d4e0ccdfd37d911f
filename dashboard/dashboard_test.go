package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/testdb"
)

// seeded is a migrated database with two tasks and some work in it.
func seeded(t testing.TB, dsn string) *Source {
	t.Helper()
	d, db := testdb.Migrated(t, dsn)
	testdb.CreateLoans(t, d, db, 40)
	e := dispatch.New(db, d)
	ctx := context.Background()
	for _, name := range []string{"alpha", "beta"} {
		if _, _, err := e.CreateTask(ctx, dispatch.TaskSpec{Name: name, Where: "eligible = 1", Order: "priority", CreatedBy: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	for i, u := range []string{"ana", "ben", "ana"} {
		r, err := e.Get(ctx, []string{"alpha", "beta"}[i%2], u, 3, dispatch.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Dispose(ctx, r.Task, r.Loans[0], u, "complete", 0, false); err != nil {
			t.Fatal(err)
		}
	}
	return &Source{DB: db, Driver: d, Engine: e, TTL: time.Hour}
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
		// the latest runs of each task.
		if snap.Refresh.Queries != 7 || snap.TotalActive != 6 || snap.TotalToday != 3 {
			t.Fatalf("refresh: %+v, active %d, done today %d; want 7 queries, 6 active, 3 done", snap.Refresh, snap.TotalActive, snap.TotalToday)
		}
	})
}

// /healthz is 200 while the database answers and 503, with one line of
// JSON that names no host or DSN, once it does not.
func TestHealthz(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		src := seeded(t, dsn)
		srv := &Server{Source: src, Token: "x"}
		h, err := srv.Handler()
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(h)
		defer ts.Close()
		get := func() (int, string) {
			resp, err := http.Get(ts.URL + "/healthz")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		if code, body := get(); code != 200 || !strings.Contains(body, `"status":"ok"`) {
			t.Fatalf("healthz with the database up: %d %s", code, body)
		}
		src.DB.Close()
		code, body := get()
		var v map[string]any
		if code != 503 || strings.Count(body, "\n") != 1 || json.Unmarshal([]byte(body), &v) != nil || v["status"] != "unavailable" {
			t.Fatalf("healthz with the database closed: %d %q; want 503 and one line of JSON", code, body)
		}
		if strings.Contains(body, "127.0.0.1") || strings.Contains(body, "loanq_t_") || strings.Contains(body, ".db") {
			t.Fatalf("healthz names the database's address: %s", body)
		}
	})
}

// Per-user series only with --metrics-per-user: one series per processor is
// the operator's choice.
func TestMetricsPerUser(t *testing.T) {
	src := seeded(t, testdb.Fresh(t, "sqlite"))
	for _, perUser := range []bool{false, true} {
		h, err := (&Server{Source: src, PerUser: perUser}).Handler()
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		has := strings.Contains(rec.Body.String(), `loanq_user_active_work_loans{task="alpha",user="ana"} 4`)
		if rec.Code != 200 || has != perUser {
			t.Fatalf("--metrics-per-user=%v: %d, per-user series present %v\n%s", perUser, rec.Code, has, rec.Body.String())
		}
	}
}

// BenchmarkRefresh measures what one refresh costs the database (every
// statement of it, uncached) over a work history of about 10 000 rows and
// 2 000 criteria-query runs in 5 tasks. The figures in docs/dashboard.md
// come from:
//
//	scripts/test.sh -run '^$' -bench Refresh -benchtime 200x ./dashboard/
func BenchmarkRefresh(b *testing.B) {
	for _, dialect := range testdb.Dialects {
		b.Run(dialect, func(b *testing.B) {
			src := history(b, testdb.Fresh(b, dialect))
			src.TTL = 0
			ctx := context.Background()
			if _, err := src.Get(ctx); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			var queries int
			for i := 0; i < b.N; i++ {
				snap, err := src.Get(ctx)
				if err != nil {
					b.Fatal(err)
				}
				queries = snap.Refresh.Queries
			}
			b.ReportMetric(float64(queries), "queries/refresh")
		})
	}
}

// history builds a history of about 10 000 work rows and 2 000 runs by
// doubling a few real ones (each copy is a dispositioned row, so the
// one-active-row index is not involved).
func history(b *testing.B, dsn string) *Source {
	d, db := testdb.Migrated(b, dsn)
	testdb.CreateLoans(b, d, db, 200)
	e := dispatch.New(db, d)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		name := fmt.Sprintf("task-%d", i)
		if _, _, err := e.CreateTask(ctx, dispatch.TaskSpec{Name: name, Where: "eligible = 1", Order: "priority", CreatedBy: "b"}); err != nil {
			b.Fatal(err)
		}
		for _, u := range []string{"ana", "ben", "chloe", "dev"} {
			r, err := e.Get(ctx, name, u, 2, dispatch.GetOptions{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := e.Dispose(ctx, name, r.Loans[0], u, "complete", 0, false); err != nil {
				b.Fatal(err)
			}
		}
	}
	for testdb.Int(b, d, db, "SELECT COUNT(*) FROM loanq_work") < 10000 {
		testdb.Exec(b, d, db, `INSERT INTO loanq_work (task_id, loan_id, user_name, request_id, assigned_at, disposition, disposed_at)
SELECT task_id, loan_id + 1000000 + id * 1000, user_name, request_id, assigned_at, 'complete', COALESCE(disposed_at, assigned_at)
FROM loanq_work`)
	}
	for testdb.Int(b, d, db, "SELECT COUNT(*) FROM loanq_query_run") < 2000 {
		testdb.Exec(b, d, db, `INSERT INTO loanq_query_run (task_id, strategy, holder, started_at, duration_ms, rows_found, requests_served, loans_assigned)
SELECT task_id, strategy, holder, started_at, duration_ms + id, rows_found, requests_served, loans_assigned FROM loanq_query_run`)
	}
	return &Source{DB: db, Driver: d, Engine: e, TTL: time.Hour}
}
