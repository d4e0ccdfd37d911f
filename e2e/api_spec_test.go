package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loanq/loanq/internal/testkit/apispec"
	"github.com/loanq/loanq/internal/testkit/cutproxy"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// apiSpec is web/openapi.json, the document serve --api serves at
// /api/v1/openapi.json, loaded once.
var apiSpec = sync.OnceValues(func() (*apispec.Doc, error) {
	b, err := os.ReadFile("../web/openapi.json")
	if err != nil {
		return nil, err
	}
	return apispec.Load(b)
})

// checkSpec says how an answer to method path is not one the OpenAPI
// document allows (an undocumented status, another Content-Type, a body
// outside the schema, an undeclared header); nil when it is. It is checked
// with kin-openapi (internal/testkit/apispec).
func checkSpec(method, path string, status int, header http.Header, body []byte) error {
	doc, err := apiSpec()
	if err != nil {
		return err
	}
	return doc.Check(method, path, status, header, body)
}

// checkCall is checkSpec for a call whose request is known: the request
// and its body (nil: none sent) are checked too, and a request the
// document refuses must have been answered with a 4xx.
func checkCall(req *http.Request, body []byte, status int, header http.Header, answer []byte) error {
	doc, err := apiSpec()
	if err != nil {
		return err
	}
	return doc.CheckCall(req, body, status, header, answer)
}

// specSweep calls a real serve --api and records, per documented
// operation, the statuses it answered; every answer must be one the
// OpenAPI document allows.
type specSweep struct {
	t    *testing.T
	url  string
	tok  map[string]string
	seen map[string]map[int]bool // "GET /api/v1/requests/{id}" → statuses
}

// want calls method path as user ("" : no token) with body and fails the
// test unless the answer has status and the document allows it; header
// gives more headers (name, value, …).
func (s *specSweep) want(user, method, path string, body any, status int, header ...string) apiAnswer {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h := http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	a, err := apiClient{url: s.url, token: s.tok[user], header: h}.call(ctx, method, path, body)
	if err != nil {
		s.t.Fatalf("%s %s as %q: %v", method, path, user, err)
	}
	if a.status != status {
		s.t.Errorf("%s %s as %q: %d, want %d: %s", method, path, user, a.status, status, a.body)
	}
	if a.specErr != nil {
		s.t.Errorf("against web/openapi.json: %v", a.specErr)
	}
	doc, _ := apiSpec()
	if tpl, _, ok := doc.Operation(method, path); ok {
		op := method + " " + tpl
		if s.seen[op] == nil {
			s.seen[op] = map[int]bool{}
		}
		s.seen[op][a.status] = true
	}
	return a
}

// TestAPIAnswersMatchOpenAPI: a real `loanq serve --api` process, every
// endpoint of web/openapi.json called for its success and its error
// answers (bad input, unknown, not yours, for supervisors only, no token,
// pending), on an integer-keyed, a text-keyed and a UUID-keyed task. Every
// answer is checked against the document (status documented for the
// operation, Content-Type, headers, body schema); every operation must have
// answered a success and, unless public, an error.
func TestAPIAnswersMatchOpenAPI(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, e := prepare(t, dsn, 20)
		ctx := context.Background()
		mustOK(t, dsn, "admin", "task", "create", "t", "--where", "eligible = 1", "--order", "priority")
		mustOK(t, dsn, "admin", "task", "create", "held", "--where", "eligible = 1", "--order", "priority", "--lock", "lease")
		keyOf := map[string]string{}
		for _, kind := range []struct{ name, col, key string }{
			{"text", "VARCHAR(200)", "LN-2024-000101"},
			{"uuid", "UUID", "0b4f1c2e-5c1d-4f2a-9e7b-000000000101"},
		} {
			testdb.Exec(t, d, e.DB, "CREATE TABLE spec_"+kind.name+" (ref "+kind.col+" NOT NULL PRIMARY KEY, prio INTEGER NOT NULL)")
			testdb.Exec(t, d, e.DB, "INSERT INTO spec_"+kind.name+" (ref, prio) VALUES (?, 1)", kind.key)
			mustOK(t, dsn, "admin", "task", "create", kind.name, "--source", "spec_"+kind.name, "--key", "ref", "--where", "prio = 1", "--order", "prio")
			keyOf[kind.name] = kind.key
		}
		s := &specSweep{t: t, tok: map[string]string{}, seen: map[string]map[int]bool{}}
		for user, role := range map[string]string{"ana": "processor", "bob": "processor", "sam": "supervisor"} {
			tok, err := e.Admin().CreateToken(ctx, user, role, "admin", 0)
			if err != nil {
				t.Fatal(err)
			}
			s.tok[user] = tok.Token
		}
		s.url = startServe(t, dsn, "--api", "--auth", "token").url

		// The document served is the file.
		a := s.want("", "GET", "/api/v1/openapi.json", nil, 200)
		if file, _ := os.ReadFile("../web/openapi.json"); string(a.body) != string(file) {
			t.Errorf("/api/v1/openapi.json is not web/openapi.json")
		}
		s.want("", "GET", "/api/v1/nope", nil, 404)
		// A wrong method: 405 with Allow, on a path with and without
		// parameters.
		a = s.want("ana", "PUT", "/api/v1/tasks", nil, 405)
		if a.header.Get("Allow") != "GET, HEAD" {
			t.Errorf("PUT /api/v1/tasks: Allow %q", a.header.Get("Allow"))
		}
		a = s.want("ana", "PATCH", "/api/v1/requests/1", nil, 405)
		if a.header.Get("Allow") != "DELETE, GET, HEAD" {
			t.Errorf("PATCH /api/v1/requests/1: Allow %q", a.header.Get("Allow"))
		}

		// Tasks; no token.
		s.want("", "GET", "/api/v1/tasks", nil, 401)
		s.want("ana", "GET", "/api/v1/tasks", nil, 200)

		// Asking: bad input, unknown task, served on each key kind.
		s.want("ana", "POST", "/api/v1/tasks/t/requests", map[string]any{"count": 0}, 400)
		s.want("ana", "POST", "/api/v1/tasks/t/requests", map[string]any{"wait_ms": 60001}, 400)
		s.want("ana", "POST", "/api/v1/tasks/nope/requests", map[string]any{"count": 1}, 404)
		s.want("", "POST", "/api/v1/tasks/t/requests", map[string]any{"count": 1}, 401)
		// Another site's page: refused before authentication, as a problem.
		s.want("ana", "POST", "/api/v1/tasks/t/requests", map[string]any{"count": 1}, 403, "Origin", "http://evil.example")
		s.want("ana", "GET", "/api/v1/tasks", nil, 403, "Host", "evil.example")
		s.want("", "GET", "/api/v1/openapi.json", nil, 403, "Host", "evil.example")
		a = s.want("ana", "POST", "/api/v1/tasks/t/requests", map[string]any{"count": 2, "wait_ms": 10000}, 200)
		loans, _ := a.doc["loans"].([]any)
		if len(loans) != 2 {
			t.Fatalf("get: %s", a.body)
		}
		req := fmt.Sprintf("/api/v1/requests/%v", a.doc["request_id"])
		for _, task := range []string{"text", "uuid"} {
			a := s.want("ana", "POST", "/api/v1/tasks/"+task+"/requests", map[string]any{"count": 1}, 200)
			if l, _ := a.doc["loans"].([]any); len(l) != 1 || l[0] != keyOf[task] {
				t.Errorf("%s task: %s, want loan %q", task, a.body, keyOf[task])
			}
		}
		s.want("bob", "POST", "/api/v1/tasks/t/requests", map[string]any{"count": 1}, 200)

		// Pending: the held task's lease belongs to another process.
		testdb.Exec(t, d, e.DB, "UPDATE loanq_task SET lease_owner = 'elsewhere', lease_token = 7, lease_expires_at = '2999-01-01 00:00:00' WHERE name = 'held'")
		a = s.want("ana", "POST", "/api/v1/tasks/held/requests", map[string]any{"count": 1, "wait_ms": 200}, 202)
		pending := fmt.Sprintf("/api/v1/requests/%v", a.doc["request_id"])
		s.want("ana", "GET", pending+"?wait_ms=200", nil, 202)
		s.want("ana", "DELETE", pending, nil, 200)

		// Reading and cancelling requests.
		s.want("ana", "GET", req, nil, 200)
		s.want("sam", "GET", req+"?wait_ms=100", nil, 200)
		s.want("bob", "GET", req, nil, 403)
		s.want("ana", "GET", "/api/v1/requests/999999", nil, 404)
		s.want("ana", "GET", "/api/v1/requests/abc", nil, 400)
		s.want("ana", "GET", req+"?wait_ms=x", nil, 400)
		s.want("", "GET", req, nil, 401)
		s.want("bob", "DELETE", req, nil, 403)
		s.want("ana", "DELETE", "/api/v1/requests/999999", nil, 404)
		s.want("ana", "DELETE", "/api/v1/requests/abc", nil, 400)
		s.want("", "DELETE", req, nil, 401)
		s.want("ana", "DELETE", req, nil, 200) // served before: a notice, not a cancel

		// Pipeline.
		a = s.want("ana", "GET", "/api/v1/pipeline", nil, 200)
		if w, _ := a.doc["work"].([]any); len(w) != 4 {
			t.Errorf("ana's pipeline: %s, want 4 loans", a.body)
		}
		s.want("ana", "GET", "/api/v1/pipeline?task=t", nil, 200)
		s.want("ana", "GET", "/api/v1/pipeline?task=nope", nil, 404)
		s.want("sam", "GET", "/api/v1/work?task=nope", nil, 404)
		s.want("", "GET", "/api/v1/pipeline", nil, 401)

		// Dispositions on each key kind.
		disp := func(task string, loan any) string {
			return fmt.Sprintf("/api/v1/tasks/%s/loans/%v/disposition", task, loan)
		}
		s.want("bob", "POST", disp("t", loans[0]), map[string]any{"action": "complete"}, 403)
		s.want("ana", "POST", disp("t", loans[0]), map[string]any{"action": "finish"}, 400)
		s.want("ana", "POST", disp("t", "x"), map[string]any{"action": "complete"}, 400)
		s.want("ana", "POST", disp("uuid", "not-a-uuid"), map[string]any{"action": "complete"}, 400)
		s.want("ana", "POST", disp("nope", 1), map[string]any{"action": "complete"}, 404)
		s.want("", "POST", disp("t", loans[0]), map[string]any{"action": "complete"}, 401)
		s.want("ana", "POST", disp("t", loans[0]), map[string]any{"action": "complete"}, 200)
		s.want("ana", "POST", disp("t", loans[0]), map[string]any{"action": "complete"}, 400)
		s.want("ana", "POST", disp("t", loans[1]), map[string]any{"action": "return", "after": "1h"}, 200)

		s.want("ana", "POST", disp("text", keyOf["text"]), map[string]any{"action": "complete"}, 200)
		s.want("ana", "POST", disp("uuid", keyOf["uuid"]), map[string]any{"action": "never"}, 200)

		// History: the day's dispositions, integer, text and UUID keys (a
		// text key's disposition once made it fail with a 503: loan_id was
		// read into an integer).
		a = s.want("ana", "GET", "/api/v1/history", nil, 200)
		h, _ := a.doc["history"].([]any)
		if len(h) != 4 {
			t.Errorf("ana's history: %s, want 4 dispositions", a.body)
		}
		var ids []any
		for _, it := range h {
			if m, ok := it.(map[string]any); ok {
				ids = append(ids, m["loan_id"])
			}
		}
		for _, want := range []any{keyOf["text"], keyOf["uuid"]} {
			found := false
			for _, id := range ids {
				found = found || fmt.Sprint(id) == fmt.Sprint(want)
			}
			if !found {
				t.Errorf("ana's history %v lacks loan %v", ids, want)
			}
		}
		s.want("", "GET", "/api/v1/history", nil, 401)

		// Several loans at once: someone else's among them, bad input, an
		// unknown task, then all of ana's.
		a = s.want("ana", "POST", "/api/v1/tasks/t/requests", map[string]any{"count": 2, "wait_ms": 10000}, 200)
		two, _ := a.doc["loans"].([]any)
		if len(two) != 2 {
			t.Fatalf("get: %s", a.body)
		}
		batch := "/api/v1/tasks/t/dispositions"
		s.want("ana", "POST", batch, map[string]any{"loans": []any{two[0], two[1]}, "action": "finish"}, 400)
		s.want("ana", "POST", batch, map[string]any{"loans": []any{}, "action": "complete"}, 400)
		s.want("ana", "POST", "/api/v1/tasks/nope/dispositions", map[string]any{"loans": []any{1}, "action": "complete"}, 404)
		s.want("bob", "POST", batch, map[string]any{"loans": []any{two[0], two[1]}, "action": "complete"}, 403)
		s.want("", "POST", batch, map[string]any{"loans": []any{two[0]}, "action": "complete"}, 401)
		a = s.want("ana", "POST", batch, map[string]any{"loans": []any{two[0], two[1]}, "action": "return", "after": "0s"}, 200)
		if a.doc["count"] != 2.0 {
			t.Errorf("batch disposition: %s", a.body)
		}
		s.want("ana", "POST", "/api/v1/tasks/text/dispositions", map[string]any{"loans": []any{keyOf["text"]}, "action": "complete"}, 400) // not active any more

		// Supervisors.
		s.want("bob", "GET", "/api/v1/work", nil, 403)
		s.want("sam", "GET", "/api/v1/work?older_than=x", nil, 400)
		s.want("", "GET", "/api/v1/work", nil, 401)
		a = s.want("sam", "GET", "/api/v1/work?task=t", nil, 200)
		if w, _ := a.doc["work"].([]any); len(w) != 1 {
			t.Errorf("work list of t: %s, want bob's loan", a.body)
		}
		s.want("bob", "POST", "/api/v1/tasks/t/reclaim", map[string]any{}, 403)
		s.want("sam", "POST", "/api/v1/tasks/t/reclaim", map[string]any{"older_than": "x"}, 400)
		s.want("sam", "POST", "/api/v1/tasks/nope/reclaim", map[string]any{}, 404)
		s.want("", "POST", "/api/v1/tasks/t/reclaim", map[string]any{}, 401)
		s.want("sam", "POST", "/api/v1/tasks/t/reclaim", map[string]any{"of": "bob", "dry_run": true}, 200)
		s.want("sam", "POST", "/api/v1/tasks/t/reclaim", map[string]any{"of": "bob"}, 200)

		// Next work across the tasks: each loan says its task.
		a = s.want("ana", "POST", "/api/v1/next", map[string]any{"count": 2, "wait_ms": 0, "task_order": "oldest"}, 200)
		if w, _ := a.doc["work"].([]any); len(w) == 0 {
			t.Errorf("next: %s, want loans", a.body)
		} else if item, _ := w[0].(map[string]any); item["task"] == nil || item["details"] == nil {
			t.Errorf("next: %s, want each loan's task and details", a.body)
		}
		s.want("ana", "POST", "/api/v1/next", map[string]any{"count": 0}, 400)
		s.want("ana", "POST", "/api/v1/next", map[string]any{"task_order": "newest"}, 400)
		s.want("", "POST", "/api/v1/next", map[string]any{}, 401)

		// Every operation answered a success and (unless public) an error.
		doc, _ := apiSpec()
		for _, op := range doc.Operations() {
			var ok, bad bool
			for st := range s.seen[op] {
				ok = ok || st < 300
				bad = bad || st >= 400
			}
			if !ok || (!bad && op != "GET /api/v1/openapi.json") {
				t.Errorf("%s: answered %v; want a success and an error", op, s.seen[op])
			}
		}
		audit(t, e)
	})
}

// When the database goes away under a running serve --api, every endpoint
// that needs it answers 503 as a problem document the OpenAPI document
// allows, saying the database is unreachable and naming none of the
// connection's details (host, port, account, database); the document
// itself is still served; once the database is back the API answers again.
// The database is cut by a TCP proxy between serve and the server.
func TestAPIDatabaseDownIs503(t *testing.T) {
	t.Parallel()
	for _, dialect := range []string{"postgres", "mysql"} {
		t.Run(dialect, func(t *testing.T) {
			dsn := testdb.Fresh(t, dialect)
			_, e := prepare(t, dsn, 10)
			mustOK(t, dsn, "admin", "task", "create", "t", "--where", "eligible = 1")
			s := &specSweep{t: t, tok: map[string]string{}, seen: map[string]map[int]bool{}}
			for user, role := range map[string]string{"ana": "processor", "sam": "supervisor"} {
				tok, err := e.Admin().CreateToken(context.Background(), user, role, "admin", 0)
				if err != nil {
					t.Fatal(err)
				}
				s.tok[user] = tok.Token
			}
			proxy, viaProxy, dbName, proxyPort, _ := cutproxy.Through(t, dsn)
			srv := startServe(t, viaProxy, "--api", "--auth", "token")
			s.url = srv.url
			a := s.want("ana", "POST", "/api/v1/tasks/t/requests", map[string]any{"count": 1}, 200)
			req := fmt.Sprintf("/api/v1/requests/%v", a.doc["request_id"])
			loan := a.doc["loans"].([]any)[0]

			proxy.Cut()
			leaks := []string{proxyPort, dbName, "127.0.0.1", "user=", "root@", "postgres@", "failed to connect", "dial tcp",
				"refused", "connect:", "EOF", "driver:", "broken pipe", "reset by peer"}
			calls := []struct {
				user, method, path string
				body               any
			}{
				{"ana", "GET", "/api/v1/tasks", nil},
				{"ana", "POST", "/api/v1/tasks/t/requests", map[string]any{"count": 1}},
				{"ana", "GET", req + "?wait_ms=100", nil},
				{"ana", "DELETE", req, nil},
				{"ana", "POST", fmt.Sprintf("/api/v1/tasks/t/loans/%v/disposition", loan), map[string]any{"action": "complete"}},
				{"ana", "POST", "/api/v1/tasks/t/dispositions", map[string]any{"loans": []any{loan}, "action": "complete"}},
				{"ana", "GET", "/api/v1/pipeline", nil},
				{"ana", "GET", "/api/v1/history", nil},
				{"ana", "POST", "/api/v1/next", map[string]any{"count": 1}},
				{"sam", "GET", "/api/v1/work", nil},
				{"sam", "POST", "/api/v1/tasks/t/reclaim", map[string]any{"dry_run": true}},
			}
			for _, c := range calls {
				a := s.want(c.user, c.method, c.path, c.body, 503)
				if a.header.Get("Content-Type") != "application/problem+json" || !strings.Contains(string(a.body), "the database is unreachable") {
					t.Errorf("%s %s with the database down: %s %s", c.method, c.path, a.header.Get("Content-Type"), a.body)
				}
				for _, leak := range leaks {
					if strings.Contains(string(a.body), leak) {
						t.Errorf("%s %s with the database down shows %q: %s", c.method, c.path, leak, a.body)
					}
				}
			}
			s.want("", "GET", "/api/v1/openapi.json", nil, 200)
			doc, _ := apiSpec()
			for _, op := range doc.Operations() {
				if !s.seen[op][503] && op != "GET /api/v1/openapi.json" {
					t.Errorf("%s: no 503 answer seen with the database down", op)
				}
			}
			if !strings.Contains(srv.stderr.String(), "api: ") {
				t.Errorf("serve's stderr does not log the API's database failures for its operator:\n%s", srv.stderr.String())
			}

			proxy.Restore()
			deadline := time.Now().Add(30 * time.Second)
			for {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				a, err := apiClient{url: s.url, token: s.tok["ana"]}.call(ctx, "GET", "/api/v1/pipeline", nil)
				cancel()
				if err == nil && a.status == 200 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the API still answers %d %s 30 s after the database came back (%v)", a.status, a.body, err)
				}
				time.Sleep(200 * time.Millisecond)
			}
			s.want("ana", "POST", fmt.Sprintf("/api/v1/tasks/t/loans/%v/disposition", loan), map[string]any{"action": "complete"}, 200)
		})
	}
}
