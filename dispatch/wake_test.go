package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/internal/testkit/testdb"
	"github.com/loanq/loanq/problem"
)

// A wait caller queued on the row lock gives up when its --timeout passes:
// busy, its request still pending, not blocked for as long as the holder holds
// the lock (PostgreSQL has no lock timeout by default).
func TestWaitStrategyHonoursTimeout(t *testing.T) {
	testdb.EachPooled(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 5)
		if !drivers.Supports(f.d, drivers.Wait) {
			t.Skipf("%s has no row locks: the wait strategy does not exist there", f.d.Name())
		}
		ctx := context.Background()
		task := f.task(t, dispatch.TaskSpec{Name: "queued", Lock: drivers.Wait})
		// Another session holds the task lock and does not let go.
		tx, err := f.engine(t).DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := f.d.Statements().LockWait.One(ctx, tx, engineio.TaskParams{TaskID: task.ID}); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		var req *dispatch.Request
		go func() {
			defer close(done)
			req, err = f.e.Get(ctx, task.Name, "queued-user", 1, dispatch.GetOptions{Timeout: time.Second, Backoff: fast.Backoff})
		}()
		select {
		case <-done:
		case <-time.After(90 * time.Second):
			t.Fatal("a wait caller with --timeout 1s was still queued on the lock after 90 s")
		}
		if problem.KindOf(err) != problem.Busy || req == nil || req.Status != dispatch.StatusPending {
			t.Fatalf("want busy with a pending request, got %+v, %v", req, err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		got, err := f.e.Status(ctx, req.ID, true, fast)
		if err != nil || got.Status != dispatch.StatusAssigned {
			t.Fatalf("recheck once the lock is free: %+v, %v", got, err)
		}
		f.audit(t)
	})
}
