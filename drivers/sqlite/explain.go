package sqlite

import (
	"context"
	"regexp"
	"strings"

	"github.com/loanq/loanq/drivers"
)

// ExplainSQL: EXPLAIN QUERY PLAN, SQLite's readable plan.
func (*Driver) ExplainSQL(query string) []string { return []string{"EXPLAIN QUERY PLAN " + query} }

var sqliteIndex = regexp.MustCompile(`USING (?:COVERING )?INDEX (\S+)`)

func (d *Driver) Explain(ctx context.Context, q drivers.Querier, query string, args ...any) (drivers.QueryPlan, error) {
	rows, err := q.QueryContext(ctx, d.ExplainSQL(query)[0], args...)
	if err != nil {
		return drivers.QueryPlan{}, err
	}
	defer rows.Close()
	var p drivers.QueryPlan
	depth := map[int64]int{}
	for rows.Next() {
		var id, parent, unused int64
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			return drivers.QueryPlan{}, err
		}
		depth[id] = depth[parent] + 1
		p.Lines = append(p.Lines, strings.Repeat("  ", depth[id]-1)+detail)
		if m := sqliteIndex.FindStringSubmatch(detail); m != nil && p.Index == "" && strings.Contains(detail, " src ") {
			p.Index = m[1]
		}
		// "USE TEMP B-TREE FOR ORDER BY", "… FOR LAST 2 TERMS OF ORDER BY".
		if strings.HasPrefix(detail, "USE TEMP B-TREE FOR") && strings.HasSuffix(detail, "ORDER BY") {
			p.Sort, p.SortWhy = true, detail
		}
	}
	return p, rows.Err()
}
