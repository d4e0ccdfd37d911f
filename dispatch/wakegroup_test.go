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

// The waiters of one engine (a `serve` with many API clients on one task)
// share one share-mode wait on the task row instead of queueing a
// connection each: while the holder holds the lock, at most one session of
// theirs waits in share mode; at its commit every waiter is woken, and the
// requests the holder left are served, each loan to one of them.
func TestWaitersOfOneEngineShareOneWait(t *testing.T) {
	testdb.EachPooled(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 40)
		switch w := f.d.Capabilities().Wait; w {
		case drivers.WaitQueueShared:
		case drivers.WaitPoll:
			return // SQLite: waiters poll their request; no lock, no connection queued on it
		default:
			t.Fatalf("%s: wait mode %s: this test knows share waits and polling", f.d.Name(), w)
		}
		ctx := context.Background()
		task := f.task(t, dispatch.TaskSpec{Name: "shared-wait", Lock: drivers.Skip})
		holder, waiters := f.engine(t), f.engine(t)
		holder.MaxRounds = 1 // the holder does not look again: the waiters serve what it left
		slow := dispatch.GetOptions{Backoff: []time.Duration{60 * time.Second}, Timeout: 2 * time.Minute}
		const n = 8
		type answer struct {
			r    *dispatch.Request
			err  error
			took time.Duration
		}
		answers := make(chan answer, n)
		share := map[string]string{"postgres": "FOR SHARE", "mysql": "LOCK IN SHARE MODE"}[f.d.Name()]
		var most int64
		var once sync.Once
		holder.SetBeforeCommit(func() {
			once.Do(func() {
				for i := range n {
					go func() {
						t0 := time.Now()
						r, err := waiters.Get(ctx, task.Name, fmt.Sprintf("waiter-%d", i), 1, slow)
						answers <- answer{r, err, time.Since(t0)}
					}()
				}
				deadline := time.Now().Add(time.Minute)
				for f.count(t, "SELECT COUNT(*) FROM loanq_work_request WHERE task_id = ? AND user_name LIKE 'waiter-%'", task.ID) < n {
					if time.Now().After(deadline) {
						t.Errorf("the %d waiters' requests were not all logged within a minute", n)
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
				// Watch the share waits for a while: one at a time.
				seen := time.Now().Add(time.Minute)
				for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end) || (most == 0 && time.Now().Before(seen)); {
					most = max(most, testdb.StatementsWaitingForLock(t, f.d, f.db, share))
					time.Sleep(20 * time.Millisecond)
				}
			})
		})
		if r, err := holder.Get(ctx, task.Name, "holder", 1, slow); err != nil || r.Status != dispatch.StatusAssigned {
			t.Fatalf("holder: %+v, %v", r, err)
		}
		if most != 1 {
			t.Errorf("at most %d sessions waited in share mode for the holder at once; want 1: the engine's %d waiters share one wait", most, n)
		}
		for range n {
			a := <-answers
			if a.err != nil || a.r.Status != dispatch.StatusAssigned || len(a.r.Loans) != 1 {
				t.Fatalf("waiter: %+v, %v", a.r, a.err)
			}
			if a.took > 30*time.Second {
				t.Fatalf("a waiter returned after %s: it slept on its 60 s timer", a.took)
			}
		}
		f.audit(t)
	})
}
