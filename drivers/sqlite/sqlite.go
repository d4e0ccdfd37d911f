// Package sqlite is loanq's embedded default (modernc.org/sqlite, pure Go).
//
// SQLite has no row locks: one writer holds the whole database at a time. The
// task lock is therefore the lease of docs/algorithm.md (strategy lease), the
// database runs in WAL mode so readers never wait for the writer, and every
// write transaction is BEGIN IMMEDIATE so two writers queue on busy_timeout
// instead of deadlocking on a read-to-write upgrade.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/pressly/goose/v3/database"
	sqlite3 "modernc.org/sqlite"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/dsn"
	"github.com/loanq/loanq/migrations"
	"github.com/loanq/loanq/problem"
)

// Driver implements drivers.Driver for SQLite.
type Driver struct{}

var _ drivers.Driver = (*Driver)(nil)

func init() { drivers.Register(&Driver{}) }

func (*Driver) Name() string                       { return "sqlite" }
func (*Driver) Schemes() []string                  { return []string{"sqlite", "file"} }
func (*Driver) Statements() *drivers.Statements    { return statements() }
func (*Driver) CatalogueSQL() drivers.Overrides    { return catalogueSQL }
func (*Driver) Dialect() drivers.Dialect           { return dialect{} }
func (*Driver) Migrations() fs.FS                  { return migrations.For("sqlite") }
func (*Driver) Capabilities() drivers.Capabilities { return capabilities }

// capabilities: SQLite has no row locks and one writer at a time. The task
// lock is the lease row, so a waiter has no lock to queue on and polls, and
// no session holds a task row lock for a hold limit to bound; a claim's
// BEGIN IMMEDIATE transaction serialises a user's max_active check by
// itself. A round reads the requests logged while its query ran through
// another connection (a transaction reads one snapshot). The file's
// permissions are the boundary: no accounts.
var capabilities = drivers.Capabilities{
	Strategies:  []drivers.Strategy{drivers.Lease},
	Wait:        drivers.WaitPoll,
	WaitBound:   drivers.BoundNone,
	RoundFinish: drivers.FinishMany,
	UserCap:     drivers.UserCapOneWriter,
	PoolClaim:   drivers.PoolClaimStatement,
	RowsFinish:  drivers.RowsFinishStatements,
	HoldLimit:   drivers.HoldLimitNone,
	Accounts:    drivers.AccountsNone,
	RoundReads:  drivers.RoundReadsPool,
	DDL:         drivers.DDLTransactional,
}

// MigratesOnOpen: the embedded default migrates itself (nobody else
// administers the file).
func (*Driver) MigratesOnOpen() bool { return true }

// ReadTxOptions: none. Asked for a read-only
// transaction, the modernc driver enforces nothing and only replaces loanq's
// BEGIN IMMEDIATE with a deferred BEGIN; loanq keeps one kind of transaction
// on SQLite.
func (*Driver) ReadTxOptions() *sql.TxOptions { return nil }

func (*Driver) MigrationStore(table string) (database.Store, error) {
	return database.NewStore(database.DialectSQLite3, table)
}

// ConnString is the modernc connection string for a loanq DSN. WAL mode is
// not in it: it is a lasting change to the file, made by Open (walMode) only
// to a database that is loanq's or empty.
func ConnString(target dsn.DSN) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(30000)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Set("_txlock", "immediate")
	return "file:" + uriPath(target.Database) + "?" + q.Encode()
}

// uriPath escapes the characters that end or change a path inside an SQLite
// URI filename: '?' starts its parameters and '#' its fragment, so a folder
// named "team#2" would otherwise open the file "team" one level up (SQLite
// decodes %HH escapes in URI paths; '%' itself is escaped first).
func uriPath(path string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
}

func (*Driver) Open(ctx context.Context, target dsn.DSN) (*sql.DB, error) {
	if dir := filepath.Dir(target.Database); target.Database != ":memory:" {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return nil, problem.Usagef("cannot open SQLite database %s: folder %s does not exist", target.Database, dir)
		}
	}
	if st, err := os.Stat(target.Database); err == nil && st.IsDir() {
		return nil, problem.Usagef("cannot open SQLite database %s: it is a folder; give the path of a database file in it (e.g. %s)",
			target.Database, filepath.Join(target.Database, "loanq.db"))
	}
	db, err := sql.Open("sqlite", ConnString(target))
	if err != nil {
		return nil, problem.Usagef("cannot open SQLite database %s: %v", target.Database, err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		if code(err)&0xff == sqliteFull || (code(err)&0xff == sqliteIOErr && lowOnSpace(filepath.Dir(target.Database))) {
			return nil, drivers.ConnectError(problem.Failure, target, fmt.Errorf("the filesystem holding %s is full: %w", filepath.Dir(target.Database), err),
				"free space there and run the command again: nothing was written")
		}
		if code(err)&0xff == sqliteNotADB {
			return nil, problem.Usagef("cannot open %s: the file is not an SQLite database (nothing was written to it); check the path in --db / LOANQ_DB", target.Database)
		}
		return nil, drivers.ConnectError(problem.Failure, target, err, "check that the file is an SQLite database and is writable")
	}
	if err := walMode(ctx, db, target); err != nil {
		db.Close()
		return nil, drivers.ConnectError(problem.Failure, target, err, "check that the file is writable")
	}
	return db, nil
}

// IsLockBusy: SQLITE_BUSY (5) once busy_timeout has run out.
func (*Driver) IsLockBusy(err error) bool { return code(err)&0xff == 5 }

// IsUniqueViolation: SQLITE_CONSTRAINT_UNIQUE (2067) or _PRIMARYKEY (1555).
func (*Driver) IsUniqueViolation(err error) bool {
	c := code(err)
	return c == 2067 || c == 1555
}

// IsDeadlock: never; SQLite has one writer at a time, and a writer that
// would wait past busy_timeout gets SQLITE_BUSY (IsLockBusy).
func (*Driver) IsDeadlock(error) bool { return false }

// IsPermissionDenied: never; SQLite has no accounts (the file's
// permissions are the boundary).
func (*Driver) IsPermissionDenied(error) bool { return false }

// Unsupported: every build has SQLite (a pure-Go driver).
func (*Driver) Unsupported() string { return "" }

// SQLite's primary result codes (the low byte of an extended code).
const (
	sqliteIOErr = 10 // SQLITE_IOERR: a write failed (ENOSPC among others)
	sqliteFull  = 13 // SQLITE_FULL: "database or disk is full"
	// SQLITE_NOTADB: "file is not a database", the header is not SQLite's
	// (a text file given as --db).
	sqliteNotADB = 26
)

func code(err error) int {
	var se *sqlite3.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}
