package dispatch

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
)

// How many rows a round's criteria query asks for: the pending need plus
// room for the requests expected to arrive while it runs (docs/algorithm.md,
// step 5).

// lateArrivalRoom is how many loans beyond the pending requests' need the
// criteria query fetches, at least: room for requests that arrive while the
// query runs, which the same run serves (docs/algorithm.md, step 5).
const lateArrivalRoom = 10

// maxRoom caps the extra rows a burst estimate may add to one query.
const maxRoom = 2 * MaxCount

// arrivalWindow is how far back the arrival rate is measured.
const arrivalWindow = 10 * time.Second

// arrivalSample is how many of the window's latest requests TaskLoad reads at
// most. Fewer than this in the window: the rate is their loans over the
// whole window. This many: the task is busy, and the rate is their loans
// over the time since the oldest of them, so that the read stays bounded at
// any rate (it runs with the task's lock held).
const arrivalSample = 200

// taskLoad is what a serving round reads of its task in one statement
// (TaskLoad), right after taking the lock.
type taskLoad struct {
	requests int64         // pending requests
	need     int64         // loans they ask for
	recent   int64         // loans requested by the latest arrivals,
	arrivals int64         // that many requests of the last arrivalWindow (at most arrivalSample),
	spanMS   int64         // the oldest of which is this old
	runs     int64         // of the ten latest criteria-query runs: how many,
	meanMS   int64         // their mean duration,
	maxMS    sql.NullInt64 // and the longest (NULL: none yet)
}

func (e *Engine) load(ctx context.Context, q drivers.Querier, task *Task) (taskLoad, error) {
	r, err := e.sql().TaskLoad.One(ctx, q, engineio.TaskWindowParams{TaskID: task.ID, WindowMS: arrivalWindow.Milliseconds(), Sample: arrivalSample})
	if err != nil {
		return taskLoad{}, fmt.Errorf("reading the pending requests of task %s: %w", task.Name, err)
	}
	return taskLoad{requests: r.Requests, need: r.Need, recent: r.Loans, arrivals: r.Arrivals, spanMS: r.SpanMS,
		runs: r.Runs, meanMS: r.MeanMS, maxMS: r.MaxMS}, nil
}

// criteriaLimit is the criteria query's row limit for the pending need: the
// need, plus room for the requests expected to arrive while the query runs
// (arrivalRoom), at least the need again and lateArrivalRoom. Rows left over
// are simply not assigned; a late request the room cannot fill waits for the
// next round.
func criteriaLimit(task *Task, l taskLoad) int {
	need := int(l.need)
	// A task with a candidate pool fetches its pool's size besides: what
	// the round does not assign refills the pool.
	return need + min(maxRoom, max(need, lateArrivalRoom, arrivalRoom(task, l))) + max(task.Prefetch, 0)
}

// arrivalRoom estimates the loans requested while one criteria query runs:
// the loans requested per second (arrivalRate), times the task's
// recent query time (plus its --query-delay, which the log's durations
// include; the delay alone before any run is logged), doubled for a burst.
func arrivalRoom(task *Task, l taskLoad) int {
	if l.recent == 0 {
		return 0
	}
	queryTime := task.QueryDelay
	if l.runs > 0 {
		queryTime = time.Duration(l.meanMS) * time.Millisecond
	}
	return int(2 * arrivalRate(l) * max(queryTime, 100*time.Millisecond).Seconds())
}

// arrivalRate is the loans requested per second: over the whole window when
// TaskLoad read all of its requests, else over the span of the latest
// arrivalSample (at least a millisecond).
func arrivalRate(l taskLoad) float64 {
	span := arrivalWindow
	if l.arrivals >= arrivalSample {
		span = max(time.Duration(l.spanMS)*time.Millisecond, time.Millisecond)
	}
	return float64(l.recent) / span.Seconds()
}
