package drivers

import (
	"context"
	"database/sql"
)

// ScanIDs reads rows of one 64-bit id each, in order, and closes them; err
// is the error of the query that returned rows (passed through).
func ScanIDs(rows *sql.Rows, err error) ([]int64, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// QueryIDs runs a query whose rows are one 64-bit id each and returns them
// in order: how a driver reads the keys a rows claim locked.
func QueryIDs(ctx context.Context, q Querier, query string, args ...any) ([]int64, error) {
	return ScanIDs(q.QueryContext(ctx, query, args...))
}
