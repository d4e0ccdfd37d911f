package drivers

import (
	"fmt"
	"strings"
)

// RunDurationBucketsMS are the upper bounds, in milliseconds, of the buckets
// of the criteria-run duration histogram (`loanq serve`'s /metrics): from a
// fast indexed query to the 30 s-and-more queries loanq is built for.
var RunDurationBucketsMS = []int64{10, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 120000}

// DashboardRunHistogram and DashboardRunHistogramBelow are the portable
// statements that sum the query-run log per task and duration bucket, for
// the dashboard and /metrics; they bind a floor id (written ?, see Rebind).
// Columns: task id, bucket (the index in RunDurationBucketsMS of the first
// bound the duration does not exceed, len(RunDurationBucketsMS) above them
// all), runs, total duration_ms, requests served, loans assigned.
//
// A run is never changed once logged, so the dashboard sums the runs below
// a floor id once an hour (Below) and the primary-key range from the floor
// up at every refresh.
var (
	DashboardRunHistogram      = dashboardRunHistogram(">=")
	DashboardRunHistogramBelow = dashboardRunHistogram("<")
	// DashboardRunMaxID binds nothing: the highest run id, for the floor.
	DashboardRunMaxID = `SELECT MAX(id) FROM loanq_query_run`
)

func dashboardRunHistogram(op string) string {
	var b strings.Builder
	b.WriteString("CASE")
	for i, le := range RunDurationBucketsMS {
		fmt.Fprintf(&b, " WHEN duration_ms <= %d THEN %d", le, i)
	}
	fmt.Fprintf(&b, " ELSE %d END", len(RunDurationBucketsMS))
	bucket := b.String()
	return `SELECT task_id, ` + bucket + `, COUNT(*), SUM(duration_ms), SUM(requests_served), SUM(loans_assigned)
FROM loanq_query_run WHERE id ` + op + ` ?
GROUP BY task_id, ` + bucket
}
