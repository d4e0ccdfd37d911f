package drivers

import (
	"fmt"
	"reflect"
	"strings"
)

// TaskQueries are the portable statements about one task's history: the
// per-task report the demo prints and the deletion of a task with its
// history. Each takes the task id as its only bind, written `?` here and
// rewritten for the dialect by Rebind; `loanq sql` prints them rebound.
type TaskQueries struct {
	RequestsByUser  string `purpose:"report: a task's requests by user and status"`
	WorkByUser      string `purpose:"report: a task's assignments by user and disposition (NULL: active)"`
	QueryRunTotals  string `purpose:"report: a task's criteria-query runs, requests served and loans assigned"`
	ActiveWorkCount string `purpose:"task delete: active assignments that deleting the task would drop"`
	DeleteWork      string `purpose:"task delete: the task's assignments and their history (children of requests, first)"`
	DeleteRequests  string `purpose:"task delete: the task's work requests"`
	DeleteQueryRuns string `purpose:"task delete: the task's criteria-query log"`
	DeleteTaskRow   string `purpose:"task delete: the task itself, last (the others reference it)"`
	WorkDuplicates  string `purpose:"bench --target engine: a task's work rows, and how many of them assign a loan a second time"`
}

var taskQueries = TaskQueries{
	RequestsByUser:  `SELECT user_name, status, COUNT(*) FROM loanq_work_request WHERE task_id = ? GROUP BY user_name, status`,
	WorkByUser:      `SELECT user_name, disposition, COUNT(*) FROM loanq_work WHERE task_id = ? GROUP BY user_name, disposition`,
	QueryRunTotals:  `SELECT COUNT(*), COALESCE(SUM(requests_served), 0), COALESCE(SUM(loans_assigned), 0) FROM loanq_query_run WHERE task_id = ?`,
	ActiveWorkCount: `SELECT COUNT(*) FROM loanq_work WHERE task_id = ? AND disposition IS NULL`,
	DeleteWork:      `DELETE FROM loanq_work WHERE task_id = ?`,
	DeleteRequests:  `DELETE FROM loanq_work_request WHERE task_id = ?`,
	DeleteQueryRuns: `DELETE FROM loanq_query_run WHERE task_id = ?`,
	DeleteTaskRow:   `DELETE FROM loanq_task WHERE id = ?`,
	WorkDuplicates:  `SELECT COUNT(*), COUNT(*) - COUNT(DISTINCT loan_id) FROM loanq_work WHERE task_id = ?`,
}

// TaskQueriesFor returns the task queries with the dialect's placeholders.
func TaskQueriesFor(d Driver) TaskQueries {
	q := taskQueries
	for _, p := range []*string{&q.RequestsByUser, &q.WorkByUser, &q.QueryRunTotals, &q.ActiveWorkCount,
		&q.DeleteWork, &q.DeleteRequests, &q.DeleteQueryRuns, &q.DeleteTaskRow, &q.WorkDuplicates} {
		*p = Rebind(d, *p)
	}
	return q
}

// List names every task query with its purpose, for `loanq sql`.
func (q TaskQueries) List() []Named {
	v := reflect.ValueOf(q)
	t := v.Type()
	out := make([]Named, 0, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		out = append(out, Named{Field: t.Field(i).Name, Purpose: t.Field(i).Tag.Get("purpose"), SQL: v.Field(i).String()})
	}
	return out
}

// Rebind rewrites the ? placeholders of a portable statement into the
// dialect's own: $1, $2 … on PostgreSQL, :1, :2 … on Oracle, ? elsewhere.
// Only for loanq's own statements, which never hold a literal '?'.
func Rebind(d Driver, query string) string {
	prefix := map[string]string{"postgres": "$", "oracle": ":"}[d.Name()]
	if prefix == "" {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "%s%d", prefix, n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
