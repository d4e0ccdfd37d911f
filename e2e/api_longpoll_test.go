package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/loanq/loanq/internal/testkit/testdb"
)

// TestAPILongPollWokenByCommit: a long poll is answered by the holder's
// commit, not by its wait_ms. Ana's request takes the task's lock and runs
// its 2 s criteria query (--query-delay) inside a real serve --api process;
// meanwhile bob asks with wait_ms 0 (202, pending: the lock is held) and
// long-polls his request with wait_ms 20000. The test watches the database
// every 10 ms for ana's assignment, the holder's commit: bob's answer must
// come within 1.5 s of that commit and not before it. On PostgreSQL and
// MariaDB the waiter queues on the task row's lock; on SQLite (lease) it
// polls its request.
func TestAPILongPollWokenByCommit(t *testing.T) {
	// No t.Parallel: it asserts a latency (answered within 1.5 s of the commit).
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, e := prepare(t, dsn, 20)
		mustOK(t, dsn, "admin", "task", "create", "slow", "--where", "eligible = 1", "--order", "priority", "--query-delay", "2s")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		tok := map[string]string{}
		for _, user := range []string{"ana", "bob"} {
			it, err := e.Admin().CreateToken(ctx, user, "processor", "admin", 0)
			if err != nil {
				t.Fatal(err)
			}
			tok[user] = it.Token
		}
		url := startServe(t, dsn, "--api", "--auth", "token").url
		ana, bob := apiClient{url: url, token: tok["ana"]}, apiClient{url: url, token: tok["bob"]}

		// The commit watcher reads ana's assignment every 10 ms: the holder
		// committed after notYet (the start of the last read that did not
		// see it) and by seen (the end of the first read that did).
		var notYet, seen time.Time
		var watch sync.WaitGroup
		watch.Add(1)
		go func() {
			defer watch.Done()
			for ctx.Err() == nil {
				var n int64
				began := time.Now()
				err := e.DB.QueryRowContext(ctx, testdb.Rebind(d, `SELECT COUNT(*) FROM loanq_work w JOIN loanq_task k ON k.id = w.task_id
					WHERE k.name = 'slow' AND w.user_name = 'ana'`)).Scan(&n)
				switch {
				case err == nil && n > 0:
					seen = time.Now()
					return
				case err == nil:
					notYet = began
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()

		holder := make(chan error, 1)
		go func() {
			code, doc, err := ana.do(ctx, "POST", "/api/v1/tasks/slow/requests", map[string]any{"count": 1, "wait_ms": 20000})
			if err == nil && (code != 200 || doc["status"] != "assigned") {
				err = fmt.Errorf("ana's answer %d %v, want 200 assigned", code, doc)
			}
			holder <- err
		}()
		time.Sleep(700 * time.Millisecond) // ana's query has begun; it lasts 2 s

		code, doc, err := bob.do(ctx, "POST", "/api/v1/tasks/slow/requests", map[string]any{"count": 1, "wait_ms": 0})
		if err != nil || code != 202 {
			t.Fatalf("bob asking while ana's query runs: %d %v %v; want 202 pending", code, doc, err)
		}
		path := fmt.Sprintf("/api/v1/requests/%v?wait_ms=20000", doc["request_id"])
		asked := time.Now()
		a, err := bob.call(ctx, "GET", path, nil)
		answered := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		if a.specErr != nil {
			t.Errorf("against web/openapi.json: %v", a.specErr)
		}
		if err := <-holder; err != nil {
			t.Fatal(err)
		}
		watch.Wait()
		if a.status != 200 || a.doc["status"] != "assigned" {
			t.Fatalf("bob's long poll: %d %s, want 200 assigned", a.status, a.body)
		}
		t.Logf("long poll asked %s before the holder's commit; answered %s after the last read without the commit, %s after the first with it",
			notYet.Sub(asked).Round(time.Millisecond), answered.Sub(notYet).Round(time.Millisecond), answered.Sub(seen).Round(time.Millisecond))
		switch {
		case seen.IsZero() || !asked.Before(notYet):
			t.Fatalf("the long poll was not asked while the holder held the lock (asked %s, commit after %s)", asked, notYet)
		case answered.Sub(notYet) > 1500*time.Millisecond:
			t.Errorf("the long poll answered %s after the holder's commit at the latest; want within 1.5 s (woken by the commit, not by wait_ms)", answered.Sub(notYet))
		case !answered.After(notYet):
			t.Errorf("the long poll answered before the holder committed")
		}
		audit(t, e)
	})
}
