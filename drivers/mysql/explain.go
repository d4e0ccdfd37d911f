package mysql

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/pause"
)

var (
	_ drivers.DataLocker = (*Driver)(nil)
)

// ExplainSQL: EXPLAIN, tabular (its columns differ between MySQL 8 and
// MariaDB: they are read by name).
func (*Driver) ExplainSQL(query string) []string { return []string{"EXPLAIN " + query} }

func (d *Driver) Explain(ctx context.Context, q drivers.Querier, query string, args ...any) (drivers.QueryPlan, error) {
	rows, err := q.QueryContext(ctx, d.ExplainSQL(query)[0], args...)
	if err != nil {
		return drivers.QueryPlan{}, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return drivers.QueryPlan{}, err
	}
	var p drivers.QueryPlan
	p.Lines = append(p.Lines, strings.Join(cols, " | "))
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return drivers.QueryPlan{}, err
		}
		row := map[string]string{}
		cells := make([]string, len(cols))
		for i, c := range cols {
			cells[i] = "NULL"
			if vals[i].Valid {
				cells[i] = vals[i].String
			}
			row[strings.ToLower(c)] = vals[i].String
		}
		p.Lines = append(p.Lines, strings.Join(cells, " | "))
		if row["table"] == "src" && p.Index == "" {
			p.Index = row["key"]
			if strings.Contains(row["extra"], "Using filesort") {
				p.Sort, p.SortWhy = true, "Using filesort"
			}
		}
	}
	return p, rows.Err()
}

// ConnectionID: the session's id, as performance_schema.threads knows it.
func (*Driver) ConnectionID(ctx context.Context, q drivers.Querier) (int64, error) {
	var id int64
	err := q.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id)
	return id, err
}

// dataLocks lists the InnoDB locks of one session (MySQL 8): record locks
// with their mode (X, X,REC_NOT_GAP, X,GAP: next-key, record only, gap) and
// the index record they are on. Binds: the connection id.
const dataLocks = `SELECT dl.OBJECT_NAME, COALESCE(dl.INDEX_NAME, ''), dl.LOCK_TYPE, dl.LOCK_MODE, dl.LOCK_STATUS, COALESCE(dl.LOCK_DATA, '')
FROM performance_schema.data_locks dl
JOIN performance_schema.threads th ON th.THREAD_ID = dl.THREAD_ID
WHERE th.PROCESSLIST_ID = ?
ORDER BY dl.OBJECT_NAME, dl.INDEX_NAME, dl.LOCK_DATA`

// DataLocks: MariaDB has no performance_schema.data_locks (1146), and an
// account may not read it (1142): then ok is false.
func (*Driver) DataLocks(ctx context.Context, q drivers.Querier, connID int64) ([]string, bool, error) {
	rows, err := q.QueryContext(ctx, dataLocks, connID)
	if n := errNumber(err); n == 1146 || n == 1142 || n == 1109 {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var obj, idx, typ, mode, status, data string
		if err := rows.Scan(&obj, &idx, &typ, &mode, &status, &data); err != nil {
			return nil, false, err
		}
		out = append(out, strings.TrimSpace(strings.Join([]string{obj, idx, typ, mode, status, data}, " ")))
	}
	return out, true, rows.Err()
}

// innodbTrxCacheAge is a little more than how long the cache behind
// INNODB_TRX must go unread before a read refreshes it (0.1 s).
const innodbTrxCacheAge = 150 * time.Millisecond

// recordsLocked is InnoDB's count of the record locks one session's open
// transaction holds (INNODB_TRX.trx_rows_locked, MySQL 8 and MariaDB): every
// index record it locked, so a row read through a secondary index counts
// twice. Binds: the connection id.
const recordsLocked = `SELECT trx_rows_locked FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = ?`

// RecordsLocked reads recordsLocked. MariaDB 10.11 keeps the locks a
// locking read takes on the rows it passes over (those its WHERE turns
// away), even at READ COMMITTED: the claim's own count of rows it could not
// hand out, which the second session's probe does not see (docs/mysql.md,
// "A rows claim keeps the locks of the rows it passes over").
func (*Driver) RecordsLocked(ctx context.Context, q drivers.Querier, connID int64) (int64, bool, error) {
	// InnoDB serves its information_schema tables of transactions and locks
	// from a server-wide cache it refreshes on a read only when nobody has
	// read it for 0.1 s: read right after the claim (or just after another
	// reader), the row may be missing or its count old.
	if err := pause.For(ctx, innodbTrxCacheAge); err != nil {
		return 0, false, err
	}
	var n int64
	err := q.QueryRowContext(ctx, recordsLocked, connID).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil // no transaction open: nothing to count
	}
	if code := errNumber(err); code == 1142 || code == 1227 {
		return 0, false, nil // INNODB_TRX needs the PROCESS privilege
	}
	if err != nil {
		return 0, false, err
	}
	return n, true, nil
}
