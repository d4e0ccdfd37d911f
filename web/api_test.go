package web

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loanq/loanq/dashboard"
	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// apiFixture is a serve --api (Handler with an Engine, as serve builds it)
// on a fresh database with 20 loans, a task "t" and
// tokens for two processors (ana, bob) and a supervisor (sam).
type apiFixture struct {
	d      drivers.Driver
	e      *dispatch.Engine
	db     *sql.DB // the tests' own reads and changes around the engine
	url    string
	tokens map[string]*dispatch.IssuedToken
}

func newAPIFixture(t *testing.T, dsn string, lock drivers.Strategy) *apiFixture {
	t.Helper()
	d, db := testdb.Migrated(t, dsn)
	testdb.CreateLoans(t, d, db, 20)
	e := dispatch.New(db, d)
	ctx := context.Background()
	if _, _, err := e.Admin().CreateTask(ctx, dispatch.TaskSpec{Name: "t", Where: "eligible = 1", Order: "priority", Lock: lock, CreatedBy: "admin"}); err != nil {
		t.Fatal(err)
	}
	f := &apiFixture{d: d, e: e, db: db, tokens: map[string]*dispatch.IssuedToken{}}
	for user, role := range map[string]string{"ana": "processor", "bob": "processor", "sam": "supervisor"} {
		tok, err := e.Admin().CreateToken(ctx, user, role, "admin", 0)
		if err != nil {
			t.Fatal(err)
		}
		f.tokens[user] = tok
	}
	h, err := Handler(Config{Figures: &dashboard.Source{DB: db, Driver: d, Admin: e.Admin(), TTL: time.Second},
		Engine: e, Log: func(s string) { t.Log(s) }})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	f.url = ts.URL
	return f
}

type apiAnswer struct {
	status int
	header http.Header
	doc    map[string]any
}

// call sends method path as user ("" for no token; "raw:TOKEN" for a given
// token) with body (nil: none) and decodes the answer, checking it against
// the OpenAPI document and that errors are problem documents whose status is
// the HTTP status.
func (f *apiFixture) call(t *testing.T, user, method, path string, body any) apiAnswer {
	t.Helper()
	var rd io.Reader
	var sent []byte
	if body != nil {
		sent, _ = json.Marshal(body)
		rd = bytes.NewReader(sent)
	}
	req, err := http.NewRequest(method, f.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	switch {
	case strings.HasPrefix(user, "raw:"):
		req.Header.Set("Authorization", "Bearer "+strings.TrimPrefix(user, "raw:"))
	case user != "":
		req.Header.Set("Authorization", "Bearer "+f.tokens[user].Token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	checkSpec(t, req, sent, res, raw)
	a := apiAnswer{status: res.StatusCode, header: res.Header}
	if err := json.Unmarshal(raw, &a.doc); err != nil {
		t.Fatalf("%s %s: %d, not a JSON object: %s", method, path, res.StatusCode, raw)
	}
	if res.StatusCode >= 400 {
		if ct := res.Header.Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("%s %s: %d with Content-Type %q", method, path, res.StatusCode, ct)
		}
		if s, _ := a.doc["status"].(float64); int(s) != res.StatusCode || a.doc["title"] == "" || a.doc["detail"] == "" {
			t.Errorf("%s %s: problem %s", method, path, raw)
		}
	} else if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	return a
}

func (f *apiFixture) want(t *testing.T, a apiAnswer, status int, what string) {
	t.Helper()
	if a.status != status {
		t.Fatalf("%s: status %d, want %d: %v", what, a.status, status, a.doc)
	}
}

func loansOf(doc map[string]any) []int64 {
	var out []int64
	for _, l := range doc["loans"].([]any) {
		out = append(out, int64(l.(float64)))
	}
	return out
}

// Every endpoint's success and error answers, and who may do what: a
// processor acts only as its token's user; a supervisor may also see and
// reclaim everyone's work; no token, a revoked or an expired one is 401.
func TestAPIEndpoints(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := newAPIFixture(t, dsn, "")
		ctx := context.Background()

		// Authentication.
		f.want(t, f.call(t, "", "GET", "/api/v1/tasks", nil), 401, "no token")
		f.want(t, f.call(t, "raw:lqt_nope", "GET", "/api/v1/tasks", nil), 401, "unknown token")
		f.want(t, f.call(t, "raw:"+dispatch.HashToken(f.tokens["ana"].Token), "GET", "/api/v1/tasks", nil), 401, "the hash as token")
		f.want(t, f.call(t, "", "GET", "/api/v1/openapi.json", nil), 200, "openapi without token")
		f.want(t, f.call(t, "ana", "GET", "/api/v1/nope", nil), 404, "unknown endpoint")

		// A wrong method on a path of the API is 405 with Allow naming the
		// path's methods (HEAD with GET), on every route.
		allow := map[string][]string{}
		for _, rt := range (&api{}).routes() {
			allow[rt.path] = append(allow[rt.path], rt.method)
			if rt.method == "GET" {
				allow[rt.path] = append(allow[rt.path], "HEAD")
			}
		}
		concrete := strings.NewReplacer("{task}", "t", "{id}", "1", "{loan}", "1")
		for path, methods := range allow {
			slices.Sort(methods)
			for _, m := range []string{"GET", "POST", "DELETE", "PUT", "PATCH"} {
				if slices.Contains(methods, m) {
					continue
				}
				a := f.call(t, "ana", m, concrete.Replace(path), nil)
				f.want(t, a, 405, m+" "+path)
				if got := a.header.Get("Allow"); got != strings.Join(methods, ", ") {
					t.Errorf("%s %s: Allow %q, want %q", m, path, got, strings.Join(methods, ", "))
				}
			}
		}

		a := f.call(t, "ana", "GET", "/api/v1/tasks", nil)
		f.want(t, a, 200, "tasks")
		if tasks := a.doc["tasks"].([]any); len(tasks) != 1 || tasks[0].(map[string]any)["name"] != "t" {
			t.Fatalf("tasks %v", a.doc)
		}

		// Asking for work: bad input 400, unknown task 404, then served.
		for _, body := range []any{map[string]any{"count": 0}, map[string]any{"wait_ms": 60001}, map[string]any{"wait_ms": -1},
			map[string]any{"cuont": 2}, "text"} {
			f.want(t, f.call(t, "ana", "POST", "/api/v1/tasks/t/requests", body), 400, fmt.Sprintf("body %v", body))
		}
		f.want(t, f.call(t, "ana", "POST", "/api/v1/tasks/nope/requests", map[string]any{"count": 1}), 404, "unknown task")
		// The API's words: its fields and endpoints, not the command
		// line's flags and commands (checkSpec refuses those in any
		// problem).
		for _, c := range []struct {
			method, path string
			body         any
			status       int
			detail       string
		}{
			{"POST", "/api/v1/tasks/t/requests", map[string]any{"count": 0}, 400, "invalid count 0: ask for between 1 and 1000 loans"},
			{"POST", "/api/v1/tasks/t/requests", map[string]any{"count": 1001}, 400, "invalid count 1001"},
			{"POST", "/api/v1/tasks/nope/requests", map[string]any{"count": 1}, 404, "GET /api/v1/tasks lists the tasks"},
			{"GET", "/api/v1/requests/999999", nil, 404, "unknown request id 999999: give the request_id that POST /api/v1/tasks/{task}/requests answered"},
			{"POST", "/api/v1/tasks/t/loans/1/disposition", map[string]any{"action": "return", "after": "100h"}, 400, "invalid after 100h: give a duration from 0s to 72h"},
			{"POST", "/api/v1/tasks/t/loans/1/disposition", map[string]any{"action": "return", "after": "soon"}, 400, `invalid after "soon"`},
			{"POST", "/api/v1/tasks/t/loans/1/disposition", map[string]any{"action": "complete", "after": "1h"}, 400, "after only goes with return"},
			{"POST", "/api/v1/tasks/t/loans/1/disposition", map[string]any{"action": "finish"}, 400, `invalid action "finish"`},
			{"POST", "/api/v1/tasks/t/loans/x/disposition", map[string]any{"action": "complete"}, 400, "a request's loans or GET /api/v1/pipeline show"},
			{"POST", "/api/v1/tasks/t/loans/987654/disposition", map[string]any{"action": "complete"}, 400, "GET /api/v1/pipeline lists your active loans"},
			{"POST", "/api/v1/tasks/t/reclaim", map[string]any{"of": " bob"}, 400, `invalid of " bob"`},
		} {
			user := "ana"
			if strings.HasSuffix(c.path, "/reclaim") {
				user = "sam"
			}
			a := f.call(t, user, c.method, c.path, c.body)
			f.want(t, a, c.status, fmt.Sprintf("%s %s %v", c.method, c.path, c.body))
			if d, _ := a.doc["detail"].(string); !strings.Contains(d, c.detail) {
				t.Errorf("%s %s %v: detail %q, want it to say %q", c.method, c.path, c.body, d, c.detail)
			}
		}
		a = f.call(t, "ana", "POST", "/api/v1/tasks/t/requests", map[string]any{"count": 2, "wait_ms": 5000})
		f.want(t, a, 200, "get")
		if a.doc["status"] != "assigned" || a.doc["user"] != "ana" || len(loansOf(a.doc)) != 2 {
			t.Fatalf("get: %v", a.doc)
		}
		id := int64(a.doc["request_id"].(float64))
		loans := loansOf(a.doc)
		path := fmt.Sprintf("/api/v1/requests/%d", id)

		// Reading a request: its user and supervisors; not other processors.
		f.want(t, f.call(t, "ana", "GET", path, nil), 200, "own request")
		f.want(t, f.call(t, "sam", "GET", path+"?wait_ms=100", nil), 200, "supervisor reads")
		f.want(t, f.call(t, "bob", "GET", path, nil), 403, "another's request")
		f.want(t, f.call(t, "bob", "DELETE", path, nil), 403, "cancel another's")
		f.want(t, f.call(t, "sam", "DELETE", path, nil), 403, "supervisor cancels another's")
		c := f.call(t, "ana", "DELETE", path, nil)
		f.want(t, c, 200, "cancel a served request")
		if c.doc["status"] != "assigned" || !strings.Contains(c.header.Get("Loanq-Notice"), "served before") {
			t.Fatalf("cancel after serving: %v %v", c.doc, c.header)
		}
		f.want(t, f.call(t, "ana", "GET", "/api/v1/requests/999999", nil), 404, "unknown request")
		f.want(t, f.call(t, "ana", "GET", "/api/v1/requests/abc", nil), 400, "bad request id")
		f.want(t, f.call(t, "ana", "GET", path+"?wait_ms=x", nil), 400, "bad wait_ms")

		// Pipeline: the token's user's work only.
		a = f.call(t, "ana", "GET", "/api/v1/pipeline", nil)
		f.want(t, a, 200, "pipeline")
		if a.doc["user"] != "ana" || len(a.doc["work"].([]any)) != 2 {
			t.Fatalf("pipeline %v", a.doc)
		}
		a = f.call(t, "bob", "GET", "/api/v1/pipeline", nil)
		if a.doc["user"] != "bob" || len(a.doc["work"].([]any)) != 0 {
			t.Fatalf("bob's pipeline %v", a.doc)
		}

		// Disposition: not yours 403 (and nothing changes), bad input 400.
		disp := func(loan int64) string { return fmt.Sprintf("/api/v1/tasks/t/loans/%d/disposition", loan) }
		f.want(t, f.call(t, "bob", "POST", disp(loans[0]), map[string]any{"action": "complete"}), 403, "dispose another's")
		f.want(t, f.call(t, "sam", "POST", disp(loans[0]), map[string]any{"action": "complete"}), 403, "supervisor disposes another's")
		f.want(t, f.call(t, "ana", "POST", disp(loans[0]), map[string]any{"action": "finish"}), 400, "bad action")
		f.want(t, f.call(t, "ana", "POST", disp(loans[1]), map[string]any{"action": "return"}), 400, "return without after")
		f.want(t, f.call(t, "ana", "POST", "/api/v1/tasks/t/loans/x/disposition", map[string]any{"action": "complete"}), 400, "bad loan")
		f.want(t, f.call(t, "ana", "POST", "/api/v1/tasks/nope/loans/1/disposition", map[string]any{"action": "complete"}), 404, "unknown task")
		a = f.call(t, "ana", "POST", disp(loans[0]), map[string]any{"action": "complete"})
		f.want(t, a, 200, "complete")
		if a.doc["disposition"] != "complete" || a.doc["user"] != "ana" {
			t.Fatalf("complete %v", a.doc)
		}
		f.want(t, f.call(t, "ana", "POST", disp(loans[0]), map[string]any{"action": "complete"}), 400, "twice")
		a = f.call(t, "ana", "POST", disp(loans[1]), map[string]any{"action": "return", "after": "1h"})
		f.want(t, a, 200, "return")
		if a.doc["return_after_ms"] != float64(3600000) {
			t.Fatalf("return %v", a.doc)
		}

		// Supervisor endpoints.
		b := f.call(t, "bob", "POST", "/api/v1/tasks/t/requests", map[string]any{"count": 1})
		f.want(t, b, 200, "bob gets")
		f.want(t, f.call(t, "bob", "GET", "/api/v1/work", nil), 403, "work list as processor")
		f.want(t, f.call(t, "bob", "POST", "/api/v1/tasks/t/reclaim", map[string]any{}), 403, "reclaim as processor")
		a = f.call(t, "sam", "GET", "/api/v1/work?task=t", nil)
		f.want(t, a, 200, "work list")
		if w := a.doc["work"].([]any); len(w) != 1 || w[0].(map[string]any)["user"] != "bob" {
			t.Fatalf("work %v", a.doc)
		}
		f.want(t, f.call(t, "sam", "GET", "/api/v1/work?older_than=x", nil), 400, "bad older_than")
		a = f.call(t, "sam", "POST", "/api/v1/tasks/t/reclaim", map[string]any{"of": "bob", "dry_run": true})
		f.want(t, a, 200, "reclaim dry run")
		if a.doc["dry_run"] != true || len(a.doc["work"].([]any)) != 1 || a.doc["reclaimed_by"] != "sam" {
			t.Fatalf("reclaim %v", a.doc)
		}
		a = f.call(t, "sam", "POST", "/api/v1/tasks/t/reclaim", map[string]any{"of": "bob"})
		f.want(t, a, 200, "reclaim")
		if p := f.call(t, "bob", "GET", "/api/v1/pipeline", nil); len(p.doc["work"].([]any)) != 0 {
			t.Fatalf("bob's work after reclaim %v", p.doc)
		}
		f.want(t, f.call(t, "sam", "POST", "/api/v1/tasks/nope/reclaim", map[string]any{}), 404, "reclaim unknown task")

		// Revoked and expired tokens are refused from the next call.
		if err := f.e.Admin().RevokeToken(ctx, f.tokens["bob"].ID, "admin"); err != nil {
			t.Fatal(err)
		}
		f.want(t, f.call(t, "bob", "GET", "/api/v1/pipeline", nil), 401, "revoked")
		testdb.Exec(t, f.d, f.db, "UPDATE loanq_api_token SET expires_at = created_at WHERE id = ?", f.tokens["sam"].ID)
		f.want(t, f.call(t, "sam", "GET", "/api/v1/work", nil), 401, "expired")
		f.want(t, f.call(t, "ana", "GET", "/api/v1/pipeline", nil), 200, "ana still in")
	})
}

// A request the task cannot serve yet (another process holds the task's
// lease) answers 202 with the pending request, Retry-After and Location;
// asking again attaches to it; its user cancels it.
func TestAPIPending(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := newAPIFixture(t, dsn, drivers.Lease)
		testdb.Exec(t, f.d, f.db, "UPDATE loanq_task SET lease_owner = 'elsewhere', lease_token = 7, lease_expires_at = '2999-01-01 00:00:00' WHERE name = 't'")
		a := f.call(t, "ana", "POST", "/api/v1/tasks/t/requests", map[string]any{"count": 1, "wait_ms": 300})
		f.want(t, a, 202, "pending")
		id := int64(a.doc["request_id"].(float64))
		if a.doc["status"] != "pending" || a.header.Get("Retry-After") == "" || a.header.Get("Location") != fmt.Sprintf("/api/v1/requests/%d", id) {
			t.Fatalf("pending: %v %v", a.doc, a.header)
		}
		again := f.call(t, "ana", "POST", "/api/v1/tasks/t/requests", map[string]any{"count": 1, "wait_ms": 0})
		f.want(t, again, 202, "attach")
		if int64(again.doc["request_id"].(float64)) != id {
			t.Fatalf("asking again logged another request: %v", again.doc)
		}
		f.want(t, f.call(t, "ana", "GET", fmt.Sprintf("/api/v1/requests/%d?wait_ms=200", id), nil), 202, "still pending")
		c := f.call(t, "ana", "DELETE", fmt.Sprintf("/api/v1/requests/%d", id), nil)
		f.want(t, c, 200, "cancel")
		if c.doc["status"] != "cancelled" {
			t.Fatalf("cancel: %v", c.doc)
		}
	})
}

// Two serve --api on one database (each its own engine and connection
// pool, as two processes have), clients split across them all asking at
// once on a skip task with a short query delay: every client is served in
// full, no loan is handed out twice, and the engine's audit finds nothing.
func TestAPITwoServersOneDatabase(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		const clients, each = 12, 2
		d, db := testdb.Migrated(t, dsn)
		testdb.CreateLoans(t, d, db, 40)
		ctx := context.Background()
		e := dispatch.New(db, d)
		lock := drivers.Strategy("") // SQLite: its only strategy, lease
		if slices.Contains(d.Capabilities().Strategies, drivers.Skip) {
			lock = drivers.Skip
		}
		if _, _, err := e.Admin().CreateTask(ctx, dispatch.TaskSpec{Name: "t", Where: "eligible = 1", Order: "priority",
			Lock: lock, QueryDelay: 50 * time.Millisecond, CreatedBy: "admin"}); err != nil {
			t.Fatal(err)
		}
		var urls []string
		for range 2 {
			_, pool := testdb.Open(t, dsn)
			pool.SetMaxOpenConns(DefaultAPIConns)
			h, err := Handler(Config{Figures: &dashboard.Source{DB: pool, Driver: d, Admin: dispatch.New(pool, d).Admin(), TTL: time.Second},
				Engine: dispatch.New(pool, d), Log: func(s string) { t.Log(s) }})
			if err != nil {
				t.Fatal(err)
			}
			ts := httptest.NewServer(h)
			t.Cleanup(ts.Close)
			urls = append(urls, ts.URL)
		}
		f := &apiFixture{d: d, e: e, db: db, tokens: map[string]*dispatch.IssuedToken{}}
		type result struct {
			user  string
			loans []int64
			err   error
		}
		results := make(chan result, clients)
		start := make(chan struct{})
		for i := range clients {
			user := fmt.Sprintf("p%02d", i)
			tok, err := e.Admin().CreateToken(ctx, user, "processor", "admin", 0)
			if err != nil {
				t.Fatal(err)
			}
			f.tokens[user] = tok
			go func(url string) {
				<-start
				// A client asks, and asks again (attaching) while its
				// request is pending, as docs/api.md says.
				body := []byte(fmt.Sprintf(`{"count": %d, "wait_ms": 5000}`, each))
				for try := 0; try < 20; try++ {
					req, _ := http.NewRequest("POST", url+"/api/v1/tasks/t/requests", bytes.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+tok.Token)
					res, err := http.DefaultClient.Do(req)
					if err != nil {
						results <- result{user: user, err: err}
						return
					}
					var doc map[string]any
					err = json.NewDecoder(res.Body).Decode(&doc)
					res.Body.Close()
					if err != nil || (res.StatusCode != 200 && res.StatusCode != 202) {
						results <- result{user: user, err: fmt.Errorf("status %d: %v %v", res.StatusCode, doc, err)}
						return
					}
					if res.StatusCode == 200 {
						if doc["user"] != user || doc["status"] != "assigned" {
							results <- result{user: user, err: fmt.Errorf("answer %v", doc)}
							return
						}
						results <- result{user: user, loans: loansOf(doc)}
						return
					}
				}
				results <- result{user: user, err: fmt.Errorf("still pending after 20 asks")}
			}(urls[i%2])
		}
		close(start)
		seen := map[int64]string{}
		for range clients {
			r := <-results
			if r.err != nil {
				t.Errorf("%s: %v", r.user, r.err)
				continue
			}
			if len(r.loans) != each {
				t.Errorf("%s got %v", r.user, r.loans)
			}
			for _, l := range r.loans {
				if other, dup := seen[l]; dup {
					t.Errorf("loan %d handed to %s and %s", l, other, r.user)
				}
				seen[l] = r.user
			}
		}
		findings, err := e.Admin().Audit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range findings {
			if x.Count != 0 {
				t.Errorf("audit %s: %d (%s)", x.Check, x.Count, x.Purpose)
			}
		}
		if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_work WHERE disposition IS NULL"); n != clients*each {
			t.Errorf("%d active assignments, want %d", n, clients*each)
		}
	})
}

// --auth proxy: the user header is believed only from --trusted-proxy
// addresses; the groups header makes a supervisor; tokens are not accepted.
// (commands' TestServeProxyFlags: reading the flags.)
func TestAPIProxyAuth(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := newAPIFixture(t, dsn, "")
		serveWith := func(cidr string) string {
			_, trusted, err := net.ParseCIDR(cidr)
			if err != nil {
				t.Fatal(err)
			}
			pa := &ProxyAuth{Trusted: []*net.IPNet{trusted}, UserHeader: "X-Forwarded-User", GroupsHeader: "X-Forwarded-Groups", SupervisorGroup: "loanq-supervisors"}
			h, err := Handler(Config{Figures: &dashboard.Source{DB: f.db, Driver: f.d, Admin: f.e.Admin(), TTL: time.Second}, Engine: f.e, Proxy: pa})
			if err != nil {
				t.Fatal(err)
			}
			ts := httptest.NewServer(h)
			t.Cleanup(ts.Close)
			return ts.URL
		}
		call := func(url, method, path string, h map[string]string) (int, map[string]any) {
			req, _ := http.NewRequest(method, url+path, strings.NewReader(`{"count": 1}`))
			for k, v := range h {
				req.Header.Set(k, v)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var doc map[string]any
			if err := json.NewDecoder(res.Body).Decode(&doc); err != nil {
				t.Fatal(err)
			}
			return res.StatusCode, doc
		}
		trusted, untrusted := serveWith("127.0.0.0/8"), serveWith("10.0.0.0/8")
		code, doc := call(trusted, "POST", "/api/v1/tasks/t/requests", map[string]string{"X-Forwarded-User": "ana"})
		if code != 200 || doc["user"] != "ana" {
			t.Fatalf("through a trusted proxy: %d %v", code, doc)
		}
		if code, doc = call(untrusted, "POST", "/api/v1/tasks/t/requests", map[string]string{"X-Forwarded-User": "ana"}); code != 401 {
			t.Fatalf("header from an untrusted address: %d %v", code, doc)
		}
		if code, _ = call(trusted, "GET", "/api/v1/pipeline", map[string]string{"Authorization": "Bearer " + f.tokens["ana"].Token}); code != 401 {
			t.Fatalf("a token under --auth proxy: %d", code)
		}
		if code, _ = call(trusted, "GET", "/api/v1/work", map[string]string{"X-Forwarded-User": "ana", "X-Forwarded-Groups": "staff"}); code != 403 {
			t.Fatalf("processor's work list: %d", code)
		}
		if code, doc = call(trusted, "GET", "/api/v1/work", map[string]string{"X-Forwarded-User": "sam", "X-Forwarded-Groups": "staff, loanq-supervisors"}); code != 200 || len(doc["work"].([]any)) != 1 {
			t.Fatalf("supervisor's work list: %d %v", code, doc)
		}
	})
}

// POST /api/v1/tasks/{task}/dispositions: several loans in one call, all or
// nothing, every answer checked against the document: someone else's loan
// among them is 403 without saying whose, one not active 400, bad input
// 400 (no loans, a loan twice, more than 1000, a bad key, a bad action),
// an unknown task 404; nothing changes on any refusal.
func TestAPIBatchDisposition(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := newAPIFixture(t, dsn, "")
		a := f.call(t, "ana", "POST", "/api/v1/tasks/t/requests", map[string]any{"count": 4, "wait_ms": 5000})
		f.want(t, a, 200, "ana gets")
		ana := loansOf(a.doc)
		b := f.call(t, "bob", "POST", "/api/v1/tasks/t/requests", map[string]any{"count": 1, "wait_ms": 5000})
		f.want(t, b, 200, "bob gets")
		bob := loansOf(b.doc)
		active := func() int64 {
			return testdb.Int(t, f.d, f.db, "SELECT COUNT(*) FROM loanq_work WHERE disposition IS NULL")
		}
		const path = "/api/v1/tasks/t/dispositions"
		many := make([]int64, 1001)
		for i := range many {
			many[i] = int64(i + 1)
		}
		for _, c := range []struct {
			body   any
			status int
			detail string
		}{
			{map[string]any{"loans": []any{ana[0], bob[0]}, "action": "complete"}, 403, "loan " + fmt.Sprint(bob[0]) + " is not yours: it is assigned to someone else"},
			{map[string]any{"loans": []any{ana[0], 987654}, "action": "complete"}, 400, "loan 987654 has never been assigned in task t: GET /api/v1/pipeline lists your active loans"},
			{map[string]any{"loans": []any{}, "action": "complete"}, 400, `no loan given: "loans" lists the loans`},
			{map[string]any{"action": "complete"}, 400, "no loan given"},
			{map[string]any{"loans": []any{ana[0], ana[0]}, "action": "complete"}, 400, "named twice"},
			{map[string]any{"loans": []any{ana[0], fmt.Sprint(ana[0])}, "action": "complete"}, 400, "named twice"},
			{map[string]any{"loans": many, "action": "complete"}, 400, `1001 loans: "loans" takes at most 1000`},
			{map[string]any{"loans": []any{"x"}, "action": "complete"}, 400, `invalid loan id "x" for task t`},
			{map[string]any{"loans": []any{ana[0]}, "action": "finish"}, 400, `invalid action "finish"`},
			{map[string]any{"loans": []any{ana[0]}, "action": "return"}, 400, `return needs "after"`},
			{map[string]any{"loans": []any{ana[0]}, "action": "complete", "after": "1h"}, 400, "after only goes with return"},
			{map[string]any{"loans": []any{ana[0]}, "action": "complete", "lones": 1}, 400, "invalid JSON body"},
		} {
			before := active()
			a := f.call(t, "ana", "POST", path, c.body)
			f.want(t, a, c.status, fmt.Sprintf("%v", c.body))
			if d, _ := a.doc["detail"].(string); !strings.Contains(d, c.detail) || strings.Contains(d, "bob") {
				t.Errorf("%v: detail %q, want it to say %q (and not whose)", c.body, d, c.detail)
			}
			if after := active(); after != before {
				t.Fatalf("%v refused, yet %d loans were ended", c.body, before-after)
			}
		}
		f.want(t, f.call(t, "ana", "POST", "/api/v1/tasks/nope/dispositions", map[string]any{"loans": []any{1}, "action": "complete"}), 404, "unknown task")
		f.want(t, f.call(t, "", "POST", path, map[string]any{"loans": []any{ana[0]}, "action": "complete"}), 401, "no token")

		a = f.call(t, "ana", "POST", path, map[string]any{"loans": []any{ana[1], ana[0]}, "action": "return", "after": "1h", "note": "both"})
		f.want(t, a, 200, "return two")
		if a.doc["count"] != 2.0 || fmt.Sprint(loansOf(a.doc)) != fmt.Sprint([]int64{ana[1], ana[0]}) || a.doc["return_after_ms"] != 3600000.0 ||
			a.doc["user"] != "ana" || a.doc["task"] != "t" || a.doc["disposition"] != "return" || a.doc["note"] != "both" {
			t.Fatalf("return two: %v", a.doc)
		}
		// Now not active: the batch with them is refused whole.
		f.want(t, f.call(t, "ana", "POST", path, map[string]any{"loans": []any{ana[2], ana[0]}, "action": "complete"}), 400, "not active")
		a = f.call(t, "ana", "POST", path, map[string]any{"loans": []any{ana[2], ana[3]}, "action": "never"})
		f.want(t, a, 200, "never two")
		if n := testdb.Int(t, f.d, f.db, "SELECT COUNT(*) FROM loanq_work WHERE user_name = 'ana' AND disposition IS NULL"); n != 0 {
			t.Errorf("ana has %d active loans, want 0", n)
		}
	})
}
