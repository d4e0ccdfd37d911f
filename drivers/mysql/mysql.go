// Package mysql is loanq's MySQL 8 / MariaDB driver (go-sql-driver/mysql).
//
// Locking: SELECT … FOR UPDATE [SKIP LOCKED | NOWAIT] needs MySQL >= 8.0.1 or
// MariaDB >= 10.6; the schema's CHECK constraints need MySQL >= 8.0.16 (older
// releases parse and ignore them). InnoDB locks every index record a locking read scans, so a
// locking read must find its rows through an index that matches its filter and
// order; loanq's task lock goes through the primary key and locks one record.
// Plain FOR UPDATE (strategy wait) gives up after innodb_lock_wait_timeout
// (50 s by default); loanq reports that as busy.
package mysql

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"strings"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/pressly/goose/v3/database"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/dsn"
	"github.com/loanq/loanq/migrations"
	"github.com/loanq/loanq/problem"
)

// Driver implements drivers.Driver for MySQL >= 8.0.16 and MariaDB >= 10.6.
type Driver struct{}

var _ drivers.Driver = (*Driver)(nil)

func init() { drivers.Register(&Driver{}) }

func (*Driver) Name() string                    { return "mysql" }
func (*Driver) Schemes() []string               { return []string{"mysql", "mariadb"} }
func (*Driver) Statements() *drivers.Statements { return statements() }
func (*Driver) CatalogueSQL() drivers.Overrides { return catalogueSQL }
func (*Driver) Dialect() drivers.Dialect        { return dialect{} }
func (*Driver) Migrations() fs.FS               { return migrations.For("mysql") }

var (
	_ drivers.RowLocker       = (*Driver)(nil)
	_ drivers.LockableChecker = (*Driver)(nil)
)

func (*Driver) RowsClaimSQL(src drivers.CriteriaSource) string { return rowsClaim(src) }

// RowsTxOptions: READ COMMITTED, so the claim's locking read keeps locks on
// the rows it returned only, not next-key locks on every record it scanned
// (which would make concurrent claimers wait for each other).
func (*Driver) RowsTxOptions() *sql.TxOptions {
	return &sql.TxOptions{Isolation: sql.LevelReadCommitted}
}

func (*Driver) LockRows(ctx context.Context, tx drivers.Querier, src drivers.CriteriaSource, taskID int64, n int) ([]string, error) {
	return drivers.QueryKeys(ctx, tx, rowsClaim(src), taskID, n)
}

// CheckLockable: a view MySQL cannot update (GROUP BY, DISTINCT, aggregates,
// UNION, …) is materialised for a locking read, which then locks nothing of
// the loans: InnoDB gives no error, so ask information_schema.
func (*Driver) CheckLockable(ctx context.Context, q drivers.Querier, source string) (string, error) {
	var updatable string
	err := q.QueryRowContext(ctx, lockableView, source).Scan(&updatable)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil // a base table
	}
	if err != nil {
		return "", err
	}
	if updatable != "YES" {
		return "it is a view MySQL cannot update (GROUP BY, DISTINCT, aggregates, UNION or similar): a locking read of it locks no loan rows", nil
	}
	return "", nil
}
func (*Driver) Capabilities() drivers.Capabilities { return capabilities }

// capabilities: waiters queue in share mode (LOCK IN SHARE MODE), bounded
// by innodb_lock_wait_timeout, a session variable that outlives the
// transaction (saved and put back); the hold limit's variables are session
// ones too (put back before the pooled connection is reused). A round
// finishes each request with its own statement, and reads the requests
// logged while its query ran in its own transaction, which runs at READ
// COMMITTED (RowsTxOptions, as every round's: a REPEATABLE READ snapshot
// would predate them). Triggers over the database's accounts decide who may
// act as whom.
var capabilities = drivers.Capabilities{
	Strategies:  []drivers.Strategy{drivers.Skip, drivers.NoWait, drivers.Wait, drivers.Lease, drivers.Rows},
	Wait:        drivers.WaitQueueShared,
	WaitBound:   drivers.BoundSessionSetting,
	RoundFinish: drivers.FinishEach,
	UserCap:     drivers.UserCapRowLock,
	PoolClaim:   drivers.PoolClaimStatement,
	RowsFinish:  drivers.RowsFinishStatements,
	HoldLimit:   drivers.HoldLimitSessionSetting,
	Accounts:    drivers.AccountsDatabase,
	RoundReads:  drivers.RoundReadsTransaction,
	DDL:         drivers.DDLAutocommit,
}

func (*Driver) MigrationStore(table string) (database.Store, error) {
	return database.NewStore(database.DialectMySQL, table)
}

func (*Driver) Open(ctx context.Context, target dsn.DSN) (*sql.DB, error) {
	cfg, err := Config(target)
	if err != nil {
		return nil, err
	}
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, problem.Usagef("malformed MySQL DSN %s: %s", target.Redacted(), target.Scrub(err.Error()))
	}
	db := sql.OpenDB(connector{conn})
	if err := drivers.ConnectFirst(ctx, db); err != nil {
		db.Close()
		return nil, classifyConnectError(target, err)
	}
	return db, nil
}

// IsLockBusy: 3572 ER_LOCK_NOWAIT (MySQL's NOWAIT), 1205 ER_LOCK_WAIT_TIMEOUT
// (MariaDB's NOWAIT, and innodb_lock_wait_timeout running out for wait).
func (*Driver) IsLockBusy(err error) bool {
	n := errNumber(err)
	return n == 3572 || n == 1205
}

// IsDeadlock: 1213 ER_LOCK_DEADLOCK; InnoDB has rolled the transaction back.
//
// And 1467 ER_AUTOINC_READ_FAILED, which is how MariaDB reports the same
// victim when the lock it was waiting for is the table's AUTO-INC lock: an
// INSERT … SELECT into loanq_work keeps that table lock while it waits on
// the one-active-row index, so it joins the row-lock cycles of concurrent
// claims, and the victim's whole transaction is rolled back all the same.
// The evidence, the other causes of 1467 and why a bounded retry of the
// transaction (drivers.RetryDeadlock) is the answer for all of them:
// docs/mysql.md, "Error 1467 under concurrent claims".
// TestAutoIncDeadlockIsADeadlock makes one and checks that the victim's
// earlier writes are gone.
func (*Driver) IsDeadlock(err error) bool {
	n := errNumber(err)
	return n == 1213 || n == 1467
}

// IsUniqueViolation: 1062 ER_DUP_ENTRY.
func (*Driver) IsUniqueViolation(err error) bool { return errNumber(err) == 1062 }

// Unsupported: every build reaches MySQL/MariaDB.
func (*Driver) Unsupported() string { return "" }

// MigratesOnOpen: a server's schema is its DBA's: `loanq migrate up`.
func (*Driver) MigratesOnOpen() bool { return false }

// ReadTxOptions: a read-only transaction.
func (*Driver) ReadTxOptions() *sql.TxOptions { return &sql.TxOptions{ReadOnly: true} }

// AcceptsPlainPath: a MySQL/MariaDB DSN always has its scheme.
func (*Driver) AcceptsPlainPath(string) bool { return false }

// IsPermissionDenied: 1142 ER_TABLEACCESS_DENIED_ERROR, 1143
// ER_COLUMNACCESS_DENIED_ERROR, 1370 ER_PROCACCESS_DENIED_ERROR, and 1644
// ER_SIGNAL_EXCEPTION raised by loanq's identity triggers (their message
// starts with "loanq:"; migration 00008).
func (*Driver) IsPermissionDenied(err error) bool {
	switch errNumber(err) {
	case 1142, 1143, 1370:
		return true
	case 1644:
		var me *gomysql.MySQLError
		return errors.As(err, &me) && strings.HasPrefix(me.Message, "loanq:")
	}
	return false
}

func errNumber(err error) uint16 {
	var me *gomysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

func classifyConnectError(target dsn.DSN, err error) error {
	switch errNumber(err) {
	case 1045: // ER_ACCESS_DENIED_ERROR
		return drivers.ConnectError(problem.Usage, target, err, "check the user name and password in --db / LOANQ_DB")
	case 1049: // ER_BAD_DB_ERROR
		return drivers.ConnectError(problem.Usage, target, err, "create the database first, or fix its name in the DSN")
	}
	return drivers.ConnectError(problem.Failure, target, err, "is the MySQL/MariaDB server running and reachable? check host and port in --db / LOANQ_DB")
}
