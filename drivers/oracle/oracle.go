// Package oracle is loanq's Oracle Database (12c and later) driver, through
// godror and ODPI-C.
//
// godror needs cgo and, at run time, the Oracle Client libraries (Oracle
// Instant Client Basic or Basic Light, 19c or later recommended). The driver
// always registers, so `loanq sql --dialect oracle` and the exact-SQL tests
// work in every build; only Open differs: open_cgo.go really connects,
// open_nocgo.go explains how to rebuild.
//
// Locking: the task lock is a row lock on loanq_task taken with
// SELECT … FOR UPDATE [SKIP LOCKED | NOWAIT]. Oracle releases it when the
// transaction ends; when a holder's process dies, PMON rolls its transaction
// back once the server notices the dead session (at once on a closed socket,
// later on a silent network loss unless SQLNET.EXPIRE_TIME is set).
package oracle

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"net/url"
	"strconv"
	"time"

	godsn "github.com/godror/godror/dsn"
	"github.com/pressly/goose/v3/database"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/dsn"
	"github.com/loanq/loanq/migrations"
	"github.com/loanq/loanq/problem"
)

// Driver implements drivers.Driver for Oracle Database >= 12c.
type Driver struct{}

var _ drivers.Driver = (*Driver)(nil)

func init() { drivers.Register(&Driver{}) }

func (*Driver) Name() string                    { return "oracle" }
func (*Driver) Schemes() []string               { return []string{"oracle"} }
func (*Driver) Statements() *drivers.Statements { return statements() }
func (*Driver) CatalogueSQL() drivers.Overrides { return catalogueSQL }
func (*Driver) Dialect() drivers.Dialect        { return dialect{} }
func (*Driver) Migrations() fs.FS               { return migrations.For("oracle") }

var _ drivers.RowLocker = (*Driver)(nil)

func (*Driver) RowsClaimSQL(src drivers.CriteriaSource) string {
	return rowsClaimCall + "\n-- cursor (bind 3):\n" + rowsCursor(src) + "\n-- then:\n" + rowsClaimRead
}
func (*Driver) RowsTxOptions() *sql.TxOptions { return nil } // READ COMMITTED

// LockRows calls the cursor procedure loanq_lock_rows (migration 00003),
// which locks up to n rows as it fetches them, then reads back the keys it
// recorded in this transaction's temporary table.
func (*Driver) LockRows(ctx context.Context, tx drivers.Querier, src drivers.CriteriaSource, taskID int64, n int) ([]string, error) {
	if _, err := tx.ExecContext(ctx, rowsClaimCall, taskID, n, rowsCursor(src)); err != nil {
		return nil, err
	}
	return drivers.QueryKeys(ctx, tx, rowsClaimRead)
}
func (*Driver) Capabilities() drivers.Capabilities { return capabilities }

// capabilities: Oracle has no share row lock, so waiters queue with FOR
// UPDATE WAIT n, the bound written in the statement (no setting to change
// or put back). A session cannot bound its own idle time inside a
// transaction: a DBA configures the hold limit (docs/oracle.md). A row
// limit cannot go with FOR UPDATE: the pool is claimed through the cursor
// procedure (PoolLocker). A round finishes each request with its own
// statement, and reads the requests logged while its query ran through
// another connection, as it did before PostgreSQL read them in its round's
// transaction: Oracle's READ COMMITTED would allow that too, but no Oracle
// server runs where loanq is built to show it. Triggers over the database's
// accounts decide who may act as whom.
var capabilities = drivers.Capabilities{
	Strategies:  []drivers.Strategy{drivers.Skip, drivers.NoWait, drivers.Wait, drivers.Lease, drivers.Rows},
	Wait:        drivers.WaitQueueExclusive,
	WaitBound:   drivers.BoundInStatement,
	RoundFinish: drivers.FinishEach,
	UserCap:     drivers.UserCapRowLock,
	PoolClaim:   drivers.PoolClaimProcedure,
	RowsFinish:  drivers.RowsFinishStatements,
	HoldLimit:   drivers.HoldLimitByDBA,
	Accounts:    drivers.AccountsDatabase,
	RoundReads:  drivers.RoundReadsPool,
	DDL:         drivers.DDLAutocommit,
}

// MigrationStore: goose has no Oracle dialect, so the store is loanq's own.
func (*Driver) MigrationStore(table string) (database.Store, error) { return NewStore(table) }

// Unsupported is "" in a cgo build, else why this build cannot reach Oracle.
func (*Driver) Unsupported() string { return unsupported }

// Open connects and checks the connection (see open_cgo.go / open_nocgo.go).
func (*Driver) Open(ctx context.Context, target dsn.DSN) (*sql.DB, error) { return open(ctx, target) }

// Oracle error codes loanq reacts to.
const (
	oraUniqueViolation = 1     // ORA-00001: unique constraint violated
	oraResourceBusy    = 54    // ORA-00054: resource busy and acquire with NOWAIT specified or timeout expired
	oraWaitTimeout     = 30006 // ORA-30006: resource busy; acquire with WAIT timeout expired
	oraDeadlock        = 60    // ORA-00060: deadlock detected while waiting for resource
)

// IsLockBusy: ORA-00054 is what FOR UPDATE NOWAIT raises on a held row;
// ORA-30006 is a FOR UPDATE WAIT n that ran out (a DBA may add one).
func (*Driver) IsLockBusy(err error) bool { return isLockBusyCode(OraCode(err)) }

// IsDeadlock: ORA-00060 deadlock detected while waiting for resource. Oracle
// rolls back only the victim's statement, not its transaction; the caller
// rolls back the rest.
func (*Driver) IsDeadlock(err error) bool { return OraCode(err) == oraDeadlock }

// IsUniqueViolation: ORA-00001.
func (*Driver) IsUniqueViolation(err error) bool { return isUniqueCode(OraCode(err)) }

// MigratesOnOpen: a server's schema is its DBA's: `loanq migrate up`.
func (*Driver) MigratesOnOpen() bool { return false }

// ReadTxOptions: a read-only transaction.
func (*Driver) ReadTxOptions() *sql.TxOptions { return &sql.TxOptions{ReadOnly: true} }

// AcceptsPlainPath: an Oracle DSN always has its scheme.
func (*Driver) AcceptsPlainPath(string) bool { return false }

// IsPermissionDenied: ORA-01031 insufficient privileges and ORA-20401
// raised by loanq's identity triggers (migration 00008). (A table the
// account may not read answers ORA-00942 "does not exist", which is left a
// failure: it is also what a missing table says.)
func (*Driver) IsPermissionDenied(err error) bool {
	switch OraCode(err) {
	case 1031, 20401:
		return true
	}
	return false
}

func isLockBusyCode(code int) bool { return code == oraResourceBusy || code == oraWaitTimeout }
func isUniqueCode(code int) bool   { return code == oraUniqueViolation }

// OraCode returns the ORA- number of err, or 0. godror's *OraErr has a
// Code() int method; matching the method instead of the type keeps this file
// free of godror's cgo package (open_cgo.go asserts that *godror.OraErr has it).
func OraCode(err error) int {
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		return coded.Code()
	}
	return 0
}

// ConnectParams turns a loanq DSN, oracle://user:pass@host:port/service, into
// godror's connection parameters: user, password and the Easy Connect string
// host:port/service. The URL handed to godror's parser carries no user
// information, so none of its errors can quote the password; the password goes
// straight into godror's Password type, which prints as "***".
//
// The session is pinned to UTC (godror's Timezone and the session TIME_ZONE):
// loanq's TIMESTAMP columns hold UTC, and without this godror would label them
// with the server's zone. Other query parameters (poolMaxSessions, …) pass
// through to godror.
func ConnectParams(target dsn.DSN) (godsn.ConnectionParams, error) {
	q := url.Values{}
	for k, v := range target.Query {
		q[k] = v
	}
	q.Del("timezone") // loanq's times are UTC; see above
	u := url.URL{Scheme: "oracle", Host: target.Host, Path: "/" + target.Database, RawQuery: q.Encode()}
	P, err := godsn.Parse(u.String())
	if err != nil {
		return P, problem.Usagef("malformed Oracle DSN %s: %s", target.Redacted(), target.Scrub(err.Error()))
	}
	P.Username = target.User
	P.Password = godsn.NewPassword(target.Password)
	P.Timezone = time.UTC
	P.AlterSession = append(P.AlterSession, [2]string{"TIME_ZONE", "UTC"})
	return P, nil
}

var _ drivers.PoolLocker = (*Driver)(nil)

// poolCursor is the pool claim for loanq_lock_rows: the task's fresh
// candidates in order, locked as they are fetched. Its one bind, :1, is the
// task id; the time to live is the task's setting, a number written in.
func poolCursor(ttlMS int64) string {
	return `SELECT p.loan_id FROM loanq_pool p
WHERE p.task_id = :1 AND p.filled_at > SYS_EXTRACT_UTC(SYSTIMESTAMP) - NUMTODSINTERVAL(` + strconv.FormatInt(ttlMS, 10) + ` / 1000, 'SECOND')
ORDER BY p.pos
FOR UPDATE SKIP LOCKED`
}

// PoolClaimSQL is the pool claim as sent (a ten-minute time to live shown).
func (*Driver) PoolClaimSQL() string {
	return rowsClaimCall + "\n-- cursor (bind 3):\n" + poolCursor(600000) + "\n-- then:\n" + rowsClaimRead
}

// LockPool calls loanq_lock_rows with the pool's cursor: it locks up to
// limit candidates as it fetches them and records their keys.
func (*Driver) LockPool(ctx context.Context, tx drivers.Querier, taskID, ttlMS int64, limit int) ([]string, error) {
	if _, err := tx.ExecContext(ctx, rowsClaimCall, taskID, limit, poolCursor(ttlMS)); err != nil {
		return nil, err
	}
	return drivers.QueryKeys(ctx, tx, rowsClaimRead)
}
