package web

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/loanq/loanq/dashboard"
	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// seeded is a migrated database with two tasks and some work in it.
func seeded(t testing.TB, dsn string) *dashboard.Source {
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
	return &dashboard.Source{DB: db, Driver: d, Admin: e.Admin(), TTL: time.Hour}
}

// /healthz answers from the latest refresh: 200 while the database
// answers, 503 with one line of JSON that names no host or DSN once a
// refresh failed; calls within the cache interval cost no refresh at all.
func TestHealthz(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		src := seeded(t, dsn)
		h, err := Handler(Config{Figures: src, Token: "x"})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(h)
		defer ts.Close()
		get := func() (int, map[string]any, string) {
			resp, err := http.Get(ts.URL + "/healthz")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var v map[string]any
			if strings.Count(string(b), "\n") != 1 || json.Unmarshal(b, &v) != nil {
				t.Fatalf("healthz: %q is not one line of JSON", b)
			}
			return resp.StatusCode, v, string(b)
		}
		// Before any refresh: it starts one and waits for it.
		if code, v, body := get(); code != 200 || v["status"] != "ok" || v["age_ms"] == nil {
			t.Fatalf("healthz with the database up: %d %s", code, body)
		}
		// Within the interval (TTL 1h): answered from the state, no refresh.
		before := src.Refreshes()
		for i := 0; i < 200; i++ {
			if code, _, body := get(); code != 200 {
				t.Fatalf("healthz: %d %s", code, body)
			}
		}
		if n := src.Refreshes(); n != before {
			t.Fatalf("200 health checks within the cache interval ran %d refreshes, want 0", n-before)
		}
		// The database goes away and a refresh finds it so (--cache ends).
		src.DB.Close()
		src.TTL = 0
		src.Get(context.Background())
		code, v, body := get()
		if code != 503 || v["status"] != "unavailable" || v["age_ms"] == nil {
			t.Fatalf("healthz with the database closed: %d %q; want 503, status unavailable and the figures' age", code, body)
		}
		if strings.Contains(body, "127.0.0.1") || strings.Contains(body, "loanq_t_") || strings.Contains(body, ".db") || strings.Contains(body, "closed") {
			t.Fatalf("healthz names the database's address or the driver's error: %s", body)
		}
	})
}

// A refresh that does not end makes /healthz say degraded after
// slowRefresh, within healthWait: it does not wait for the refresh.
// (dashboard's TestHungRefresh: the figures' side of it.)
func TestHealthzDegraded(t *testing.T) {
	d, err := newDashboardPages(Config{Figures: seeded(t, testdb.Fresh(t, "sqlite"))})
	if err != nil {
		t.Fatal(err)
	}
	d.fig = hungRefresh{since: time.Now().Add(-11 * time.Second)}
	rec := httptest.NewRecorder()
	start := time.Now()
	d.healthz(rec, httptest.NewRequest("GET", "/healthz", nil))
	if took := time.Since(start); rec.Code != 503 || !strings.Contains(rec.Body.String(), `"status":"degraded"`) || took > 3*time.Second {
		t.Fatalf("healthz during an 11 s refresh: %d %s after %s; want 503 degraded within healthWait", rec.Code, rec.Body, took)
	}
}

// hungRefresh stands in for figures whose refresh, under way since since,
// does not end: each call waits for it until the caller's context ends,
// as dashboard.Source does.
type hungRefresh struct{ since time.Time }

func (h hungRefresh) Get(ctx context.Context) (*dashboard.Snapshot, error) {
	<-ctx.Done()
	return &dashboard.Snapshot{}, dashboard.ErrSlow
}

func (h hungRefresh) Health(ctx context.Context, _ time.Duration) dashboard.Health {
	<-ctx.Done()
	last := h.since.Add(-time.Second)
	return dashboard.Health{At: last, OK: true, LastOK: last, RefreshingFor: time.Since(h.since)}
}

func (h hungRefresh) Task(ctx context.Context, _ string) (*dashboard.TaskDetail, error) {
	<-ctx.Done()
	return nil, dashboard.ErrSlow
}

// Before any figures could be read, the page and the JSON say in one line
// that the database is unreachable, with nothing of the driver's error (on
// SQLite: the file's path).
func TestNoFiguresYet(t *testing.T) {
	dsn := testdb.Fresh(t, "sqlite")
	src := seeded(t, dsn)
	src.DB.Close()
	h, err := Handler(Config{Figures: src})
	if err != nil {
		t.Fatal(err)
	}
	path := strings.TrimPrefix(dsn, "sqlite:")
	for _, c := range []struct {
		url  string
		code int
		has  string
	}{
		{"/", 200, `<script type="application/json" id="initial"> null </script>`},
		{"/api/dashboard", 503, `{"error":"the database is unreachable (loanq serve logs why)"}`},
		{"/tasks/alpha", 503, "the database is unreachable"},
	} {
		r := httptest.NewRequest("GET", c.url, nil)
		r.Host = "127.0.0.1:8080"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		body := rec.Body.String()
		if rec.Code != c.code || !strings.Contains(body, c.has) || !strings.Contains(body, "the database is unreachable") {
			t.Errorf("%s with the database closed: %d, want %d with %q\n%s", c.url, rec.Code, c.code, c.has, body)
		}
		if strings.Contains(body, path) || strings.Contains(body, "closed") || strings.Contains(body, "sql:") {
			t.Errorf("%s shows the driver's error:\n%s", c.url, body)
		}
	}
}

// A task keyed by text: its page lists its dispositions by their keys,
// escaped as any text read from the database.
func TestTaskPageTextKeys(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		src := seeded(t, dsn)
		ctx := context.Background()
		testdb.Exec(t, src.Driver, src.DB, "CREATE TABLE kt_app (ref VARCHAR(40) NOT NULL PRIMARY KEY, prio INTEGER NOT NULL)")
		for i, k := range []string{"LN-2024-000123", "<b>LN-2</b>"} {
			testdb.Exec(t, src.Driver, src.DB, "INSERT INTO kt_app (ref, prio) VALUES (?, ?)", k, i)
		}
		if _, _, err := src.Admin.CreateTask(ctx, dispatch.TaskSpec{Name: "apps", Source: "kt_app", Key: "ref", Where: "1 = 1", Order: "prio", CreatedBy: "t"}); err != nil {
			t.Fatal(err)
		}
		r, err := dispatch.New(src.DB, src.Driver).Get(ctx, "apps", "ana", 2, dispatch.GetOptions{})
		if err != nil || len(r.Loans) != 2 {
			t.Fatalf("get: %+v, %v", r, err)
		}
		for _, l := range r.Loans {
			if _, err := dispatch.New(src.DB, src.Driver).Dispose(ctx, "apps", l.String(), "ana", "never", 0, false); err != nil {
				t.Fatal(err)
			}
		}
		d, err := src.Task(ctx, "apps")
		if err != nil || len(d.Dispositions) != 2 || d.Dispositions[1].Loan.String() != "LN-2024-000123" {
			t.Fatalf("task page data: %+v, %v", d, err)
		}
		h, err := Handler(Config{Figures: src})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/tasks/apps", nil)
		req.Host = "127.0.0.1:8080"
		h.ServeHTTP(rec, req)
		body := rec.Body.String()
		if rec.Code != 200 || !strings.Contains(body, "LN-2024-000123") || strings.Contains(body, "<b>LN-2</b>") || !strings.Contains(body, "&lt;b&gt;LN-2&lt;/b&gt;") {
			t.Fatalf("GET /tasks/apps: %d; want both keys, escaped\n%s", rec.Code, body)
		}
	})
}

// Per-user series only with --metrics-per-user: one series per processor is
// the operator's choice.
func TestMetricsPerUser(t *testing.T) {
	src := seeded(t, testdb.Fresh(t, "sqlite"))
	for _, perUser := range []bool{false, true} {
		h, err := Handler(Config{Figures: src, PerUser: perUser})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/metrics", nil)
		r.Host = "127.0.0.1:8080"
		h.ServeHTTP(rec, r)
		has := strings.Contains(rec.Body.String(), `loanq_user_active_work_loans{task="alpha",user="ana"} 4`)
		if rec.Code != 200 || has != perUser {
			t.Fatalf("--metrics-per-user=%v: %d, per-user series present %v\n%s", perUser, rec.Code, has, rec.Body.String())
		}
	}
}
