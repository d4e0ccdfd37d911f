package e2e

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/internal/testkit/cutproxy"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// server is a running `loanq serve` process.
type server struct {
	url    string
	cmd    *exec.Cmd
	done   chan error
	stderr *lockedBuffer
	once   sync.Once
}

// lockedBuffer is a process's stderr, readable while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// servingRE reads the port from serve's first line; whatever address it
// listens on, the tests reach it by loopback.
var servingRE = regexp.MustCompile(`http://(?:127\.0\.0\.1|0\.0\.0\.0|\[::\]|localhost):(\d+)/`)

// startServe runs the real binary with `serve --listen 127.0.0.1:0` (unless
// extra gives a --listen) and reads the address it picked from its first
// line of output. The process is interrupted (SIGINT) and must exit 0 when
// the test ends.
func startServe(t *testing.T, dsn string, extra ...string) *server {
	t.Helper()
	return startServeEnv(t, dsn, nil, extra...)
}

// startServeEnv is startServe with more environment variables (NAME=VALUE).
func startServeEnv(t *testing.T, dsn string, env []string, extra ...string) *server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	args := append([]string{"serve"}, extra...)
	if !slices.Contains(extra, "--listen") {
		args = append([]string{"serve", "--listen", "127.0.0.1:0"}, extra...)
	}
	cmd := command(ctx, dsn, "watcher", args...)
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errb := &lockedBuffer{}
	cmd.Stderr = errb
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting loanq serve: %v", err)
	}
	s := &server{cmd: cmd, done: make(chan error, 1), stderr: errb}
	line, rerr := bufio.NewReader(out).ReadString('\n')
	go func() { io.Copy(io.Discard, out); s.done <- cmd.Wait(); cancel() }()
	m := servingRE.FindStringSubmatch(line)
	if m == nil {
		cmd.Process.Kill()
		<-s.done
		t.Fatalf("loanq serve did not print its address (read %q, %v); stderr:\n%s", line, rerr, errb.String())
	}
	s.url = "http://127.0.0.1:" + m[1]
	if strings.Contains(line, dsn) {
		t.Errorf("serve printed its DSN: %s", line)
	}
	t.Cleanup(func() { s.stop(t) })
	return s
}

// stop interrupts serve (SIGINT), which must exit 0; twice is once.
func (s *server) stop(t *testing.T) {
	t.Helper()
	s.once.Do(func() { s.interrupt(t) })
}

func (s *server) interrupt(t *testing.T) {
	t.Helper()
	s.cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("loanq serve after SIGINT: %v (want exit 0); stderr:\n%s", err, s.stderr.String())
		}
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		t.Errorf("loanq serve did not stop within 30s of SIGINT")
	}
	if strings.Contains(s.stderr.String(), "panic") {
		t.Errorf("loanq serve stderr:\n%s", s.stderr.String())
	}
}

// get fetches path with the given headers; it follows no redirect.
func (s *server) get(t *testing.T, path string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("GET", s.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1] // as a browser sends the name it was given
			continue
		}
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
// dashboard's JSON and /healthz against the database; that the token guards
// every path but /healthz, by header and by cookie; and that hitting every
// endpoint leaves loanq's tables exactly as they were.
func TestServe(t *testing.T) {
	t.Parallel()
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
		carl, err := d.Statements().RequestInsert.InsertID(context.Background(), db, engineio.RequestInsertParams{TaskID: alphaID, User: "carl", Requested: 2})
		if err != nil {
			t.Fatal(err)
		}

		const token = "tok-3nS9xq"
		bearer := []string{"Authorization", "Bearer " + token}
		s := startServeEnv(t, dsn, []string{"LOANQ_SERVE_TOKEN=" + token}, "--cache", "0s", "--metrics-per-user", "--stale-after", "1h")
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
		// It expires: --session-ttl, 12h by default.
		if until := time.Until(cookie.Expires); cookie.MaxAge != 12*3600 || until < 11*time.Hour || until > 13*time.Hour {
			t.Errorf("session cookie: Max-Age %d, Expires %s; want 43200 and 12h from now", cookie.MaxAge, cookie.Expires)
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
	t.Parallel()
	dsn := testdb.Fresh(t, "sqlite")
	prepare(t, dsn, 1)
	emptyFile := filepath.Join(t.TempDir(), "empty-token")
	tokenFile := filepath.Join(t.TempDir(), "token")
	for path, body := range map[string]string{emptyFile: "\n", tokenFile: "s3cret-y\n"} {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
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
		{[]string{"--listen", "127.0.0.1:0", "--max-conns", "0"}, "--max-conns"},
		{[]string{"--listen", "127.0.0.1:0", "--max-conns", "500"}, "--max-conns"},
		{[]string{"--listen", "127.0.0.1:0", "--max-tasks", "-1"}, "--max-tasks"},
		{[]string{"--listen", "127.0.0.1:0", "--session-ttl", "10s"}, "--session-ttl"},
		{[]string{"--listen", "127.0.0.1:0", "--session-ttl", "forever"}, "--session-ttl"},
		// Beyond loopback a token is required, and an empty one is no token.
		{[]string{"--listen", "0.0.0.0:0"}, "without a token"},
		{[]string{"--listen", ":0"}, "without a token"},
		{[]string{"--listen", "[::]:0"}, "without a token"},
		{[]string{"--listen", "0.0.0.0:0", "--token-file", emptyFile}, "token is empty"},
		{[]string{"--listen", "0.0.0.0:0", "--token-file", filepath.Join(t.TempDir(), "nosuch")}, "--token-file"},
		{[]string{"--listen", "0.0.0.0:0", "--token-file", tokenFile, "--no-auth"}, "--no-auth"},
		// A token on the command line, where ps shows it to every user of
		// the machine, is refused whatever else is given (docs/security.md); the
		// message says where a token goes instead.
		{[]string{"--listen", "127.0.0.1:0", "--token", "s3cret-x"}, "--token is refused"},
		{[]string{"--listen", "0.0.0.0:0", "--token=s3cret-x"}, "--token-file PATH, or set LOANQ_SERVE_TOKEN"},
		{[]string{"--listen", "0.0.0.0:0", "--token", "s3cret-x", "--no-auth"}, "--token is refused"},
		{[]string{"--listen", "127.0.0.1:0", "--token", ""}, "--token is refused"},
		// The API (docs/api.md): its flags need --api; proxy needs trusted addresses.
		{[]string{"--listen", "127.0.0.1:0", "--auth", "token"}, "--api"},
		{[]string{"--listen", "127.0.0.1:0", "--trusted-proxy", "10.0.0.1"}, "--api"},
		{[]string{"--listen", "127.0.0.1:0", "--api", "--auth", "proxy"}, "--trusted-proxy"},
		{[]string{"--listen", "127.0.0.1:0", "--api", "--auth", "proxy", "--trusted-proxy", "10.0.0.0/99"}, "--trusted-proxy"},
		{[]string{"--listen", "127.0.0.1:0", "--api", "--trusted-proxy", "10.0.0.1"}, "--auth proxy"},
		{[]string{"--listen", "127.0.0.1:0", "--api", "--auth", "ldap"}, "--auth"},
		// The background loops' periods.
		{[]string{"--listen", "127.0.0.1:0", "--refill", "--refill-every", "100ms"}, "--refill-every"},
		{[]string{"--listen", "127.0.0.1:0", "--refill-every", "soon"}, "--refill-every"},
		{[]string{"--listen", "127.0.0.1:0", "--backlog-every", "500ms"}, "--backlog-every"},
		{[]string{"--listen", "127.0.0.1:0", "--backlog-every", "-1m"}, "--backlog-every"},
	}
	// Every flag is checked before the database is opened: the same answers
	// with a database nobody listens for (a connection error otherwise).
	unreachable := "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"
	for _, c := range cases {
		if slices.Contains(c.args, busy.Addr().String()) {
			continue // the listen socket is opened after the database
		}
		for _, db := range []string{dsn, unreachable} {
			r := loanq(t, db, "x", append([]string{"serve"}, c.args...)...)
			if r.code != 2 || !strings.Contains(r.stderr, c.says) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
				t.Errorf("serve %v on %s: exit %d, stderr %q; want exit 2 and one line naming %q", c.args, db, r.code, r.stderr, c.says)
			}
			if strings.Contains(r.stdout+r.stderr, "s3cret") {
				t.Errorf("serve %v: the output shows the token: %s%s", c.args, r.stdout, r.stderr)
			}
		}
	}
	if r := loanq(t, dsn, "x", "serve", "--listen", busy.Addr().String()); r.code != 2 || !strings.Contains(r.stderr, "another process uses that port") {
		t.Errorf("serve on a busy port: exit %d, stderr %q", r.code, r.stderr)
	}
	// LOANQ_SERVE_TOKEN set but empty, as `LOANQ_SERVE_TOKEN=$TOKEN` leaves it
	// when $TOKEN is unset: refused, on loopback too. Set, it contradicts
	// --no-auth and a token file.
	for _, c := range []struct {
		env  string
		args []string
		says string
	}{
		{"LOANQ_SERVE_TOKEN=", []string{"--listen", "0.0.0.0:0"}, "token is empty"},
		{"LOANQ_SERVE_TOKEN=", []string{"--listen", "127.0.0.1:0"}, "token is empty"},
		{"LOANQ_SERVE_TOKEN=s3cret-x", []string{"--listen", "0.0.0.0:0", "--no-auth"}, "--no-auth"},
		{"LOANQ_SERVE_TOKEN=s3cret-x", []string{"--listen", "127.0.0.1:0", "--token-file", tokenFile}, "once"},
	} {
		cmd := command(context.Background(), dsn, "x", append([]string{"serve"}, c.args...)...)
		cmd.Env = append(cmd.Env, c.env)
		out, err := cmd.CombinedOutput()
		if code := exitCode(err); code != 2 || !strings.Contains(string(out), c.says) || strings.Contains(string(out), "s3cret") {
			t.Errorf("serve %v with %s: exit %d %q; want 2 and a message naming %q", c.args, c.env, code, out, c.says)
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

// exitCode is a finished command's exit status.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// Beyond loopback serve runs with a token from a file or the environment,
// or without one only when --no-auth says so; the token from either source
// guards the figures.
func TestServeBeyondLoopback(t *testing.T) {
	t.Parallel()
	dsn := testdb.Fresh(t, "sqlite")
	prepare(t, dsn, 5)
	mustOK(t, dsn, "admin", "task", "create", "alpha", "--where", "eligible = 1")
	tokenFile := filepath.Join(t.TempDir(), "serve-token")
	if err := os.WriteFile(tokenFile, []byte("from-file-7Qx\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	guarded := func(s *server, token string) {
		t.Helper()
		if resp, _ := s.get(t, "/api/dashboard"); resp.StatusCode != 401 {
			t.Errorf("/api/dashboard without the token: %d, want 401", resp.StatusCode)
		}
		if resp, body := s.get(t, "/api/dashboard", "Authorization", "Bearer "+token); resp.StatusCode != 200 || !strings.Contains(body, `"alpha"`) {
			t.Errorf("/api/dashboard with the token: %d %s", resp.StatusCode, body)
		}
	}
	s := startServe(t, dsn, "--listen", "0.0.0.0:0", "--token-file", tokenFile)
	guarded(s, "from-file-7Qx")
	if strings.Contains(s.stderr.String(), "warning") {
		t.Errorf("a token file of mode 0600: no warning expected, stderr %q", s.stderr.String())
	}
	s.stop(t)
	s = startServeEnv(t, dsn, []string{"LOANQ_SERVE_TOKEN=from-env-2Rk"}, "--listen", "0.0.0.0:0")
	guarded(s, "from-env-2Rk")
	s.stop(t)
	s = startServe(t, dsn, "--listen", "0.0.0.0:0", "--no-auth")
	if resp, body := s.get(t, "/api/dashboard"); resp.StatusCode != 200 || !strings.Contains(body, `"alpha"`) {
		t.Errorf("--no-auth: /api/dashboard %d %s, want 200 without a token", resp.StatusCode, body)
	}
	s.stop(t)
	if !strings.Contains(s.stderr.String(), "without a token") {
		t.Errorf("--no-auth beyond loopback should warn on stderr; got %q", s.stderr.String())
	}
}

// The Host allow-list: a page of another site whose name resolves to
// 127.0.0.1 (DNS rebinding) makes the browser send its own name as Host; an
// unauthenticated loopback dashboard must not answer it. IP addresses,
// localhost and --allowed-hosts are answered, /healthz whatever the Host; a
// cross-origin POST is refused. A client that never finishes its request
// headers is dropped (ReadHeaderTimeout).
func TestServeHostCheck(t *testing.T) {
	// Parallel: the 10 s it checks is serve's own header timer, and the bound
	// (20 s) leaves room for a loaded machine.
	t.Parallel()
	dsn := testdb.Fresh(t, "sqlite")
	prepare(t, dsn, 5)
	mustOK(t, dsn, "admin", "task", "create", "alpha", "--where", "eligible = 1")
	s := startServe(t, dsn, "--allowed-hosts", "dash.test,board.test")
	port := strings.TrimPrefix(s.url, "http://127.0.0.1:")

	// The slow client starts first and is checked last.
	slow, err := net.Dial("tcp", "127.0.0.1:"+port)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	slowStart := time.Now()
	if _, err := slow.Write([]byte("GET /api/dashboard HTTP/1.1\r\nHost: 127.0.0.1\r\n")); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		host string
		want int
	}{
		{"attacker.example:" + port, 403}, {"rebind.127.0.0.1.nip.io:" + port, 403}, {"dash.test.attacker.example", 403},
		{"127.0.0.1:" + port, 200}, {"localhost:" + port, 200}, {"[::1]:" + port, 200},
		{"dash.test:" + port, 200}, {"BOARD.TEST", 200},
	} {
		for _, path := range []string{"/", "/api/dashboard", "/metrics", "/tasks/alpha"} {
			resp, body := s.get(t, path, "Host", c.host)
			if resp.StatusCode != c.want {
				t.Errorf("GET %s with Host %s: %d, want %d", path, c.host, resp.StatusCode, c.want)
			}
			if c.want == 403 && strings.Contains(body, "alpha") {
				t.Errorf("GET %s with Host %s showed the figures: %s", path, c.host, body)
			}
		}
		if resp, _ := s.get(t, "/healthz", "Host", c.host); resp.StatusCode != 200 {
			t.Errorf("/healthz with Host %s: %d, want 200", c.host, resp.StatusCode)
		}
	}
	post := func(origin string) int {
		req, _ := http.NewRequest("POST", s.url+"/api/dashboard", strings.NewReader("{}"))
		req.Header.Set("Origin", origin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("http://attacker.example"); code != 403 {
		t.Errorf("POST from another origin: %d, want 403", code)
	}
	if code := post(s.url); code != 405 {
		t.Errorf("POST from the same origin: %d, want 405 (no such route)", code)
	}

	slow.SetReadDeadline(time.Now().Add(30 * time.Second))
	b, err := io.ReadAll(slow)
	took := time.Since(slowStart)
	if took > 20*time.Second || (err != nil && !errors.Is(err, io.EOF)) {
		t.Errorf("a client that never ended its headers was held %s (%v, read %q); want it dropped after about 10 s", took, err, b)
	}
	t.Logf("unfinished headers: connection closed after %s", took.Round(time.Millisecond))
}

// When the database goes away after serve started, every page and JSON
// says in one line that it is unreachable and shows none of the connection
// details the driver's error holds (host, port, user, database name); the
// serve process logs them on stderr, for its operator, and notes the
// recovery once the database is back.
func TestServeDatabaseDownShowsNoConnectionDetails(t *testing.T) {
	t.Parallel()
	for _, dialect := range []string{"postgres", "mysql"} {
		t.Run(dialect, func(t *testing.T) {
			dsn := testdb.Fresh(t, dialect)
			prepare(t, dsn, 10)
			mustOK(t, dsn, "admin", "task", "create", "alpha", "--where", "eligible = 1")
			mustOK(t, dsn, "ana", "work", "get", "alpha", "--count", "2")
			proxy, viaProxy, dbName, proxyPort, _ := cutproxy.Through(t, dsn)
			s := startServe(t, viaProxy, "--cache", "0s")
			health := func() (int, map[string]any, string) {
				resp, body := s.get(t, "/healthz")
				var v map[string]any
				if err := json.Unmarshal([]byte(body), &v); err != nil {
					t.Fatalf("/healthz: %q", body)
				}
				return resp.StatusCode, v, body
			}
			if code, _, body := health(); code != 200 {
				t.Fatalf("/healthz before the cut: %d %s", code, body)
			}
			proxy.Cut()
			waitHealth := func(want int) {
				t.Helper()
				deadline := time.Now().Add(30 * time.Second)
				for {
					code, _, body := health()
					if code == want {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("/healthz still %d %s 30 s after the change; want %d", code, body, want)
					}
					time.Sleep(200 * time.Millisecond)
				}
			}
			waitHealth(503)
			leaks := []string{proxyPort, dbName, "127.0.0.1", "user=", "root@", "failed to connect", "dial tcp", "dial error", "refused", "connect:", "EOF", "driver:"}
			for _, c := range []struct {
				path     string
				code     int
				sayDown  bool
				wantBody string
			}{
				{"/", 200, true, "alpha"},               // the last figures, with the line
				{"/api/dashboard", 200, true, "alpha"},  // likewise
				{"/tasks/alpha", 503, true, ""},         // read live: only the line
				{"/healthz", 503, false, "unavailable"}, // the state
				{"/metrics", 200, false, "loanq_database_up 0"},
			} {
				resp, body := s.get(t, c.path)
				if resp.StatusCode != c.code {
					t.Errorf("%s with the database down: %d, want %d\n%s", c.path, resp.StatusCode, c.code, body)
				}
				for _, leak := range leaks {
					if strings.Contains(body, leak) {
						t.Errorf("%s with the database down shows %q:\n%s", c.path, leak, body)
					}
				}
				if c.sayDown && !strings.Contains(body, "the database is unreachable") {
					t.Errorf("%s with the database down does not say so:\n%s", c.path, body)
				}
				if !strings.Contains(body, c.wantBody) {
					t.Errorf("%s with the database down lacks %q:\n%s", c.path, c.wantBody, body)
				}
			}
			proxy.Restore()
			waitHealth(200)
			if _, body := s.get(t, "/api/dashboard"); strings.Contains(body, `"error"`) {
				t.Errorf("/api/dashboard after the database came back still reports an error: %s", body)
			}
			s.stop(t)
			log := s.stderr.String()
			if !strings.Contains(log, "refresh failed") || !strings.Contains(log, "answers again") {
				t.Errorf("serve's stderr should log the failure (for the operator) and the recovery:\n%s", log)
			}
		})
	}
}

// 1,500 health checks, 150 at a time, with dashboard and task-page views
// and a Prometheus scraper among them: serve never holds more than
// --max-conns sessions on the PostgreSQL server (counted in pg_stat_activity
// throughout), every health check is answered 200, and other clients keep
// working (`loanq lock list` during the burst).
func TestServeConnectionBound(t *testing.T) {
	t.Parallel()
	dsn := testdb.Fresh(t, "postgres")
	d, e := prepare(t, dsn, 30)
	mustOK(t, dsn, "admin", "task", "create", "alpha", "--where", "eligible = 1")
	mustOK(t, dsn, "admin", "task", "create", "beta", "--where", "eligible = 1")
	mustOK(t, dsn, "ana", "work", "get", "alpha", "--count", "2")
	const app = "loanq_serve_burst"
	serveDSN := dsn + "&application_name=" + app
	const maxConns = 3
	s := startServe(t, serveDSN, "--cache", "0s", "--max-conns", strconv.Itoa(maxConns))
	db := e.DB
	sessions := func() int {
		return int(count(t, d, db, "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = ?", app))
	}

	stop := make(chan struct{})
	var most, samples int
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			default:
			}
			var n int
			if err := db.QueryRow("SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err == nil {
				most = max(most, n)
				samples++
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()

	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 150}}
	var (
		mu     sync.Mutex
		status = map[string]map[int]int{}
		wg     sync.WaitGroup
	)
	jobs := make(chan string)
	for w := 0; w < 150; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for path := range jobs {
				code := -1
				if resp, err := client.Get(s.url + path); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					code = resp.StatusCode
				}
				mu.Lock()
				if status[path] == nil {
					status[path] = map[int]int{}
				}
				status[path][code]++
				mu.Unlock()
			}
		}()
	}
	lockList := make(chan result, 1)
	go func() { lockList <- loanq(t, dsn, "ops", "lock", "list") }()
	start := time.Now()
	for i := 0; i < 1500; i++ {
		jobs <- "/healthz"
		switch i % 10 {
		case 3:
			jobs <- "/tasks/alpha"
		case 6:
			jobs <- "/api/dashboard"
		case 9:
			jobs <- "/metrics"
		}
	}
	close(jobs)
	wg.Wait()
	took := time.Since(start)
	lock := <-lockList
	close(stop)
	<-sampled
	t.Logf("burst of 1,950 requests in %s; at most %d serve sessions in pg_stat_activity over %d samples; now %d", took.Round(time.Millisecond), most, samples, sessions())
	if samples < 10 || most < 1 {
		t.Fatalf("pg_stat_activity was sampled %d times, most %d: the test did not watch the burst", samples, most)
	}
	if most > maxConns {
		t.Errorf("serve held %d sessions on the server during the burst; --max-conns %d", most, maxConns)
	}
	for path, codes := range status {
		if len(codes) != 1 || codes[200] == 0 {
			t.Errorf("%s during the burst: %v; want only 200", path, codes)
		}
	}
	if status["/healthz"][200] != 1500 {
		t.Errorf("health checks answered 200: %d of 1500", status["/healthz"][200])
	}
	if lock.code != 0 {
		t.Errorf("`loanq lock list` during the burst: exit %d %s", lock.code, lock.stderr)
	}
}

// Thousands of tasks: the page and /api/dashboard show the busiest
// --max-tasks (100) with every task that has work among them, say how many
// they left out, keep the totals over all tasks, and /api/dashboard comes
// gzipped to a client that accepts it.
func TestServeManyTasks(t *testing.T) {
	t.Parallel()
	dsn := testdb.Fresh(t, "sqlite")
	d, e := prepare(t, dsn, 40)
	db := e.DB
	ctx := context.Background()
	const tasks = 3000
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < tasks; i++ {
		if _, err := d.Statements().TaskInsert.InsertID(ctx, tx, engineio.TaskInsertParams{
			Name: fmt.Sprintf("task-%04d", i), Source: "loan", Key: "id", Criteria: "eligible = 1", Order: "priority",
			LockStrategy: "lease", LeaseTTLMS: 60000, CreatedBy: "admin", KeyKind: "integer",
		}); err != nil {
			t.Fatal(err)
		}
	}
	// 40 criteria-query runs per task, as a long-lived installation has:
	// what made the unbounded JSON 12.8 MB.
	if _, err := tx.Exec(`INSERT INTO loanq_query_run (task_id, strategy, holder, started_at, duration_ms, rows_found, requests_served, loans_assigned)
		SELECT t.id, 'lease', 'host:1', strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-' || (t.id % 90) || ' minutes'), 100 + t.id % 77, 25, 1, 3
		FROM loanq_task t, (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 40) SELECT i FROM n)`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	busy := []string{"task-0042", "task-1500", "task-2999"}
	mustOK(t, dsn, "ana", "work", "get", busy[0], "--count", "2")
	mustOK(t, dsn, "ben", "work", "get", busy[1], "--count", "1")
	mustOK(t, dsn, "carl", "work", "get", busy[2], "--count", "3")

	fetch := func(s *server) (raw []byte, gz int, snap map[string]any) {
		t.Helper()
		req, _ := http.NewRequest("GET", s.url+"/api/dashboard", nil)
		req.Header.Set("Accept-Encoding", "gzip")
		resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("/api/dashboard with Accept-Encoding gzip: %d, Content-Encoding %q", resp.StatusCode, resp.Header.Get("Content-Encoding"))
		}
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("/api/dashboard says gzip but is not: %v", err)
		}
		raw, err = io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &snap); err != nil {
			t.Fatalf("/api/dashboard: %v", err)
		}
		return raw, len(body), snap
	}

	all := startServe(t, dsn, "--max-tasks", "0")
	fullRaw, fullGz, full := fetch(all)
	all.stop(t)
	s := startServe(t, dsn)
	raw, gz, snap := fetch(s)
	t.Logf("%d tasks: /api/dashboard with every task %d bytes (%d gzipped); bounded to the busiest 100: %d bytes (%d gzipped)",
		tasks, len(fullRaw), fullGz, len(raw), gz)
	shown := snap["tasks"].([]any)
	if len(full["tasks"].([]any)) != tasks || len(shown) != 100 || snap["tasks_total"] != float64(tasks) || snap["tasks_omitted"] != float64(tasks-100) {
		t.Fatalf("bounded: %d tasks shown, tasks_total %v, tasks_omitted %v; want 100, %d, %d", len(shown), snap["tasks_total"], snap["tasks_omitted"], tasks, tasks-100)
	}
	if len(raw) > 1<<20 || gz > 200<<10 || len(raw)*10 > len(fullRaw) {
		t.Errorf("bounded JSON %d bytes (%d gzipped); want under 1 MiB (200 KiB gzipped) and a tenth of the unbounded %d", len(raw), gz, len(fullRaw))
	}
	names := map[string]bool{}
	for _, x := range shown {
		names[x.(map[string]any)["name"].(string)] = true
	}
	for _, b := range busy {
		if !names[b] {
			t.Errorf("task %s, which has active work, is not among the 100 shown", b)
		}
	}
	if got, want := snap["total_active"], count(t, d, db, "SELECT COUNT(*) FROM loanq_work WHERE disposition IS NULL"); got != want {
		t.Errorf("total_active %v; the database has %v (the totals count every task)", got, want)
	}
	// Plain JSON for a client that does not ask for gzip; the same fields.
	resp, body := s.get(t, "/api/dashboard")
	if resp.Header.Get("Content-Encoding") != "" || !strings.Contains(body, `"tasks_omitted":2900`) {
		t.Errorf("/api/dashboard without Accept-Encoding: Content-Encoding %q, body %.200s", resp.Header.Get("Content-Encoding"), body)
	}
	// The page embeds the same bounded figures (its script says what was left out).
	resp, body = s.get(t, "/")
	if resp.StatusCode != 200 || !strings.Contains(body, `"tasks_omitted":2900`) || len(body) > 1<<20 || !strings.Contains(body, `id="omitted"`) {
		t.Errorf("/: %d, %d bytes; want the bounded figures embedded and the note element", resp.StatusCode, len(body))
	}
}
