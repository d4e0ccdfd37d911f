package mysql

import (
	"context"
	"database/sql/driver"
	"fmt"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
)

// MySQL 8 has no idle_transaction_timeout and no max_statement_time: its
// wait_timeout ends any idle session (inside a transaction or not) and
// max_execution_time (milliseconds) aborts a SELECT. Sent when MariaDB's
// statement is refused as naming an unknown variable. No MySQL 8 server runs
// on the project's machines: the text is checked by tests, not run.
var (
	holdLimitSetMySQL8 = drivers.MustStmt[engineio.HoldLimitParams](dialect{}, "HoldLimitSet (MySQL 8)",
		`SET SESSION wait_timeout = CEIL(:idle_ms / 1000), max_execution_time = :statement_ms`)
	holdLimitResetMySQL8 = drivers.MustStmt[engineio.NoParams](dialect{}, "HoldLimitReset (MySQL 8)",
		`SET SESSION wait_timeout = DEFAULT, max_execution_time = DEFAULT`)
)

// errUnknownSystemVariable is ER_UNKNOWN_SYSTEM_VARIABLE.
const errUnknownSystemVariable = 1193

var _ drivers.HoldLimiter = (*Driver)(nil)

// LimitHold sets MariaDB's variables, or MySQL 8's when the server does not
// know MariaDB's. A failed SET does not end an InnoDB transaction, so the
// second try runs in the same lock transaction.
func (*Driver) LimitHold(ctx context.Context, q drivers.Querier, idle, stmt time.Duration) (bool, error) {
	limits := engineio.HoldLimitParams{IdleMS: idle.Milliseconds(), StatementMS: stmt.Milliseconds()}
	_, err := statements().HoldLimitSet.Exec(ctx, q, limits)
	if errNumber(err) == errUnknownSystemVariable {
		_, err = holdLimitSetMySQL8.Exec(ctx, q, limits)
	}
	if err != nil {
		return false, fmt.Errorf("setting the hold limit (%s idle, %s per statement) on the lock session: %w", idle, stmt, err)
	}
	return true, nil
}

// holdReset is the statement that undoes query on a connection, or "" when
// query sets no hold limit.
func holdReset(query string) string {
	switch query {
	case statements().HoldLimitSet.Text():
		return statements().HoldLimitReset.Text()
	case holdLimitSetMySQL8.Text():
		return holdLimitResetMySQL8.Text()
	}
	return ""
}

// connector wraps the MySQL driver's connections so that a session whose
// hold limit was set gets the server defaults back before database/sql hands
// the connection to anyone else: session variables outlive the transaction,
// and a pooled connection must not carry a short max_statement_time into a
// `task create` check or a bench run.
type connector struct{ driver.Connector }

func (c connector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &sessionConn{Conn: conn}, nil
}

// sessionConn forwards every optional interface database/sql uses, and
// remembers a hold limit to undo.
type sessionConn struct {
	driver.Conn
	reset string // statement to send before reuse; "" when nothing to undo
}

func (c *sessionConn) note(query string) {
	if r := holdReset(query); r != "" {
		c.reset = r
	}
}

func (c *sessionConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c *sessionConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	c.note(query) // a SET with binds is prepared, then executed
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
}

func (c *sessionConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	c.note(query)
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
}

func (c *sessionConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
}

func (c *sessionConn) Ping(ctx context.Context) error { return c.Conn.(driver.Pinger).Ping(ctx) }

func (c *sessionConn) CheckNamedValue(nv *driver.NamedValue) error {
	return c.Conn.(driver.NamedValueChecker).CheckNamedValue(nv)
}

func (c *sessionConn) IsValid() bool { return c.Conn.(driver.Validator).IsValid() }

// ResetSession runs before database/sql reuses the connection. A failed
// reset discards the connection (ErrBadConn) rather than reuse a session
// that may still carry the hold limit.
func (c *sessionConn) ResetSession(ctx context.Context) error {
	if err := c.Conn.(driver.SessionResetter).ResetSession(ctx); err != nil {
		return err
	}
	if c.reset == "" {
		return nil
	}
	if _, err := c.Conn.(driver.ExecerContext).ExecContext(ctx, c.reset, nil); err != nil {
		return driver.ErrBadConn
	}
	c.reset = ""
	return nil
}
