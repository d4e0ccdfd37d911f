package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
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
		if _, _, err := e.CreateTask(ctx, dispatch.TaskSpec{Name: name, Where: "eligible = 1", Order: "priority", CreatedBy: "t"}); err != nil {
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
			items, err := src.Engine.Pipeline(ctx, u, "")
			if err != nil {
				t.Fatal(err)
			}
			for i, it := range items {
				if _, err := src.Engine.Dispose(ctx, it.Task, it.LoanID.String(), u, Dispositions[i%3], 0, false); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := src.Engine.Get(ctx, "beta", "chloe", 2, dispatch.GetOptions{}); err != nil {
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

// /healthz answers from the latest refresh: 200 while the database
// answers, 503 with one line of JSON that names no host or DSN once a
// refresh failed; calls within the cache interval cost no refresh at all.
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
		src.DB.Close()
		src.mu.Lock()
		src.TTL, src.at = 0, src.at.Add(-2*time.Second) // the figures are older than a second
		src.mu.Unlock()
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
// slowRefresh, and pages answer with the last figures and a line saying
// the database is slow, without waiting for it.
func TestHealthzDegraded(t *testing.T) {
	src := seeded(t, testdb.Fresh(t, "sqlite"))
	if _, err := src.Get(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A refresh under way for 11 s, as a hung database leaves it.
	src.mu.Lock()
	src.flight = &flight{done: make(chan struct{}), since: time.Now().Add(-11 * time.Second)}
	src.at = time.Now().Add(-time.Hour)
	src.mu.Unlock()
	h, err := (&Server{Source: src}).Handler()
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	start := time.Now()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil)) // exempt from the Host check
	if took := time.Since(start); rec.Code != 503 || !strings.Contains(rec.Body.String(), `"status":"degraded"`) || took > 3*time.Second {
		t.Fatalf("healthz during an 11 s refresh: %d %s after %s; want 503 degraded within healthWait", rec.Code, rec.Body, took)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	snap, err := src.Get(ctx)
	if snap == nil || err != ErrSlow {
		t.Fatalf("Get during a hung refresh: %v, %v; want the last figures and ErrSlow", snap, err)
	}
	src.mu.Lock()
	close(src.flight.done)
	src.flight = nil
	src.mu.Unlock()
}

// The session cookie of a ?token= link expires: Max-Age and Expires say
// --session-ttl, and the server refuses the value itself once it is past
// its expiry, when it claims to live longer than the TTL, or when tampered.
func TestSessionCookieExpires(t *testing.T) {
	src := seeded(t, testdb.Fresh(t, "sqlite"))
	srv := &Server{Source: src, Token: "tok", SessionTTL: 2 * time.Hour}
	h, err := srv.Handler()
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/?token=tok", nil)
	r.Host = "localhost:8080"
	h.ServeHTTP(rec, r)
	cookies := rec.Result().Cookies()
	if rec.Code != http.StatusSeeOther || len(cookies) != 1 {
		t.Fatalf("/?token=tok: %d %v", rec.Code, cookies)
	}
	c := cookies[0]
	if c.MaxAge != 7200 || time.Until(c.Expires) < 119*time.Minute || time.Until(c.Expires) > 121*time.Minute || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
		t.Fatalf("session cookie %+v: want Max-Age 7200, Expires in 2h, HttpOnly, SameSite=Strict", c)
	}
	status := func(value string) int {
		rec := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/api/dashboard", nil)
		r.Host = "localhost:8080"
		r.AddCookie(&http.Cookie{Name: cookieName, Value: value})
		h.ServeHTTP(rec, r)
		return rec.Code
	}
	now := time.Now()
	cases := map[string]int{
		c.Value: 200,
		srv.sessionValue(now.Add(time.Minute).Unix()):    200,
		srv.sessionValue(now.Add(-time.Second).Unix()):   401, // expired
		srv.sessionValue(now.Add(30 * time.Hour).Unix()): 401, // longer than the TTL in force
		tampered(c.Value): 401,
		"9999999999.00":   401,
		"garbage":         401,
	}
	other := &Server{Token: "another"}
	cases[other.sessionValue(now.Add(time.Hour).Unix())] = 401 // made with another token
	for v, want := range cases {
		if got := status(v); got != want {
			t.Errorf("cookie %q: %d, want %d", v, got, want)
		}
	}
}

// The Host check refuses a name that is not the server's (a DNS-rebinding
// page), answers IP addresses, localhost and --allowed-hosts on any port,
// and /healthz whatever the Host; a cross-origin request other than GET is
// refused before routing.
func TestHostAndOrigin(t *testing.T) {
	src := seeded(t, testdb.Fresh(t, "sqlite"))
	h, err := (&Server{Source: src, AllowedHosts: []string{"Dash.Example.com"}}).Handler()
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, path, host string, header ...string) int {
		r := httptest.NewRequest(method, path, nil)
		r.Host = host
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec.Code
	}
	for host, want := range map[string]int{
		"127.0.0.1:8080": 200, "localhost:8080": 200, "LOCALHOST": 200, "[::1]:8080": 200, "10.1.2.3:8080": 200,
		"dash.example.com": 200, "dash.example.com.:443": 200,
		"evil.example:8080": 403, "127.0.0.1.nip.io:8080": 403, "dash.example.com.evil.example": 403, "": 403,
	} {
		for _, path := range []string{"/", "/api/dashboard", "/metrics", "/tasks/alpha", "/static/app.js"} {
			if got := do("GET", path, host); got != want {
				t.Errorf("GET %s with Host %q: %d, want %d", path, host, got, want)
			}
		}
		if got := do("GET", "/healthz", host); got != 200 {
			t.Errorf("GET /healthz with Host %q: %d, want 200 (exempt)", host, got)
		}
	}
	if got := do("POST", "/api/dashboard", "127.0.0.1:8080", "Origin", "http://evil.example"); got != 403 {
		t.Errorf("POST from another origin: %d, want 403", got)
	}
	if got := do("POST", "/api/dashboard", "127.0.0.1:8080", "Origin", "null"); got != 403 {
		t.Errorf("POST from an opaque origin: %d, want 403", got)
	}
	if got := do("POST", "/api/dashboard", "127.0.0.1:8080", "Sec-Fetch-Site", "cross-site"); got != 403 {
		t.Errorf("POST marked cross-site: %d, want 403", got)
	}
	if got := do("POST", "/api/dashboard", "127.0.0.1:8080", "Origin", "http://127.0.0.1:8080"); got != http.StatusMethodNotAllowed {
		t.Errorf("POST from the same origin: %d, want 405 (past the origin check, no such route)", got)
	}
}

// Every phase of a connection has a deadline, and a page's wait for a slow
// refresh ends before the write deadline.
func TestHTTPServerTimeouts(t *testing.T) {
	s := NewHTTPServer(http.NotFoundHandler())
	if s.ReadHeaderTimeout <= 0 || s.ReadTimeout <= 0 || s.WriteTimeout <= 0 || s.IdleTimeout <= 0 || s.MaxHeaderBytes <= 0 {
		t.Fatalf("http.Server without a deadline: %+v", s)
	}
	if s.WriteTimeout < pageWait+10*time.Second {
		t.Fatalf("WriteTimeout %s leaves a page that waited %s no time to answer", s.WriteTimeout, pageWait)
	}
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

func TestAcceptsGzip(t *testing.T) {
	for header, want := range map[string]bool{
		"": false, "gzip": true, "gzip, deflate, br": true, "br;q=1.0, gzip;q=0.8": true, "*": true,
		"gzip;q=0": false, "gzip; q=0.0": false, "identity": false, "deflate, gzip;q=0.001": true,
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Accept-Encoding", header)
		if got := acceptsGzip(r); got != want {
			t.Errorf("Accept-Encoding %q: gzip %v, want %v", header, got, want)
		}
	}
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
		r := httptest.NewRequest("GET", "/metrics", nil)
		r.Host = "127.0.0.1:8080"
		h.ServeHTTP(rec, r)
		has := strings.Contains(rec.Body.String(), `loanq_user_active_work_loans{task="alpha",user="ana"} 4`)
		if rec.Code != 200 || has != perUser {
			t.Fatalf("--metrics-per-user=%v: %d, per-user series present %v\n%s", perUser, rec.Code, has, rec.Body.String())
		}
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
		if _, _, err := e.CreateTask(ctx, dispatch.TaskSpec{Name: name, Where: "eligible = 1", Order: "priority", CreatedBy: "b"}); err != nil {
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
	return &Source{DB: db, Driver: d, Engine: e, TTL: time.Hour}
}

// Before any figures could be read, the page and the JSON say in one line
// that the database is unreachable, with nothing of the driver's error (on
// SQLite: the file's path).
func TestNoFiguresYet(t *testing.T) {
	dsn := testdb.Fresh(t, "sqlite")
	src := seeded(t, dsn)
	src.DB.Close()
	h, err := (&Server{Source: src}).Handler()
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

// A stop (SIGINT) ends Serve without an error even while a client holds a
// connection on which it never sent a request: after the grace period the
// connection is closed.
func TestServeStopsWithASilentClient(t *testing.T) {
	shutdownGrace = 300 * time.Millisecond
	t.Cleanup(func() { shutdownGrace = 5 * time.Second })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, NewHTTPServer(http.NotFoundHandler()), ln) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve after the stop with a silent client: %v, want nil", err)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("Serve did not return within 4 s of the stop")
	}
}

// tampered changes the last character of a cookie value to another one (a
// fixed replacement would leave a value that already ends with it intact).
func tampered(v string) string {
	last := "0"
	if strings.HasSuffix(v, "0") {
		last = "1"
	}
	return v[:len(v)-1] + last
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
		if _, _, err := src.Engine.CreateTask(ctx, dispatch.TaskSpec{Name: "apps", Source: "kt_app", Key: "ref", Where: "1 = 1", Order: "prio", CreatedBy: "t"}); err != nil {
			t.Fatal(err)
		}
		r, err := src.Engine.Get(ctx, "apps", "ana", 2, dispatch.GetOptions{})
		if err != nil || len(r.Loans) != 2 {
			t.Fatalf("get: %+v, %v", r, err)
		}
		for _, l := range r.Loans {
			if _, err := src.Engine.Dispose(ctx, "apps", l.String(), "ana", "never", 0, false); err != nil {
				t.Fatal(err)
			}
		}
		d, err := src.Task(ctx, "apps")
		if err != nil || len(d.Dispositions) != 2 || d.Dispositions[1].Loan.String() != "LN-2024-000123" {
			t.Fatalf("task page data: %+v, %v", d, err)
		}
		h, err := (&Server{Source: src}).Handler()
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
