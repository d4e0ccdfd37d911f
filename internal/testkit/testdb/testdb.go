// Package testdb gives each test its own database on every server under test:
// SQLite always, PostgreSQL and MariaDB/MySQL from LOANQ_TEST_POSTGRES_DSN and
// LOANQ_TEST_MYSQL_DSN (else the local defaults), Oracle from
// LOANQ_TEST_ORACLE_DSN, and PostgreSQL through PgBouncer from
// LOANQ_TEST_PGBOUNCER_DSN (PgBouncer, EachPooled). LOANQ_TEST_REQUIRE (set by `make test`) lists the
// dialects whose absence fails the run instead of skipping.
package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loanq/loanq/drivers"
	_ "github.com/loanq/loanq/drivers/all" // tests open any dialect by DSN
	"github.com/loanq/loanq/schema"
)

// Dialects are the dialects tests run on, in order.
var Dialects = []string{"sqlite", "postgres", "mysql"}

var defaults = map[string]string{
	"postgres": "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable",
	"mysql":    "mysql://root:@127.0.0.1:3306/test",
}

func envVar(dialect string) string { return "LOANQ_TEST_" + strings.ToUpper(dialect) + "_DSN" }

// Required reports whether the run demands this dialect.
func Required(dialect string) bool {
	for _, r := range strings.Split(os.Getenv("LOANQ_TEST_REQUIRE"), ",") {
		if strings.TrimSpace(r) == dialect {
			return true
		}
	}
	return false
}

// BaseDSN is the server-level DSN for a dialect, or "" when none is configured.
func BaseDSN(dialect string) string {
	if v := os.Getenv(envVar(dialect)); v != "" {
		return v
	}
	return defaults[dialect]
}

var (
	reachMu sync.Mutex
	reach   = map[string]error{}
)

func reachable(dialect, dsn string) error {
	reachMu.Lock()
	defer reachMu.Unlock()
	if err, ok := reach[dialect]; ok {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, db, _, err := drivers.Connect(ctx, dsn)
	if err == nil {
		db.Close()
	}
	reach[dialect] = err
	return err
}

// Fresh returns the DSN of a new, empty database of the dialect for this test,
// dropped when the test ends. A dialect that is not available skips the test,
// or fails it when LOANQ_TEST_REQUIRE names the dialect.
func Fresh(t testing.TB, dialect string) string {
	t.Helper()
	if dialect == "sqlite" {
		return "sqlite:" + filepath.Join(t.TempDir(), "loanq.db")
	}
	if dialect == PgBouncer {
		return freshPgBouncer(t)
	}
	base := BaseDSN(dialect)
	if base == "" {
		unavailable(t, dialect, fmt.Errorf("%s not set", envVar(dialect)))
	}
	if err := reachable(dialect, base); err != nil {
		unavailable(t, dialect, err)
	}
	if dialect == "oracle" {
		return freshOracle(t, base)
	}
	name := "loanq_t_" + randomHex(6)
	ctx := context.Background()
	_, admin, _, err := drivers.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connecting to %s: %v", dialect, err)
	}
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close()
		t.Fatalf("CREATE DATABASE %s on %s: %v", name, dialect, err)
	}
	t.Cleanup(func() {
		defer admin.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		drop := "DROP DATABASE " + name
		if dialect == "postgres" {
			drop += " WITH (FORCE)" // PostgreSQL >= 13: ends sessions a killed child process left behind
		}
		if _, err := admin.ExecContext(ctx, drop); err != nil {
			t.Logf("dropping test database %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parsing %s: %v", envVar(dialect), err)
	}
	u.Path = "/" + name
	return u.String()
}

// PgBouncer is the pseudo-dialect of Fresh and EachPooled: a fresh
// PostgreSQL database reached through the PgBouncer of
// LOANQ_TEST_PGBOUNCER_DSN, which `make test` starts in transaction pooling
// mode in front of the test PostgreSQL (scripts/test-servers.sh). Its
// driver is postgres. LOANQ_TEST_REQUIRE=…,pgbouncer fails a run without it.
const PgBouncer = "pgbouncer"

// freshPgBouncer creates the database on the server directly (PgBouncer's
// fallback entry `*` reaches any database there) and returns its DSN
// through PgBouncer: host, port, user and options of
// LOANQ_TEST_PGBOUNCER_DSN, the new database's name.
func freshPgBouncer(t testing.TB) string {
	t.Helper()
	pooled := os.Getenv(envVar(PgBouncer))
	if pooled == "" {
		unavailable(t, PgBouncer, fmt.Errorf("%s not set", envVar(PgBouncer)))
	}
	if err := reachable(PgBouncer, pooled); err != nil {
		unavailable(t, PgBouncer, err)
	}
	direct, err := url.Parse(Fresh(t, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(pooled)
	if err != nil {
		t.Fatalf("parsing %s: %v", envVar(PgBouncer), err)
	}
	u.Path = direct.Path
	return u.String()
}

// EachPooled is Each, then once more on PostgreSQL through PgBouncer in
// transaction pooling mode (a subtest named pgbouncer): for the engine's
// tests that must also hold behind a connection pooler.
// Like Each, the four run in parallel.
func EachPooled(t *testing.T, fn func(t *testing.T, dsn string)) {
	Each(t, fn)
	t.Run(PgBouncer, func(t *testing.T) {
		t.Parallel()
		fn(t, Fresh(t, PgBouncer))
	})
}

// freshOracle: an Oracle database cannot be created per test (a database is
// an instance or a PDB, and a new user needs DBA rights), so the tests use
// the schema of the DSN's user and empty it of loanq's tables before and
// after the test. Point LOANQ_TEST_ORACLE_DSN at a throw-away user, and do not
// run two test processes against the same one.
func freshOracle(t testing.TB, dsn string) string {
	t.Helper()
	dropLoanqTables(t, dsn)
	t.Cleanup(func() { dropLoanqTables(t, dsn) })
	return dsn
}

func dropLoanqTables(t testing.TB, dsn string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, db, _, err := drivers.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connecting to oracle: %v", err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT table_name FROM user_tables WHERE table_name LIKE 'LOANQ\_%' ESCAPE '\'`)
	if err != nil {
		t.Fatalf("listing loanq tables on oracle: %v", err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	rows.Close()
	for _, name := range tables {
		// CASCADE CONSTRAINTS: the tables reference each other; PURGE: no
		// recycle-bin copies pile up over test runs.
		if _, err := db.ExecContext(ctx, `DROP TABLE "`+name+`" CASCADE CONSTRAINTS PURGE`); err != nil {
			t.Fatalf("dropping %s on oracle: %v", name, err)
		}
	}
}

func unavailable(t testing.TB, dialect string, err error) {
	t.Helper()
	if Required(dialect) {
		t.Fatalf("%s is required (LOANQ_TEST_REQUIRE) but not available: %v — run the tests with `make test`, which finds or starts the servers", dialect, err)
	}
	t.Skipf("%s not available (%v); `make test` requires it", dialect, err)
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// Each runs fn as a subtest on every dialect, each with its own fresh
// database. The dialects run in parallel: each subtest owns its database,
// and the test's next top-level sibling starts only when all of them have
// ended (go test -parallel bounds how many run at once). fn must not call
// t.Parallel itself, and a test whose fn measures time, or shares a file, a
// port or a variable between the dialects, uses EachSerial.
func Each(t *testing.T, fn func(t *testing.T, dsn string)) {
	each(t, fn, true)
}

// EachSerial is Each with one dialect after the other: for tests that assert
// a latency (three databases at once on a small machine would stretch it) or
// share something between the dialects' runs.
func EachSerial(t *testing.T, fn func(t *testing.T, dsn string)) {
	each(t, fn, false)
}

func each(t *testing.T, fn func(t *testing.T, dsn string), parallel bool) {
	for _, d := range Dialects {
		t.Run(d, func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			fn(t, Fresh(t, d))
		})
	}
}

// Open connects to dsn; the connection closes when the test ends.
func Open(t testing.TB, dsn string) (drivers.Driver, *sql.DB) {
	t.Helper()
	d, db, _, err := drivers.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return d, db
}

// Migrated opens dsn and applies loanq's migrations.
func Migrated(t testing.TB, dsn string) (drivers.Driver, *sql.DB) {
	t.Helper()
	d, db := Open(t, dsn)
	if _, err := schema.Up(context.Background(), d, db); err != nil {
		t.Fatalf("migrate up on %s: %v", d.Name(), err)
	}
	return d, db
}

// Loan is a row of the test loan table.
type Loan struct {
	ID       int64
	Eligible bool
	Priority int
}

// CreateLoans creates the application table `loan` (id, eligible, priority)
// and fills it with ids 1..n, all eligible, priority = id (lower is served first).
func CreateLoans(t testing.TB, d drivers.Driver, db *sql.DB, n int) {
	t.Helper()
	ctx := context.Background()
	tables := d.Tables()
	if _, err := db.ExecContext(ctx, fmt.Sprintf("CREATE TABLE loan (id %s PRIMARY KEY, eligible INTEGER NOT NULL, priority INTEGER NOT NULL)", tables.BigInt)); err != nil {
		t.Fatalf("creating loan table: %v", err)
	}
	// The index a DBA adds for the tasks' criteria and order (eligible = 1,
	// priority order): the rows strategy needs it on InnoDB, which otherwise
	// locks every eligible row while it sorts them.
	if _, err := db.ExecContext(ctx, "CREATE INDEX loan_eligible_priority_ix ON loan (eligible, priority, id)"); err != nil {
		t.Fatalf("creating the loan index: %v", err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ins := Rebind(d, "INSERT INTO loan VALUES (?, 1, ?)")
	for i := 1; i <= n; i++ {
		if _, err := tx.ExecContext(ctx, ins, i, i); err != nil {
			t.Fatalf("filling loan table: %v", err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// Exec runs a statement written with ? placeholders, rewritten for the dialect.
func Exec(t testing.TB, d drivers.Driver, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), Rebind(d, query), args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// Rebind turns the ? placeholders of a test's own SQL into the dialect's
// ($1 or :1). Test SQL holds no literal '?'.
func Rebind(d drivers.Driver, query string) string { return drivers.Rebind(d.Dialect(), query) }

// Int runs a single-value query written with ? placeholders.
func Int(t testing.TB, d drivers.Driver, db *sql.DB, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRowContext(context.Background(), Rebind(d, query), args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// Objects counts the database objects (tables, indexes, procedures) of the
// current schema whose name starts with prefix, read from the catalogue of
// each database: how a test sees that something does not exist, rather than
// trusting a query's failure.
func Objects(t testing.TB, d drivers.Driver, db *sql.DB, prefix string) int64 {
	t.Helper()
	var q string
	switch d.Name() {
	case "postgres":
		q = `SELECT COUNT(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relname LIKE ? || '%'`
	case "mysql":
		q = `SELECT (SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE CONCAT(?, '%'))
     + (SELECT COUNT(*) FROM information_schema.statistics WHERE table_schema = DATABASE() AND index_name LIKE CONCAT(?, '%'))
     + (SELECT COUNT(*) FROM information_schema.routines WHERE routine_schema = DATABASE() AND routine_name LIKE CONCAT(?, '%'))`
		return Int(t, d, db, q, prefix, prefix, prefix)
	case "sqlite":
		q = `SELECT COUNT(*) FROM sqlite_master WHERE name LIKE ? || '%'`
	case "oracle":
		q = `SELECT COUNT(*) FROM user_objects WHERE object_name LIKE UPPER(?) || '%'`
	default:
		t.Fatalf("testdb.Objects: unknown dialect %s", d.Name())
	}
	return Int(t, d, db, q, prefix)
}

// Rows counts the rows of each of loanq's tables that a task's life fills
// (tasks, requests, work, query runs, per-user rows, pool), by table: a
// command that must leave nothing behind is checked against it.
func Rows(t testing.TB, d drivers.Driver, db *sql.DB) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, table := range []string{"loanq_task", "loanq_work_request", "loanq_work", "loanq_query_run", "loanq_task_user", "loanq_pool"} {
		out[table] = Int(t, d, db, "SELECT COUNT(*) FROM "+table)
	}
	return out
}

// StatementRunning reports whether another session of the test's database
// is running a statement whose text contains fragment (PostgreSQL:
// pg_stat_activity; MySQL/MariaDB: information_schema.PROCESSLIST). Tests
// wait on it where the statement's effects are not visible to them yet: a
// rows claim logs its request in its own transaction, so nothing of it is
// committed while its locking read runs. SQLite has no sessions: false.
func StatementRunning(t testing.TB, d drivers.Driver, db *sql.DB, fragment string) bool {
	t.Helper()
	var q string
	switch d.Name() {
	case "postgres":
		q = `SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND state = 'active'
  AND pid <> pg_backend_pid() AND position(? in query) > 0`
	case "mysql":
		q = `SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND COMMAND = 'Query'
  AND ID <> CONNECTION_ID() AND LOCATE(?, INFO) > 0`
	default:
		return false
	}
	return Int(t, d, db, q, fragment) > 0
}

// StatementWaitsForLock reports whether another session of the test's
// database is waiting for a row lock in a statement whose text contains
// fragment (PostgreSQL: pg_stat_activity's wait_event_type 'Lock';
// MySQL/MariaDB: information_schema.innodb_trx in 'LOCK WAIT'). Unlike
// StatementRunning it cannot match a statement that has just returned: a
// MariaDB session shows its last statement as 'Query' in PROCESSLIST for
// a moment after the client has its answer. SQLite has no sessions: false.
func StatementWaitsForLock(t testing.TB, d drivers.Driver, db *sql.DB, fragment string) bool {
	t.Helper()
	return StatementsWaitingForLock(t, d, db, fragment) > 0
}

// StatementsWaitingForLock counts the sessions StatementWaitsForLock looks
// for: those of the test's database waiting for a row lock in a statement
// whose text contains fragment.
func StatementsWaitingForLock(t testing.TB, d drivers.Driver, db *sql.DB, fragment string) int64 {
	t.Helper()
	var q string
	switch d.Name() {
	case "postgres":
		q = `SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND state = 'active'
  AND wait_event_type = 'Lock' AND pid <> pg_backend_pid() AND position(? in query) > 0`
	case "mysql":
		var n int64
		FreshInnoDBTrx(func() {
			n = Int(t, d, db, `SELECT COUNT(*) FROM information_schema.innodb_trx x
JOIN information_schema.PROCESSLIST p ON p.ID = x.trx_mysql_thread_id
WHERE p.DB = DATABASE() AND p.ID <> CONNECTION_ID() AND x.trx_state = 'LOCK WAIT' AND LOCATE(?, x.trx_query) > 0`, fragment)
		})
		return n
	default:
		return 0
	}
	return Int(t, d, db, q, fragment)
}

// innodbTrxRead serialises this process's reads of InnoDB's transaction
// tables and remembers when the last one ended.
var innodbTrxRead struct {
	sync.Mutex
	last time.Time
}

// innodbTrxIdle is how long InnoDB's transaction tables must go unread
// before a read refreshes them: information_schema.innodb_trx (and
// innodb_locks, innodb_lock_waits) is served from a server-wide cache that
// InnoDB refreshes only when nobody has read it for 0.1 s (docs/mysql.md,
// beside the innodb_trx example). A loop polling it every 20 ms would
// read the same stale picture for ever.
const innodbTrxIdle = 120 * time.Millisecond

// FreshInnoDBTrx runs read, a read of information_schema.innodb_trx, so
// that it sees the present: after the tables went unread long enough for
// InnoDB to refresh them. Every read of those tables in the tests goes
// through it (they run in one process: e2e's).
func FreshInnoDBTrx(read func()) {
	innodbTrxRead.Lock()
	defer innodbTrxRead.Unlock()
	if wait := innodbTrxIdle - time.Since(innodbTrxRead.last); wait > 0 {
		time.Sleep(wait)
	}
	defer func() { innodbTrxRead.last = time.Now() }()
	read()
}

// TransactionsOpen counts the transactions of other sessions of the test's
// database that have written or locked something (PostgreSQL: pg_locks
// shows a transaction id taken; MySQL/MariaDB: information_schema.innodb_trx
// with rows locked or modified, read fresh: FreshInnoDBTrx). A killed
// claimer must leave none.
func TransactionsOpen(t testing.TB, d drivers.Driver, db *sql.DB) int64 {
	t.Helper()
	switch d.Name() {
	case "postgres":
		return Int(t, d, db, `SELECT COUNT(DISTINCT l.pid) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE a.datname = current_database() AND l.locktype = 'transactionid' AND l.pid <> pg_backend_pid()`)
	case "mysql":
		var n int64
		FreshInnoDBTrx(func() {
			n = Int(t, d, db, `SELECT COUNT(*) FROM information_schema.innodb_trx x
JOIN information_schema.PROCESSLIST p ON p.ID = x.trx_mysql_thread_id
WHERE p.DB = DATABASE() AND p.ID <> CONNECTION_ID() AND (x.trx_rows_locked > 0 OR x.trx_rows_modified > 0)`)
		})
		return n
	}
	return 0
}
