package dispatch_test

import (
	"context"
	"sync"
	"testing"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// The per-task cap holds when one user asks from many connections at once.
func TestMaxActiveUnderConcurrency(t *testing.T) {
	testdb.EachPooled(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 100)
		ctx := context.Background()
		for _, s := range f.d.Capabilities().Strategies {
			t.Run(string(s), func(t *testing.T) {
				task := f.task(t, dispatch.TaskSpec{Name: "cap-" + string(s), Lock: s, MaxActive: 5})
				var wg sync.WaitGroup
				for i := 0; i < 8; i++ {
					e := f.engine(t)
					wg.Add(1)
					go func() {
						defer wg.Done()
						if _, err := e.Get(ctx, task.Name, "oliver", 2, fast); err != nil {
							t.Errorf("get: %v", err)
						}
					}()
				}
				wg.Wait()
				active := f.count(t, "SELECT COUNT(*) FROM loanq_work WHERE task_id = ? AND user_name = 'oliver' AND disposition IS NULL", task.ID)
				if active > 5 {
					t.Fatalf("oliver holds %d active loans in a task capped at 5", active)
				}
				// Concurrent calls of one user may attach to one pending
				// request (docs/algorithm.md, "Cancelling and attaching"), so
				// they may have asked for fewer than 5 in all: asking again
				// one by one tops up to the cap and never past it.
				for range 3 {
					if _, err := f.e.Get(ctx, task.Name, "oliver", 2, fast); err != nil {
						t.Fatalf("get: %v", err)
					}
				}
				active = f.count(t, "SELECT COUNT(*) FROM loanq_work WHERE task_id = ? AND user_name = 'oliver' AND disposition IS NULL", task.ID)
				if active != 5 {
					t.Fatalf("oliver holds %d active loans in a task capped at 5", active)
				}
				f.audit(t)
			})
		}
	})
}
