package drivers

import (
	"fmt"
	"strings"
)

// RunDurationBucketsMS are the upper bounds, in milliseconds, of the buckets
// of the criteria-run duration histogram (`loanq serve`'s /metrics): from a
// fast indexed query to the 30 s-and-more queries loanq is built for.
var RunDurationBucketsMS = []int64{10, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 120000}

// DashboardRunHistogram is the portable statement that sums the query-run
// log per task and duration bucket, for the dashboard and /metrics. It binds
// nothing. Columns: task id, bucket (the index in RunDurationBucketsMS of the
// first bound the duration does not exceed, len(RunDurationBucketsMS) above
// them all), runs, total duration_ms, requests served, loans assigned.
//
// It reads the whole log (one row per criteria-query run): the dashboard
// caches its result for a refresh interval (docs/dashboard.md).
var DashboardRunHistogram = dashboardRunHistogram()

func dashboardRunHistogram() string {
	var b strings.Builder
	b.WriteString("CASE")
	for i, le := range RunDurationBucketsMS {
		fmt.Fprintf(&b, " WHEN duration_ms <= %d THEN %d", le, i)
	}
	fmt.Fprintf(&b, " ELSE %d END", len(RunDurationBucketsMS))
	bucket := b.String()
	return `SELECT task_id, ` + bucket + `, COUNT(*), SUM(duration_ms), SUM(requests_served), SUM(loans_assigned)
FROM loanq_query_run
GROUP BY task_id, ` + bucket
}
