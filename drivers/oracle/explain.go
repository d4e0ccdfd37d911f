package oracle

import (
	"context"
	"strings"

	"github.com/loanq/loanq/drivers"
)

// ExplainSQL: EXPLAIN PLAN writes the plan to PLAN_TABLE (a global
// temporary table: the caller's transaction rolls it back) without binding
// values, then DBMS_XPLAN prints it.
func (*Driver) ExplainSQL(query string) []string {
	return []string{
		"EXPLAIN PLAN SET STATEMENT_ID = 'loanq' FOR " + query,
		"SELECT plan_table_output FROM TABLE(DBMS_XPLAN.DISPLAY(NULL, 'loanq', 'TYPICAL'))",
	}
}

// Explain: the binds are not sent (EXPLAIN PLAN plans without values).
func (d *Driver) Explain(ctx context.Context, q drivers.Querier, query string, _ ...any) (drivers.QueryPlan, error) {
	texts := d.ExplainSQL(query)
	if _, err := q.ExecContext(ctx, texts[0]); err != nil {
		return drivers.QueryPlan{}, err
	}
	rows, err := q.QueryContext(ctx, texts[1])
	if err != nil {
		return drivers.QueryPlan{}, err
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			return drivers.QueryPlan{}, err
		}
		lines = append(lines, l)
	}
	if err := rows.Err(); err != nil {
		return drivers.QueryPlan{}, err
	}
	return ReadPlan(lines), nil
}

// ReadPlan reads DBMS_XPLAN's table: "| 3 |  INDEX RANGE SCAN | ACC_LOAN_IX |"
// names the index; "SORT ORDER BY" is the sort.
func ReadPlan(lines []string) drivers.QueryPlan {
	p := drivers.QueryPlan{Lines: lines}
	for _, l := range lines {
		cells := strings.Split(l, "|")
		if len(cells) < 4 {
			continue
		}
		op, name := strings.TrimSpace(cells[2]), strings.TrimSpace(cells[3])
		if strings.HasPrefix(op, "INDEX ") && p.Index == "" && !strings.HasPrefix(name, "LOANQ_") {
			p.Index = name
		}
		if strings.HasPrefix(op, "SORT ORDER BY") {
			p.Sort, p.SortWhy = true, op
		}
	}
	return p
}

var _ drivers.ClaimPlanner = (*Driver)(nil)

// RowsPlanSQL: the cursor loanq_lock_rows opens.
func (*Driver) RowsPlanSQL(src drivers.CriteriaSource) string { return rowsCursor(src) }
