package e2e

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/testdb"
)

// server is a running `loanq serve` process.
type server struct {
	url  string
	cmd  *exec.Cmd
	done chan error
}

var servingRE = regexp.MustCompile(`http://(127\.0\.0\.1:\d+)/`)

// startServe runs the real binary with `serve --listen 127.0.0.1:0` and
// reads the address it picked from its first line of output. The process is
// interrupted (SIGINT) and must exit 0 when the test ends.
func startServe(t *testing.T, dsn string, extra ...string) *server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	args := append([]string{"serve", "--listen", "127.0.0.1:0"}, extra...)
	cmd := command(ctx, dsn, "watcher", args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting loanq serve: %v", err)
	}
	s := &server{cmd: cmd, done: make(chan error, 1)}
	line, rerr := bufio.NewReader(out).ReadString('\n')
	go func() { io.Copy(io.Discard, out); s.done <- cmd.Wait(); cancel() }()
	m := servingRE.FindStringSubmatch(line)
	if m == nil {
		cmd.Process.Kill()
		<-s.done
		t.Fatalf("loanq serve did not print its address (read %q, %v); stderr:\n%s", line, rerr, errb.String())
	}
	s.url = "http://" + m[1]
	if strings.Contains(line, dsn) {
		t.Errorf("serve printed its DSN: %s", line)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case err := <-s.done:
			if err != nil {
				t.Errorf("loanq serve after SIGINT: %v (want exit 0); stderr:\n%s", err, errb.String())
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Errorf("loanq serve did not stop within 30s of SIGINT")
		}
		if strings.Contains(errb.String(), "panic") {
			t.Errorf("loanq serve stderr:\n%s", errb.String())
		}
	})
	return s
}

// get fetches path with the given headers; it follows no redirect.
func (s *server) get(t *testing.T, path string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("GET", s.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	client := &http.Client{Timeout: time.Minute, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// count runs a COUNT-like query written the same on every dialect (with ? binds).
func count(t *testing.T, d drivers.Driver, db *sql.DB, q string, args ...any) float64 {
	t.Helper()
	var n sql.NullFloat64
	if err := db.QueryRowContext(context.Background(), testdb.Rebind(d, q), args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n.Float64
}

// metric finds one sample of a family by its labels.
func metric(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) *dto.Metric {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("/metrics has no %s", name)
	}
next:
	for _, m := range f.Metric {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.Label {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		return m
	}
	t.Fatalf("/metrics has no %s%v", name, labels)
	return nil
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	}
	return -1
}

func scrape(t *testing.T, s *server, header ...string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, body := s.get(t, "/metrics", header...)
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d\n%s", resp.StatusCode, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics is not Prometheus text exposition: %v\n%s", err, body)
	}
	for name := range fams {
		if !strings.HasPrefix(name, "loanq_") {
			t.Errorf("metric %s is not named loanq_…", name)
		}
	}
	return fams
}

// TestServe starts `loanq serve` on every database, drives work through the
// CLI, and checks /metrics (parsed with the Prometheus text parser), the
// dashboard's JSON and /healthz against the database; that --token guards
// every path but /healthz, by header and by cookie; and that hitting every
// endpoint leaves loanq's tables exactly as they were.
func TestServe(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, e := prepare(t, dsn, 30)
		db := e.DB
		mustOK(t, dsn, "admin", "task", "create", "alpha", "--where", "eligible = 1", "--order", "priority")
		mustOK(t, dsn, "admin", "task", "create", "beta", "--where", "eligible = 1", "--order", "priority DESC")
		ana := decode(t, mustOK(t, dsn, "ana", "--output", "json", "work", "get", "alpha", "--count", "3"))
		ben := decode(t, mustOK(t, dsn, "ben", "--output", "json", "work", "get", "alpha", "--count", "2"))
		mustOK(t, dsn, "ana", "work", "get", "beta", "--count", "2")
		mustOK(t, dsn, "ana", "disposition", "alpha", strconv.FormatInt(ana.Loans[0], 10), "complete")
		mustOK(t, dsn, "ana", "disposition", "alpha", strconv.FormatInt(ana.Loans[1], 10), "return", "--after", "1h")
		mustOK(t, dsn, "ben", "disposition", "alpha", strconv.FormatInt(ben.Loans[0], 10), "never")
		// A pending request, as a caller that found the lock held leaves it.
		var alphaID int64
		if err := db.QueryRow(testdb.Rebind(d, "SELECT id FROM loanq_task WHERE name = ?"), "alpha").Scan(&alphaID); err != nil {
			t.Fatal(err)
		}
		carl, err := d.Statements().RequestInsert.InsertID(context.Background(), db, drivers.RequestInsertParams{TaskID: alphaID, User: "carl", Requested: 2})
		if err != nil {
			t.Fatal(err)
		}

		const token = "tok-3nS9xq"
		bearer := []string{"Authorization", "Bearer " + token}
		s := startServe(t, dsn, "--token", token, "--cache", "0s", "--metrics-per-user", "--stale-after", "1h")
		before := snapshot(t, db)

		// /healthz: open, 200, one line of JSON.
		resp, body := s.get(t, "/healthz")
		var health map[string]any
		if resp.StatusCode != 200 || strings.Count(body, "\n") != 1 || json.Unmarshal([]byte(body), &health) != nil || health["status"] != "ok" {
			t.Fatalf("/healthz: %d %q; want 200 and one line of JSON with status ok", resp.StatusCode, body)
		}

		// --token: 401 without it or with a wrong one, 200 with the header or the cookie.
		for _, path := range []string{"/", "/metrics", "/api/dashboard", "/tasks/alpha", "/static/app.js"} {
			if resp, _ := s.get(t, path); resp.StatusCode != 401 {
				t.Errorf("%s without the token: %d, want 401", path, resp.StatusCode)
			}
			if resp, _ := s.get(t, path, "Authorization", "Bearer wrong"); resp.StatusCode != 401 {
				t.Errorf("%s with a wrong token: %d, want 401", path, resp.StatusCode)
			}
			if resp, _ := s.get(t, path, bearer...); resp.StatusCode != 200 {
				t.Errorf("%s with the bearer token: %d, want 200", path, resp.StatusCode)
			}
		}
		if resp, _ := s.get(t, "/?token=wrong"); resp.StatusCode != 401 {
			t.Errorf("/?token=wrong: %d, want 401", resp.StatusCode)
		}
		resp, _ = s.get(t, "/?token="+token)
		var cookie *http.Cookie
		for _, c := range resp.Cookies() {
			cookie = c
		}
		if resp.StatusCode != http.StatusSeeOther || cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode ||
			strings.Contains(cookie.Value, token) || strings.Contains(resp.Header.Get("Location"), token) {
			t.Fatalf("/?token=: %d, cookie %+v, location %q; want a redirect without the token that sets an HttpOnly, SameSite=Strict cookie not holding the token",
				resp.StatusCode, cookie, resp.Header.Get("Location"))
		}
		for _, path := range []string{"/", "/metrics"} {
			if resp, _ := s.get(t, path, "Cookie", cookie.Name+"="+cookie.Value); resp.StatusCode != 200 {
				t.Errorf("%s with the session cookie: %d, want 200", path, resp.StatusCode)
			}
		}

		// /metrics against the database.
		fams := scrape(t, s, bearer...)
		for _, task := range []string{"alpha", "beta"} {
			id := count(t, d, db, "SELECT id FROM loanq_task WHERE name = ?", task)
			check := func(name string, want float64, labels ...string) {
				t.Helper()
				if got := value(metric(t, fams, name, append([]string{"task", task}, labels...)...)); got != want {
					t.Errorf("%s{task=%s %v} = %v, the database says %v", name, task, labels, got, want)
				}
			}
			check("loanq_pending_requests", count(t, d, db, "SELECT COUNT(*) FROM loanq_work_request WHERE task_id = ? AND status = 'pending'", id))
			check("loanq_active_work_loans", count(t, d, db, "SELECT COUNT(*) FROM loanq_work WHERE task_id = ? AND disposition IS NULL", id))
			check("loanq_active_work_over_hold_loans", 0)
			for _, kind := range []string{"complete", "return", "never"} {
				want := count(t, d, db, "SELECT COUNT(*) FROM loanq_work WHERE task_id = ? AND disposition = ?", id, kind)
				check("loanq_dispositions_total", want, "disposition", kind)
				check("loanq_dispositions_today", want, "disposition", kind)
			}
			check("loanq_requests_served_total", count(t, d, db, "SELECT SUM(requests_served) FROM loanq_query_run WHERE task_id = ?", id))
			check("loanq_loans_assigned_total", count(t, d, db, "SELECT SUM(loans_assigned) FROM loanq_query_run WHERE task_id = ?", id))
			check("loanq_last_run_eligible_loans", count(t, d, db,
				"SELECT rows_found FROM loanq_query_run WHERE id = (SELECT MAX(id) FROM loanq_query_run WHERE task_id = ?)", id))
			h := metric(t, fams, "loanq_criteria_run_duration_seconds", "task", task).Histogram
			runs := count(t, d, db, "SELECT COUNT(*) FROM loanq_query_run WHERE task_id = ?", id)
			if h == nil || float64(h.GetSampleCount()) != runs || h.GetSampleCount() == 0 {
				t.Errorf("histogram of %s: %v, the database has %v runs", task, h, runs)
			}
			for _, u := range []string{"ana", "ben"} {
				want := count(t, d, db, "SELECT COUNT(*) FROM loanq_work WHERE task_id = ? AND user_name = ? AND disposition IS NULL", id, u)
				if want == 0 {
					continue
				}
				if got := value(metric(t, fams, "loanq_user_active_work_loans", "task", task, "user", u)); got != want {
					t.Errorf("loanq_user_active_work_loans{%s,%s} = %v, the database says %v", task, u, got, want)
				}
			}
		}
		if got := value(metric(t, fams, "loanq_pending_requests", "task", "alpha")); got != 1 {
			t.Errorf("pending requests of alpha: %v, want the 1 the test logged", got)
		}

		// The dashboard's JSON: the per-user table.
		var snap struct {
			Tasks []struct {
				Name    string `json:"name"`
				Active  int    `json:"active"`
				Pending int    `json:"pending"`
			} `json:"tasks"`
			Users []struct {
				User      string `json:"user"`
				Active    int    `json:"active"`
				DoneToday int    `json:"done_today"`
			} `json:"users"`
			Refresh struct {
				Queries int `json:"queries"`
			} `json:"refresh"`
		}
		_, body = s.get(t, "/api/dashboard", bearer...)
		if err := json.Unmarshal([]byte(body), &snap); err != nil {
			t.Fatalf("/api/dashboard: %v\n%s", err, body)
		}
		users := map[string][2]int{}
		for _, u := range snap.Users {
			users[u.User] = [2]int{u.Active, u.DoneToday}
		}
		// ana: 1 left of alpha + 2 of beta active, 2 done; ben: 1 active, 1 done.
		if users["ana"] != [2]int{3, 2} || users["ben"] != [2]int{1, 1} || len(snap.Tasks) != 2 || snap.Refresh.Queries == 0 {
			t.Errorf("dashboard users %v tasks %+v refresh %+v; want ana 3 active 2 done, ben 1 and 1", users, snap.Tasks, snap.Refresh)
		}
		if resp, body := s.get(t, "/tasks/alpha", bearer...); resp.StatusCode != 200 || !strings.Contains(body, "eligible = 1") {
			t.Errorf("/tasks/alpha: %d, want 200 with the criteria\n%s", resp.StatusCode, body)
		}
		if resp, _ := s.get(t, "/tasks/nosuch", bearer...); resp.StatusCode != 404 {
			t.Errorf("/tasks/nosuch: %d, want 404", resp.StatusCode)
		}
		for _, path := range []string{"/", "/tasks/alpha", "/api/dashboard", "/metrics", "/healthz"} {
			_, body := s.get(t, path, bearer...)
			if strings.Contains(body, dsn) || (strings.Contains(dsn, "@") && strings.Contains(body, strings.SplitN(dsn, "@", 2)[1])) {
				t.Errorf("%s shows the DSN", path)
			}
		}
		if after := snapshot(t, db); after != before {
			t.Fatalf("serving every endpoint changed loanq's tables:\nbefore:\n%s\nafter:\n%s", before, after)
		}

		// New work shows at the next scrape (--cache 0s): ben's request, and
		// carl's pending one served by a recheck.
		mustOK(t, dsn, "ben", "work", "get", "beta", "--count", "2")
		mustOK(t, dsn, "carl", "work", "status", strconv.FormatInt(carl, 10))
		fams = scrape(t, s, bearer...)
		if got := value(metric(t, fams, "loanq_active_work_loans", "task", "beta")); got != 4 {
			t.Errorf("active work of beta after ben's request: %v, want 4", got)
		}
		if got := value(metric(t, fams, "loanq_pending_requests", "task", "alpha")); got != 0 {
			t.Errorf("pending requests of alpha after carl's recheck: %v, want 0", got)
		}
		if got := value(metric(t, fams, "loanq_user_active_work_loans", "task", "alpha", "user", "carl")); got != 2 {
			t.Errorf("carl's active work in alpha after the recheck: %v, want 2", got)
		}
		audit(t, e)
	})
}

// TestServeBadInput: bad flags and a port in use are exit 2 with a message
// saying what to fix; a database without loanq's schema too.
func TestServeBadInput(t *testing.T) {
	dsn := testdb.Fresh(t, "sqlite")
	prepare(t, dsn, 1)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cases := []struct {
		args []string
		says string
	}{
		{[]string{"--listen", "nonsense"}, "--listen"},
		{[]string{"--listen", "127.0.0.1"}, "HOST:PORT"},
		{[]string{"--listen", busy.Addr().String()}, "another process uses that port"},
		{[]string{"--listen", "127.0.0.1:0", "--stale-after", "-1h"}, "--stale-after"},
		{[]string{"--listen", "127.0.0.1:0", "--stale-after", "soon"}, "--stale-after"},
		{[]string{"--listen", "127.0.0.1:0", "--cache", "x"}, "--cache"},
		{[]string{"--listen", "127.0.0.1:0", "extra-arg"}, "argument"},
	}
	for _, c := range cases {
		r := loanq(t, dsn, "x", append([]string{"serve"}, c.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, c.says) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Errorf("serve %v: exit %d, stderr %q; want exit 2 and one line naming %q", c.args, r.code, r.stderr, c.says)
		}
	}
	empty := testdb.Fresh(t, "sqlite")
	f, err := os.Create(strings.TrimPrefix(empty, "sqlite:"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	r := loanq(t, empty, "x", "serve", "--listen", "127.0.0.1:0")
	if r.code != 2 || !strings.Contains(r.stderr, "migrate up") {
		t.Errorf("serve on a database without loanq's schema: exit %d %q; want 2 and a hint to migrate", r.code, r.stderr)
	}
}
