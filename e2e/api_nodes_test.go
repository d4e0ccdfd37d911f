package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/loanq/loanq/internal/testkit/testdb"
)

// apiClient calls a serve --api node with a bearer token.
type apiClient struct {
	url, token string
	http       *http.Client
	header     http.Header // more headers to send
}

// do sends method path with body (nil: none) and decodes the JSON answer;
// an answer the OpenAPI document does not allow is an error (checkSpec).
func (c apiClient) do(ctx context.Context, method, path string, body any) (int, map[string]any, error) {
	a, err := c.call(ctx, method, path, body)
	if err != nil {
		return 0, nil, err
	}
	if a.specErr != nil {
		return a.status, a.doc, a.specErr
	}
	return a.status, a.doc, nil
}

// apiAnswer is one answer as received.
type apiAnswer struct {
	status  int
	header  http.Header
	body    []byte
	doc     map[string]any
	specErr error // nil when the answer is one web/openapi.json allows
	took    time.Duration
}

// call sends method path with body (nil: none), reads the answer, checks it
// against the OpenAPI document (specErr) and decodes a JSON object (doc;
// nil otherwise).
func (c apiClient) call(ctx context.Context, method, path string, body any) (apiAnswer, error) {
	var rd io.Reader
	var sent []byte
	if body != nil {
		sent, _ = json.Marshal(body)
		rd = bytes.NewReader(sent)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url+path, rd)
	if err != nil {
		return apiAnswer{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range c.header {
		if k == "Host" {
			req.Host = v[0] // the name a browser was given
			continue
		}
		req.Header[k] = v
	}
	hc := c.http
	if hc == nil {
		hc = http.DefaultClient
	}
	began := time.Now()
	res, err := hc.Do(req)
	if err != nil {
		return apiAnswer{}, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return apiAnswer{}, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	a := apiAnswer{status: res.StatusCode, header: res.Header, body: raw, took: time.Since(began)}
	a.specErr = checkCall(req, sent, res.StatusCode, res.Header, raw)
	_ = json.Unmarshal(raw, &a.doc)
	return a, nil
}

// getWork asks for count loans and follows a 202 with long polls of the
// request until it is answered, as docs/api.md tells a client to.
func (c apiClient) getWork(ctx context.Context, task string, count int) ([]int64, error) {
	code, doc, err := c.do(ctx, "POST", "/api/v1/tasks/"+task+"/requests", map[string]any{"count": count, "wait_ms": 20000})
	for polls := 0; err == nil && code == 202; polls++ {
		if polls > 20 {
			return nil, fmt.Errorf("request still pending after %d long polls: %v", polls, doc)
		}
		code, doc, err = c.do(ctx, "GET", fmt.Sprintf("/api/v1/requests/%d?wait_ms=20000", int64(doc["request_id"].(float64))), nil)
	}
	if err != nil {
		return nil, err
	}
	if code != 200 || doc["status"] != "assigned" {
		return nil, fmt.Errorf("answer %d %v, want 200 assigned", code, doc)
	}
	var loans []int64
	for _, l := range doc["loans"].([]any) {
		loans = append(loans, int64(l.(float64)))
	}
	return loans, nil
}

// TestAPITwoNodesOneDatabase: two `loanq serve --api` processes (the real
// binary) on one PostgreSQL or MariaDB database; 24 API clients, twelve per
// node, ask at once on a skip task whose criteria query takes 2 s, then on a
// prefetch task. Every client is served, no loan is active twice in the
// database afterwards, and the criteria query ran at most 3 times per task:
// waiting requests are served by the holder's run, whichever node they came
// through.
func TestAPITwoNodesOneDatabase(t *testing.T) {
	// No t.Parallel: at most 3 criteria runs for 24 clients asking at once holds only while all of them ask within the holder's 2 s query; a loaded machine spreads them out.
	for _, dialect := range []string{"postgres", "mysql"} {
		t.Run(dialect, func(t *testing.T) {
			dsn := testdb.Fresh(t, dialect)
			d, db := testdb.Migrated(t, dsn)
			testdb.CreateLoans(t, d, db, 400)
			mustOK(t, dsn, "admin", "task", "create", "skip-t", "--where", "eligible = 1", "--order", "priority",
				"--lock", "skip", "--query-delay", "2s")
			mustOK(t, dsn, "admin", "task", "create", "pre-t", "--where", "eligible = 1", "--order", "priority DESC",
				"--lock", "skip", "--query-delay", "2s", "--prefetch", "200")
			const clients, each = 24, 2
			e := newEngine(db, d)
			tokens := make([]string, clients)
			for i := range tokens {
				tok, err := e.Admin().CreateToken(context.Background(), fmt.Sprintf("p%02d", i), "processor", "admin", 0)
				if err != nil {
					t.Fatal(err)
				}
				tokens[i] = tok.Token
			}
			nodes := []*server{startServe(t, dsn, "--api", "--auth", "token"), startServe(t, dsn, "--api", "--auth", "token")}
			if nodes[0].cmd.Process.Pid == nodes[1].cmd.Process.Pid {
				t.Fatal("the two nodes are one process")
			}
			for _, task := range []string{"skip-t", "pre-t"} {
				t.Run(task, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					defer cancel()
					start := make(chan struct{})
					var wg sync.WaitGroup
					got := make([][]int64, clients)
					errs := make([]error, clients)
					began := time.Now()
					for i := range clients {
						wg.Add(1)
						go func() {
							defer wg.Done()
							c := apiClient{url: nodes[i%2].url, token: tokens[i]}
							<-start
							got[i], errs[i] = c.getWork(ctx, task, each)
						}()
					}
					close(start)
					wg.Wait()
					took := time.Since(began)
					seen := map[int64]int{}
					for i := range clients {
						if errs[i] != nil {
							t.Errorf("client p%02d (node %d): %v", i, i%2, errs[i])
							continue
						}
						if len(got[i]) != each {
							t.Errorf("client p%02d got %v, want %d loans", i, got[i], each)
						}
						for _, l := range got[i] {
							if other, dup := seen[l]; dup {
								t.Errorf("loan %d answered to p%02d and p%02d", l, other, i)
							}
							seen[l] = i
						}
					}
					// The database, not the answers, is the judge.
					active := testdb.Int(t, d, db, `SELECT COUNT(*) FROM loanq_work w JOIN loanq_task k ON k.id = w.task_id
						WHERE k.name = ? AND w.disposition IS NULL`, task)
					distinct := testdb.Int(t, d, db, `SELECT COUNT(DISTINCT w.loan_id) FROM loanq_work w JOIN loanq_task k ON k.id = w.task_id
						WHERE k.name = ? AND w.disposition IS NULL`, task)
					users := testdb.Int(t, d, db, `SELECT COUNT(DISTINCT w.user_name) FROM loanq_work w JOIN loanq_task k ON k.id = w.task_id
						WHERE k.name = ? AND w.disposition IS NULL`, task)
					if active != clients*each || distinct != active || users != clients {
						t.Errorf("%s: %d active assignments of %d distinct loans to %d users; want %d, all distinct, %d users",
							task, active, distinct, users, clients*each, clients)
					}
					runs := testdb.Int(t, d, db, `SELECT COUNT(*) FROM loanq_query_run r JOIN loanq_task k ON k.id = r.task_id WHERE k.name = ?`, task)
					if runs < 1 || runs > 3 {
						t.Errorf("%s: %d criteria runs for %d clients asking at once, want 1 to 3", task, runs, clients)
					}
					t.Logf("%s on %s: %d clients on 2 nodes served in %s with %d criteria run(s)", task, dialect, clients, took.Round(time.Millisecond), runs)
				})
			}
			findings, err := e.Admin().Audit(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range findings {
				if x.Count != 0 {
					t.Errorf("audit %s: %d (%s)", x.Check, x.Count, x.Purpose)
				}
			}
		})
	}
}
