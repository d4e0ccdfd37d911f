package drivers

import (
	"context"
	"strings"
)

// QueryPlan is a database's plan for one statement, as `loanq explain` shows it.
type QueryPlan struct {
	// Lines are the plan as the database prints it.
	Lines []string
	// Index is the index of the source table the plan reads it by, "" when
	// it reads the table itself (or the database does not say).
	Index string
	// Sort is true when the plan sorts the source rows after reading them:
	// no index serves the task's order, so a locking read of it reads (and
	// on InnoDB locks) every row the criteria match before the limit applies.
	Sort bool
	// SortWhy is the plan's words for the sort ("Using filesort", "Sort Key: …").
	SortWhy string
}

// Explainer is implemented by every driver: the database's plan for a
// statement with its binds (EXPLAIN, EXPLAIN QUERY PLAN, EXPLAIN PLAN FOR).
type Explainer interface {
	// ExplainSQL is what Explain sends for query, first to last (what the
	// Oracle golden tests record).
	ExplainSQL(query string) []string
	Explain(ctx context.Context, q Querier, query string, args ...any) (QueryPlan, error)
}

// DataLocker is implemented by drivers whose database can list the locks a
// transaction holds (MySQL 8's performance_schema.data_locks): Locks reads
// them, from another session, for the session whose connection id is given.
// ok is false when the table is not there or not readable (MariaDB, or no
// SELECT on performance_schema).
type DataLocker interface {
	// ConnectionID is the session id of q's connection.
	ConnectionID(ctx context.Context, q Querier) (int64, error)
	DataLocks(ctx context.Context, q Querier, connID int64) (locks []string, ok bool, err error)
	// RecordsLocked is how many index records the session's open
	// transaction holds locked, as InnoDB counts them; ok is false when the
	// count cannot be read.
	RecordsLocked(ctx context.Context, q Querier, connID int64) (n int64, ok bool, err error)
}

// planLines splits a plan text into lines, dropping empty ones.
func planLines(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, strings.TrimRight(l, " "))
		}
	}
	return out
}

// ClaimPlanner is implemented by RowLocker drivers whose claim is not one
// statement (Oracle's cursor procedure): RowsPlanSQL is the query the claim
// locks rows with, for EXPLAIN.
type ClaimPlanner interface {
	RowsPlanSQL(src CriteriaSource) string
}
