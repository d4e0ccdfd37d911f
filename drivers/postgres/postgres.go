// Package postgres is loanq's PostgreSQL driver (pgx through database/sql).
//
// Locking: the task lock is a row lock on loanq_task taken with
// SELECT … FOR UPDATE [SKIP LOCKED | NOWAIT]. PostgreSQL releases it when the
// transaction ends, including when the client's connection dies, so a killed
// holder never leaves a task locked.
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pressly/goose/v3/database"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/dsn"
	"github.com/loanq/loanq/migrations"
	"github.com/loanq/loanq/problem"
)

// Driver implements drivers.Driver for PostgreSQL >= 12.
type Driver struct{}

var _ drivers.Driver = (*Driver)(nil)

func init() { drivers.Register(&Driver{}) }

func (*Driver) Name() string                       { return "postgres" }
func (*Driver) Schemes() []string                  { return []string{"postgres", "postgresql"} }
func (*Driver) Statements() *drivers.Statements    { return statements() }
func (*Driver) CatalogueSQL() drivers.Overrides    { return catalogueSQL }
func (*Driver) Dialect() drivers.Dialect           { return dialect{} }
func (*Driver) Migrations() fs.FS                  { return migrations.For("postgres") }
func (*Driver) Capabilities() drivers.Capabilities { return capabilities }

// capabilities: waiters queue in share mode (FOR SHARE), bounded by a
// transaction-local lock_timeout (SET LOCAL, through set_config); the hold
// limit is transaction-local too. A round finishes its requests in one
// UPDATE … FROM jsonb_array_elements, and reads the requests logged while
// its query ran in its own READ COMMITTED transaction. Row-level security
// over the database's accounts decides who may act as whom.
var capabilities = drivers.Capabilities{
	Strategies:  []drivers.Strategy{drivers.Skip, drivers.NoWait, drivers.Wait, drivers.Lease, drivers.Rows},
	PasswordEnv: []string{"PGPASSWORD"},
	Wait:        drivers.WaitQueueShared,
	WaitBound:   drivers.BoundTransactionLocal,
	RoundFinish: drivers.FinishMany,
	UserCap:     drivers.UserCapRowLock,
	PoolClaim:   drivers.PoolClaimStatement,
	RowsFinish:  drivers.RowsFinishOneStatement,
	HoldLimit:   drivers.HoldLimitTransactionLocal,
	Accounts:    drivers.AccountsDatabase,
	RoundReads:  drivers.RoundReadsTransaction,
	DDL:         drivers.DDLTransactional,
}

var _ drivers.FinishingClaimer = (*Driver)(nil)

// FinishingClaim: rows finish one-statement (finishingClaim, sql.go).
func (*Driver) FinishingClaim(src drivers.CriteriaSource) *drivers.Query[engineio.FinishingClaimParams, engineio.FinishingClaimRow] {
	q, err := drivers.CompileQuery[engineio.FinishingClaimParams, engineio.FinishingClaimRow](dialect{}, "FinishingClaim", finishingClaim(src),
		"task_id", "user", "request_id", "task_id", "ids", "assigned", "status", "holder", "started_ago_ms", "duration_ms", "rows_found")
	if err != nil {
		panic("postgres: " + err.Error()) // the text and the parameters are written together below
	}
	return q
}

var _ drivers.RowLocker = (*Driver)(nil)

func (*Driver) RowsClaimSQL(src drivers.CriteriaSource) string { return rowsClaim(src) }
func (*Driver) RowsTxOptions() *sql.TxOptions                  { return nil } // READ COMMITTED

// LockRows: one statement; LIMIT applies after SKIP LOCKED has passed over
// held rows, so it locks exactly the n rows it returns.
func (*Driver) LockRows(ctx context.Context, tx drivers.Querier, src drivers.CriteriaSource, taskID int64, n int) ([]string, error) {
	return drivers.QueryKeys(ctx, tx, rowsClaim(src), taskID, n)
}

func (*Driver) MigrationStore(table string) (database.Store, error) {
	return database.NewStore(database.DialectPostgres, table)
}

// Open connects with pgx. The DSN is handed to pgx as given (it is already a
// libpq URL); loanq adds an application_name so a DBA can find its sessions in
// pg_stat_activity, and server-side TCP keepalives, which it drops when a
// connection pooler refuses them (connector).
func (*Driver) Open(ctx context.Context, target dsn.DSN) (*sql.DB, error) {
	return open(ctx, target, false)
}

var _ drivers.BriefOpener = (*Driver)(nil)

// OpenBrief is Open for a process that sends each statement about once (a
// command-line call): pgx's exec mode, unless the DSN names another
// (default_query_exec_mode). It sends a statement parsed, bound and run in
// one round trip with the unnamed statement, where the default mode first
// prepares it (a round trip of its own, the first time on each
// connection). The unnamed statement lives only as long as that one
// message sequence, which a transaction pooler keeps on one server
// connection, so nothing needs asking whether a pooler is in the way
// (connector). Parameters and results go as text; every parameter loanq
// binds is an integer or a string (drivers.Stmt), whose text forms are
// what the server reads either way.
func (*Driver) OpenBrief(ctx context.Context, target dsn.DSN) (*sql.DB, error) {
	return open(ctx, target, true)
}

func open(ctx context.Context, target dsn.DSN, brief bool) (*sql.DB, error) {
	cfg, added, err := pgconnParse(target)
	if err != nil {
		return nil, err
	}
	detect := !target.Query.Has("default_query_exec_mode")
	if brief && detect {
		cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
		detect = false
	}
	db := sql.OpenDB(newConnector(cfg, added, detect))
	if err := drivers.ConnectFirst(ctx, db); err != nil {
		db.Close()
		return nil, classifyConnectError(target, err)
	}
	return db, nil
}

// IsLockBusy: 55P03 lock_not_available is what FOR UPDATE NOWAIT raises.
func (*Driver) IsLockBusy(err error) bool { return sqlState(err) == "55P03" }

// IsDeadlock: 40P01 deadlock_detected; the transaction is aborted.
func (*Driver) IsDeadlock(err error) bool { return sqlState(err) == "40P01" }

// IsUniqueViolation: 23505 unique_violation.
func (*Driver) IsUniqueViolation(err error) bool { return sqlState(err) == "23505" }

// Unsupported: every build reaches PostgreSQL.
func (*Driver) Unsupported() string { return "" }

// MigratesOnOpen: a server's schema is its DBA's: `loanq migrate up`.
func (*Driver) MigratesOnOpen() bool { return false }

// ReadTxOptions: a read-only transaction.
func (*Driver) ReadTxOptions() *sql.TxOptions { return &sql.TxOptions{ReadOnly: true} }

// AcceptsPlainPath: a PostgreSQL DSN always has its scheme.
func (*Driver) AcceptsPlainPath(string) bool { return false }

// IsPermissionDenied: 42501 insufficient_privilege, which is also what a
// row-level security policy raises for a row it refuses.
func (*Driver) IsPermissionDenied(err error) bool { return sqlState(err) == "42501" }

func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func classifyConnectError(target dsn.DSN, err error) error {
	switch sqlState(err) {
	case "28P01", "28000": // invalid_password, invalid_authorization_specification
		return drivers.ConnectError(problem.Usage, target, err, "check the user name and password in --db / LOANQ_DB")
	case "22023", "42704": // invalid_parameter_value, undefined_object: a bad ?name=value run-time parameter
		return drivers.ConnectError(problem.Usage, target, err, "fix or remove the run-time parameter in the DSN's query (e.g. ?lock_timeout=5s)")
	case "08P01": // protocol_violation: PgBouncer refusing a run-time parameter of the DSN
		if name := refusedParameter(err, nil); name != "" {
			return drivers.ConnectError(problem.Usage, target, err, "a connection pooler (PgBouncer) refuses the DSN's run-time parameter "+name+
				": remove it from the DSN and set it on loanq's role instead (ALTER ROLE … SET "+name+" = …), which every server connection of the pool gets; see docs/postgres.md, \"Behind PgBouncer\"")
		}
	case "3D000": // invalid_catalog_name
		return drivers.ConnectError(problem.Usage, target, err, "create the database first, or fix its name in the DSN")
	}
	return drivers.ConnectError(problem.Failure, target, err, "is the PostgreSQL server running and reachable? check host and port in --db / LOANQ_DB")
}
