package postgres

import (
	"context"
	"regexp"
	"strings"

	"github.com/loanq/loanq/drivers"
)

// ExplainSQL: EXPLAIN plans the statement with its binds without running it.
func (*Driver) ExplainSQL(query string) []string { return []string{"EXPLAIN " + query} }

// pgIndex finds the index a scan node reads ("Index Scan using x on t",
// "Index Only Scan using x", "Bitmap Index Scan on x").
var pgIndex = regexp.MustCompile(`(?:Index (?:Only )?Scan(?: Backward)? using|Bitmap Index Scan on) (\S+)`)

func (d *Driver) Explain(ctx context.Context, q drivers.Querier, query string, args ...any) (drivers.QueryPlan, error) {
	rows, err := q.QueryContext(ctx, d.ExplainSQL(query)[0], args...)
	if err != nil {
		return drivers.QueryPlan{}, err
	}
	defer rows.Close()
	var p drivers.QueryPlan
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return drivers.QueryPlan{}, err
		}
		p.Lines = append(p.Lines, line)
		node := strings.TrimLeft(strings.TrimPrefix(strings.TrimSpace(line), "->"), " ")
		if m := pgIndex.FindStringSubmatch(node); m != nil && p.Index == "" && !strings.Contains(m[1], "loanq_") {
			p.Index = m[1]
		}
		switch {
		case strings.HasPrefix(node, "Sort Key:") || strings.HasPrefix(node, "Presorted Key:"):
			if p.Sort && p.SortWhy == "" {
				p.SortWhy = node
			}
		case strings.HasPrefix(node, "Sort ") || strings.HasPrefix(node, "Incremental Sort "):
			p.Sort = true
		}
	}
	return p, rows.Err()
}
