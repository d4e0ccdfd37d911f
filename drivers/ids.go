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

// ScanKeys reads rows of one loan key each (text: KeyAsText of a source
// key, or loanq's loan_id columns), in order, and closes them; err is the
// error of the query that returned rows (passed through).
func ScanKeys(rows *sql.Rows, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var key string
		if err := rows.Scan(&key); err != nil {
			return nil, err
		}
		keys = append(keys, key)
	}
	return keys, rows.Err()
}

// QueryKeys runs a query whose rows are one loan key each and returns them
// in order: how a driver reads the keys a rows claim locked.
func QueryKeys(ctx context.Context, q Querier, query string, args ...any) ([]string, error) {
	return ScanKeys(q.QueryContext(ctx, query, args...))
}
