package dispatch_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// A serving round sizes its criteria query's room from the task's arrival
// rate, read with the lock held: the read must stay bounded however busy
// the task, and still measure the rate. Quiet (fewer requests in the
// window than the sample): their loans over the whole 10 s window. Busy:
// the latest 200 requests over the time since the oldest of them, not the
// window's average (which would say 40/s here, where the last 200 came in
// 0.2 s). A request older than the window never counts.
func TestArrivalRateReadsABoundedSample(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 1)
		ctx := context.Background()
		task := f.task(t, dispatch.TaskSpec{Name: "arrivals"})
		logAgo := func(requested int, agoMS int) {
			t.Helper()
			then := f.d.Dialect().NowMinusMillis(strconv.Itoa(agoMS))
			testdb.Exec(t, f.d, f.db, `INSERT INTO loanq_work_request (task_id, user_name, requested, assigned, status, created_at, alive_at)
VALUES (?, 'past', ?, 0, 'cancelled', `+then+`, `+then+`)`, task.ID, requested)
		}
		logAgo(1000, 20_000) // before the window
		for i := range 50 {
			logAgo(2, 1000+i*80) // 1.0-4.9 s ago
		}
		rate, arrivals, _, err := f.e.ArrivalRate(ctx, task)
		if err != nil {
			t.Fatal(err)
		}
		if arrivals != 50 || rate != 10 {
			t.Errorf("quiet: %d arrivals, %.2f loans/s; want 50 and 100 loans over 10 s = 10/s", arrivals, rate)
		}

		for i := range 300 {
			logAgo(1, i) // 0-299 ms ago
		}
		rate, arrivals, spanMS, err := f.e.ArrivalRate(ctx, task)
		if err != nil {
			t.Fatal(err)
		}
		// The latest 200 are 0-199 ms old when logged, older by the time
		// the read runs: at least 199 ms, and on a slow machine more.
		if arrivals != 200 || spanMS < 199 || spanMS > 10_000 {
			t.Errorf("busy: %d arrivals over %d ms; want the latest 200, the oldest at least 199 ms old", arrivals, spanMS)
		}
		if want := 200 / (float64(spanMS) / 1000); rate < want*0.99 || rate > want*1.01 || rate < 40 {
			t.Errorf("busy: %.1f loans/s; want 200 loans over %d ms = %.1f/s, not the window's average (40/s)", rate, spanMS, want)
		}
	})
}
