package main

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/loanq/loanq/schema"
)

// myMeter reads MariaDB's (MySQL's) counters: the redo written
// (Innodb_lsn_current, the whole server's) and, with userstat=1, the rows
// changed per table of the run's database (TABLE_STATISTICS, the whole
// server's since it started: the difference is the phase's).
type myMeter struct {
	db       *sql.DB
	name     string
	version  string
	userstat bool

	lsn     int64
	changed map[string][2]int64
	rows    map[string]int64
}

// RedoFigures is the redo a phase wrote (the whole server's).
type RedoFigures struct {
	Bytes      int64  `json:"bytes"`
	IdleBytesS int64  `json:"idle_bytes_per_s"` // over 2 s before the phase: what else writes
	Note       string `json:"note,omitempty"`
}

func newMyMeter(ctx context.Context, dsnOf, name string) (*myMeter, error) {
	opened, err := schema.Open(ctx, dsnOf, schema.Options{Conns: 1})
	if err != nil {
		return nil, err
	}
	m := &myMeter{db: opened.DB, name: name}
	var us int
	if err := m.db.QueryRowContext(ctx, `SELECT VERSION(), @@userstat`).Scan(&m.version, &us); err != nil {
		// MySQL has no userstat.
		if err := m.db.QueryRowContext(ctx, `SELECT VERSION()`).Scan(&m.version); err != nil {
			m.db.Close()
			return nil, err
		}
	}
	m.userstat = us == 1
	return m, nil
}

func (m *myMeter) server() string { return "MySQL/MariaDB " + m.version }
func (m *myMeter) close()         { m.db.Close() }

func (m *myMeter) lsnNow(ctx context.Context) (int64, error) {
	var name string
	var v int64
	err := m.db.QueryRowContext(ctx, `SHOW GLOBAL STATUS LIKE 'Innodb_lsn_current'`).Scan(&name, &v)
	return v, err
}

// tableStats reads the run's tables' rows changed (userstat) and rows.
func (m *myMeter) tableStats(ctx context.Context) (map[string][2]int64, map[string]int64, error) {
	changed := map[string][2]int64{}
	if m.userstat {
		rows, err := m.db.QueryContext(ctx, `SELECT TABLE_NAME, ROWS_CHANGED, ROWS_CHANGED_X_INDEXES FROM information_schema.TABLE_STATISTICS WHERE TABLE_SCHEMA = ?`, m.name)
		if err != nil {
			return nil, nil, err
		}
		for rows.Next() {
			var t string
			var c [2]int64
			if err := rows.Scan(&t, &c[0], &c[1]); err != nil {
				rows.Close()
				return nil, nil, err
			}
			changed[t] = c
		}
		rows.Close()
	}
	// Rows in each loanq table: nothing is deleted during a phase, so the
	// difference is the rows inserted.
	counts := map[string]int64{}
	for _, t := range []string{"loanq_work_request", "loanq_work", "loanq_query_run", "loanq_history", "loanq_task_user", "loanq_pool"} {
		var n int64
		if err := m.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+t).Scan(&n); err != nil {
			return nil, nil, fmt.Errorf("counting %s: %w", t, err)
		}
		counts[t] = n
	}
	return changed, counts, nil
}

var idle = 2 * time.Second

func (m *myMeter) before(ctx context.Context) error {
	var err error
	if m.changed, m.rows, err = m.tableStats(ctx); err != nil {
		return err
	}
	m.lsn, err = m.lsnNow(ctx)
	return err
}

func (m *myMeter) after(ctx context.Context, p *Phase) error {
	// Let InnoDB's background work (purge of the phase's undo) settle a
	// little, and measure what the server writes idle just after.
	lsn, err := m.lsnNow(ctx)
	if err != nil {
		return err
	}
	time.Sleep(idle)
	lsn2, err := m.lsnNow(ctx)
	if err != nil {
		return err
	}
	p.Redo = &RedoFigures{Bytes: lsn - m.lsn, IdleBytesS: int64(float64(lsn2-lsn) / idle.Seconds()),
		Note: "Innodb_lsn_current: the whole server's redo over the phase; idle_bytes_per_s is what the server wrote in the 2 s after it"}
	changed, rows, err := m.tableStats(ctx)
	if err != nil {
		return err
	}
	for t, n := range rows {
		if d := n - m.rows[t]; d != 0 {
			p.Tables[t] = &TableFigures{Inserted: d}
		}
	}
	for t, c := range changed {
		b := m.changed[t]
		if c[0]-b[0] == 0 {
			continue
		}
		f := p.Tables[t]
		if f == nil {
			f = &TableFigures{}
			p.Tables[t] = f
		}
		f.Changed, f.ChangedX = c[0]-b[0], c[1]-b[1]
		if f.Inserted > 0 {
			f.Updated = f.Changed - f.Inserted // nothing deleted
		}
	}
	return nil
}
