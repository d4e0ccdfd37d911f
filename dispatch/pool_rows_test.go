package dispatch_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// Many callers claim from the pool of a rows task at once, each completing
// what it got, as `loanq bench --target engine --strategy rows --prefetch
// 100` does: no get may fail because of the others (docs/algorithm.md). On MariaDB
// the pool claims' and the rows claims' INSERT … SELECT into loanq_work
// hold InnoDB's AUTO-INC table lock while they wait on the one-active-row
// index, and the victim of the deadlocks that makes is reported as error
// 1467, not 1213 (docs/mysql.md, "Error 1467 under concurrent claims"):
// every run of this test failed with it before the driver took it for
// what it is.
func TestPoolRowsConcurrentClaims(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 2000)
		if !drivers.Supports(f.d, drivers.Rows) {
			t.Skipf("%s has no rows strategy", f.d.Name())
		}
		ctx := context.Background()
		task := f.task(t, dispatch.TaskSpec{Name: "pooled", Lock: drivers.Rows, Prefetch: 100})
		const callers = 16
		const gets = 40
		stop := time.Now().Add(6 * time.Second) // bounded on a slow machine; 40 gets each take less
		var wg sync.WaitGroup
		var mu sync.Mutex
		served, pooled := 0, 0
		for c := 0; c < callers; c++ {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				e := f.engine(t)
				user := fmt.Sprintf("c%02d", c)
				for i := 0; i < gets && time.Now().Before(stop); i++ {
					r, err := e.Get(ctx, task.Name, user, 1, fast)
					if err != nil {
						t.Errorf("%s get %d: %v", user, i, err)
						return
					}
					for _, l := range r.Loans {
						if _, err := e.Dispose(ctx, task.Name, l.String(), user, dispatch.Complete, 0, false); err != nil {
							t.Errorf("%s completing loan %s: %v", user, l, err)
							return
						}
					}
					mu.Lock()
					served += len(r.Loans)
					mu.Unlock()
				}
			}(c)
		}
		wg.Wait()
		pooled = int(f.count(t, "SELECT COUNT(*) FROM loanq_work_request WHERE task_id = ? AND pooled = 1", task.ID))
		t.Logf("%d loans served, %d gets from the pool", served, pooled)
		if served == 0 {
			t.Errorf("no loan served")
		}
		if n := f.count(t, "SELECT COUNT(*) FROM loanq_work_request WHERE task_id = ? AND status = 'pending'", task.ID); n != 0 {
			t.Errorf("%d requests left pending", n)
		}
		f.audit(t)
	})
}
