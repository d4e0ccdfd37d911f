package oracle

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// recorder is a database/sql driver that stands in for an Oracle server in the
// exact-SQL tests: it records every statement it receives, in order, with its
// binds and whether it ran in a transaction, and it plays the version table
// well enough for goose to run a whole `migrate up` and `migrate down` against
// it. What it records is therefore exactly what goose (and loanq's Store)
// would send to Oracle.
type recorder struct {
	// canned answers a query with these rows (tests of the engine's own reads)
	canned map[string][][]driver.Value
	store  StoreSQL

	mu      sync.Mutex
	calls   []call
	created bool
	applied []int64 // versions in insertion order
}

type call struct {
	SQL  string
	Args []any
	InTx bool
	Note string // "begin", "commit", "rollback" for transaction events, else ""
}

func newRecorder(store StoreSQL) *recorder { return &recorder{store: store} }

func (r *recorder) DB() *sql.DB { return sql.OpenDB(r) }

// take returns the calls recorded so far and forgets them.
func (r *recorder) take() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = nil
	return c
}

// driver.Connector and driver.Driver.
func (r *recorder) Connect(context.Context) (driver.Conn, error) { return &rconn{r: r}, nil }
func (r *recorder) Driver() driver.Driver                        { return r }
func (r *recorder) Open(string) (driver.Conn, error)             { return &rconn{r: r}, nil }

type rconn struct {
	r    *recorder
	inTx bool
}

func (c *rconn) Prepare(string) (driver.Stmt, error) {
	return nil, errors.New("recorder: Prepare is not supported; use ExecContext/QueryContext")
}
func (c *rconn) Close() error { return nil }
func (c *rconn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}
func (c *rconn) BeginTx(context.Context, driver.TxOptions) (driver.Tx, error) {
	c.inTx = true
	c.r.note("begin")
	return rtx{c}, nil
}

type rtx struct{ c *rconn }

func (t rtx) Commit() error   { t.c.inTx = false; t.c.r.note("commit"); return nil }
func (t rtx) Rollback() error { t.c.inTx = false; t.c.r.note("rollback"); return nil }

func (r *recorder) note(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call{Note: what})
}

func (r *recorder) record(q string, args []driver.NamedValue, inTx bool) {
	vals := make([]any, len(args))
	for i, a := range args {
		vals[i] = a.Value
	}
	r.calls = append(r.calls, call{SQL: q, Args: vals, InTx: inTx})
}

func (c *rconn) ExecContext(_ context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	r := c.r
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record(q, args, c.inTx)
	switch q {
	case r.store.CreateVersionTable:
		if r.created {
			return nil, errors.New("ORA-00955: name is already used by an existing object")
		}
		r.created = true
	case r.store.Insert:
		r.applied = append(r.applied, args[0].Value.(int64))
	case r.store.Delete:
		v := args[0].Value.(int64)
		kept := r.applied[:0]
		for _, a := range r.applied {
			if a != v {
				kept = append(kept, a)
			}
		}
		r.applied = kept
	}
	return driver.RowsAffected(1), nil
}

func (c *rconn) QueryContext(_ context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	r := c.r
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record(q, args, c.inTx)
	if data, ok := r.canned[q]; ok {
		return &rrows{cols: []string{"C"}, data: data}, nil
	}
	if q != r.store.TableExists && !r.created {
		return nil, errors.New("ORA-00942: table or view does not exist")
	}
	switch q {
	case r.store.TableExists:
		n := int64(0)
		if r.created {
			n = 1
		}
		return &rrows{cols: []string{"COUNT(*)"}, data: [][]driver.Value{{n}}}, nil
	case r.store.GetLatestVersion:
		var max driver.Value // NULL on an empty table
		for _, a := range r.applied {
			if m, ok := max.(int64); !ok || a > m {
				max = a
			}
		}
		return &rrows{cols: []string{"MAX(VERSION_ID)"}, data: [][]driver.Value{{max}}}, nil
	case r.store.GetMigration:
		v := args[0].Value.(int64)
		rows := &rrows{cols: []string{"TSTAMP", "IS_APPLIED"}}
		for _, a := range r.applied {
			if a == v {
				rows.data = append(rows.data, []driver.Value{time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), int64(1)})
			}
		}
		return rows, nil
	case r.store.ListMigrations:
		rows := &rrows{cols: []string{"VERSION_ID", "IS_APPLIED"}}
		for i := len(r.applied) - 1; i >= 0; i-- {
			rows.data = append(rows.data, []driver.Value{r.applied[i], int64(1)}) // ORDER BY id DESC: newest first
		}
		return rows, nil
	}
	return nil, fmt.Errorf("recorder: no answer for query %q", q)
}

type rrows struct {
	cols []string
	data [][]driver.Value
	i    int
}

func (r *rrows) Columns() []string { return r.cols }
func (r *rrows) Close() error      { return nil }
func (r *rrows) Next(dest []driver.Value) error {
	if r.i >= len(r.data) {
		return io.EOF
	}
	copy(dest, r.data[r.i])
	r.i++
	return nil
}

// script renders recorded calls as a SQL*Plus/SQLcl script: each statement
// exactly as sent (no trailing ';' added), terminated by '/' on its own line,
// which runs the buffer as is, for plain SQL and PL/SQL alike. Binds and
// transaction boundaries are shown as comments.
func script(header string, calls []call) string {
	var b strings.Builder
	b.WriteString(header)
	n := 0
	for _, c := range calls {
		if c.Note != "" {
			fmt.Fprintf(&b, "-- (%s)\n\n", c.Note)
			continue
		}
		n++
		where := "autocommit"
		if c.InTx {
			where = "in transaction"
		}
		fmt.Fprintf(&b, "-- %d, %s", n, where)
		if len(c.Args) > 0 {
			parts := make([]string, len(c.Args))
			for i, a := range c.Args {
				parts[i] = fmt.Sprintf(":%d = %#v", i+1, a)
			}
			fmt.Fprintf(&b, "; binds %s", strings.Join(parts, ", "))
		}
		fmt.Fprintf(&b, "\n%s\n/\n\n", c.SQL)
	}
	return b.String()
}
