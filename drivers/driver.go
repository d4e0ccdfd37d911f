// Package drivers defines the one interface every database loanq supports
// implements, and the registry that picks a driver from a DSN's scheme.
//
// Writing a new driver: the checklist. It is every place the last driver
// (Oracle) touched outside its own folder; `git grep -il oracle` lists them.
//
//  1. drivers/<db>/: a type that implements Driver, asserted with
//     var _ drivers.Driver = (*Driver)(nil); its DSN parser (dsn.go) and
//     its registration from init() (drivers.Register).
//  2. Its Capabilities (capabilities.go), one value said once: the lock
//     strategies, how a waiter waits and bounds its wait, how a round
//     finishes its requests, how a claim caps a user, how the pool is
//     claimed, how a lock holder's session is limited, whether the
//     database has accounts. The engine switches on these, never on an
//     empty statement; its Strategies are the lock strategies. A table test
//     in drivers/<db>/capabilities_test.go pins the value and the
//     statements it sends (drivertest.Capabilities, no database needed).
//  3. drivers/<db>/sql.go: every statement the dialect sends, in one file:
//     its Dialect (the vocabulary portable statements are written in,
//     drivers/dialect.go) and, through drivers.Build(dialect{},
//     capabilities, …), the statements it says differently from Portable;
//     what it says differently in the features' catalogues (named locks,
//     the dashboard, prune, …: drivers.Catalogue) is its catalogueSQL,
//     returned by CatalogueSQL.
//     Build refuses statements that disagree with the capabilities: one a
//     capability needs left empty, or one it never sends given (a
//     statement with an `empty` tag is sent exactly when its capability
//     says so), and a read whose select list does not name its row type's
//     columns in order (an override keeps the portable text's aliases).
//     `loanq sql` prints the capabilities and the statements, so
//     what users read is what the driver executes;
//     e2e/fault_injection_test.go checks that the file builds SQL from
//     literals and constants only.
//  4. migrations/<db>/: the dialect's schema, every migration number the
//     other dialects have (a folder may skip a number), and <db> added to
//     the //go:embed line of migrations/migrations.go (a folder not named
//     there is silently empty). Implement schema.MigrationStorer (goose's
//     version-table store) and, if the server can list tables, schema.TableLister.
//  5. The optional interfaces its capabilities call for, each asserted in
//     the driver: RowLocker and RowWaiter (strategy rows), PoolLocker
//     (pool claim procedure), FinishingClaimer (rows finish one-statement),
//     HoldLimiter (a hold limit with more than one way to set it),
//     GrantWriter (accounts database) — Register refuses a driver whose
//     capabilities and these disagree (CheckDriver) — and the ones a
//     database needs for one feature only: LockableChecker, DataLocker,
//     ClaimPlanner, KeyTyper, KeyDescriber. Everything every database
//     answers (IsDeadlock, IsPermissionDenied, Unsupported, MigratesOnOpen,
//     ReadTxOptions, AcceptsPlainPath, Tables, Explain) is a method of
//     Driver itself, with a one-line answer where the database has nothing
//     to say. A client that reads the password from the environment names the variables in
//     Capabilities.PasswordEnv (lock run and work run keep them from
//     their commands);
//     sqllex.Syntaxer (internal/sqllex/syntaxes.go:
//     how the dialect quotes, for the checks of a task's --where/--order).
//  6. drivers/all/all.go: a blank import, so every binary registers it.
//  7. Tests: drivers/<db>/conformance_test.go runs the drivers/drivertest
//     suite; internal/testkit/testdb learns to make a fresh database on it (Fresh,
//     BaseDSN, the LOANQ_TEST_<DB>_DSN variable, Objects) and, if it is to
//     run in `make test`, joins testdb.Dialects; scripts/test-servers.sh
//     learns to find or start a server (an ensure_<db> called from
//     scripts/test.sh, and <db> in its LOANQ_TEST_REQUIRE). A dialect no CI
//     machine can run is pinned by golden files instead: testdata/<db>/ and
//     a golden test with -update, as drivers/oracle/golden_test.go.
//  8. loanq bench: the item table's DDL and statement overrides in
//     bench/dialects.go (`go test ./bench -run Golden -update` for a golden
//     dialect).
//  9. Docs: docs/<db>.md (privileges, what the dialect does its own way),
//     the database list and DSN forms of README.md and commands/app.go's
//     --db usage, docs/install.md when the build needs more than Go.
package drivers

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/loankey"
	"io/fs"
	"net"
	"sort"
	"strings"
	"sync"

	"github.com/loanq/loanq/dsn"
	"github.com/loanq/loanq/problem"
)

// Strategy is how a caller takes a task's lock (docs/algorithm.md, step 2).
type Strategy string

const (
	// Skip: SELECT … FOR UPDATE SKIP LOCKED; no row means someone else holds it.
	Skip Strategy = "skip"
	// NoWait: SELECT … FOR UPDATE NOWAIT; the lock error means busy.
	NoWait Strategy = "nowait"
	// Wait: plain SELECT … FOR UPDATE; queue behind the holder.
	Wait Strategy = "wait"
	// Lease: an UPDATE-based lease with expiry and a fencing check at commit
	// (docs/algorithm.md, "The lease strategy"). No transaction is held while
	// the criteria query runs.
	Lease Strategy = "lease"
	// Rows: no task lock at all. Each caller runs the criteria query itself,
	// locking the source rows it returns with the dialect's skip-locked syntax,
	// and assigns what it locked (docs/algorithm.md, the rows strategy). No coalescing.
	// Only drivers that implement RowLocker offer it.
	Rows Strategy = "rows"
)

// AllStrategies lists every strategy in documentation order.
var AllStrategies = []Strategy{Skip, NoWait, Wait, Lease, Rows}

// ParseStrategy validates a strategy name.
func ParseStrategy(s string) (Strategy, error) {
	for _, st := range AllStrategies {
		if string(st) == strings.ToLower(strings.TrimSpace(s)) {
			return st, nil
		}
	}
	return "", problem.Usagef("unknown lock strategy %q: use one of %s", s, StrategyList(AllStrategies, ", "))
}

// StrategyList names strategies for a message or a flag's help, in their
// order, the last two joined by last: "skip, nowait, wait, lease or rows"
// with last " or ". Help texts use it so that a new strategy is named once.
func StrategyList(ss []Strategy, last string) string {
	var b strings.Builder
	for i, s := range ss {
		switch {
		case i == 0:
		case i == len(ss)-1:
			b.WriteString(last)
		default:
			b.WriteString(", ")
		}
		b.WriteString(string(s))
	}
	return b.String()
}

// Querier is what *sql.DB, *sql.Tx and *sql.Conn have in common.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// CriteriaSource is what a criteria query is built from: a task's definition.
// Source and Key are validated identifiers; Where and Order are SQL written by
// an admin (tasks are defined by admins, not by processors).
type CriteriaSource struct {
	Source string
	Key    string
	Where  string
	Order  string
	// Kind is the key column's kind (the task's key_kind): how the keys
	// of the source are bound and listed (InKeys).
	Kind loankey.Kind
}

// Driver is one database family. The algorithm lives in package dispatch and is
// written once against this interface; everything that differs between
// databases lives behind it.
type Driver interface {
	// Name is the dialect's name: postgres, mysql, oracle or sqlite.
	Name() string
	// Schemes are the DSN schemes this driver answers to (its aliases
	// included); ParseDSN receives a DSN of any of them.
	Schemes() []string
	// ParseDSN checks a DSN of this driver's forms and splits it (most drivers
	// call dsn.ParseURL, then check what their database needs). Its errors never
	// contain any part of the password.
	ParseDSN(raw string) (dsn.DSN, error)
	// Open connects and checks the connection. Errors never contain the password.
	Open(ctx context.Context, target dsn.DSN) (*sql.DB, error)
	// Statements are every fixed statement of the engine the dialect
	// sends, by purpose, compiled for it (drivers.Build).
	Statements() *Statements
	// CatalogueSQL is what the dialect says its own way in the statement
	// catalogues of the features outside the engine (Catalogue): by
	// catalogue name, then statement field; nil when it says them all the
	// portable way. It lives in the driver's sql.go.
	CatalogueSQL() Overrides
	// Dialect is how the database writes what databases say differently:
	// for statements built at run time (a task's criteria query).
	Dialect() Dialect
	// IsLockBusy reports whether err means "the row is locked by someone else"
	// (the NOWAIT error, or a lock wait timeout).
	IsLockBusy(err error) bool
	// IsUniqueViolation reports whether err is a unique-constraint violation.
	IsUniqueViolation(err error) bool
	// IsDeadlock reports whether err means "chosen as a deadlock victim;
	// the transaction was rolled back" (InnoDB, PostgreSQL, Oracle; never
	// on SQLite, which has one writer). The engine's task lock is one row
	// and cannot deadlock, but a caller locking several rows with plain FOR
	// UPDATE can (InnoDB's next-key locks make that likely), and retries.
	IsDeadlock(err error) bool
	// IsPermissionDenied reports whether err is the database refusing a
	// statement to this account: a missing privilege, a row-level security
	// policy, or one of loanq's identity triggers (docs/security.md).
	// Never on SQLite: it has no accounts; the file's permissions are the
	// boundary.
	IsPermissionDenied(err error) bool
	// Unsupported says why this build of loanq cannot connect with the
	// driver (Oracle without cgo), or "" when it can. Every driver
	// registers in every build and says so when opened.
	Unsupported() string
	// MigratesOnOpen reports whether commands bring the database's schema
	// up to date when they open it (the embedded SQLite: nobody else
	// administers the file, so a newcomer needs no `migrate up`).
	MigratesOnOpen() bool
	// ReadTxOptions are the options of a transaction that only reads:
	// read-only, unless the database should not be asked for one (SQLite).
	ReadTxOptions() *sql.TxOptions
	// AcceptsPlainPath reports whether raw, a DSN without a scheme, is
	// this driver's (SQLite: a file path such as work.db).
	AcceptsPlainPath(raw string) bool
	// Capabilities are what the database can do where databases differ in
	// how the engine works (capabilities.go): the engine switches on them.
	// Register refuses a driver whose optional interfaces disagree with
	// them, and the catalogue's first use (BuildOnce) one whose statements
	// do (CheckDriver checks both).
	Capabilities() Capabilities
	// Migrations is the dialect's embedded migration folder.
	Migrations() fs.FS
	// Tables is how a portable CREATE TABLE and INSERT are written for the
	// tables loanq creates outside its migrations: the demo's sample loans
	// and the tests' tables (tables.go).
	Tables() Tables
	// Explainer: every database can show how it runs a statement
	// (`loanq explain`, explain.go).
	Explainer
}

// RowLocker is implemented by the drivers of databases with row locks that
// can skip held rows (PostgreSQL, MySQL/MariaDB, Oracle): they offer the rows
// strategy. The statement texts live in the driver's sql.go like every other.
type RowLocker interface {
	// RowsClaimSQL is the statement LockRows sends for a task (what
	// `loanq sql` and the golden tests show).
	RowsClaimSQL(src CriteriaSource) string
	// LockRows runs the task's criteria query inside tx, locking up to n rows
	// of the source table (only the source: the exclusions read loanq_work
	// without locking it) in priority order and passing over rows other
	// transactions hold. It returns the locked keys (as text: KeyAsText)
	// in priority order; the
	// locks last until tx ends.
	LockRows(ctx context.Context, tx Querier, src CriteriaSource, taskID int64, n int) ([]string, error)
	// RowsTxOptions are the options of a rows claim transaction: InnoDB needs
	// READ COMMITTED, or its locking read keeps next-key locks on every
	// index record it scanned, not only on the rows it returned.
	RowsTxOptions() *sql.TxOptions
}

// BriefOpener is implemented by a driver that connects differently for a
// brief process: one that sends each of its statements about once and
// ends, as a command-line call does (schema.Options.Brief; docs/postgres.md,
// "What one command-line call costs"). PostgreSQL's Open prepares each
// statement on the server before its first run, one round trip more per
// statement, which later runs on the same connection win back; a brief
// process makes no later runs, so OpenBrief sends each statement unprepared
// in one round trip. What the statements do is the same either way.
type BriefOpener interface {
	OpenBrief(ctx context.Context, target dsn.DSN) (*sql.DB, error)
}

// FinishingClaimer is implemented by the drivers whose capabilities say rows
// finish one-statement (PostgreSQL): once a rows claim of a new request
// holds its rows and has logged the request, one statement assigns the
// locked rows that are eligible still (what CriteriaClaim does), finishes
// the request with the outcome the claim expects, logs the run and returns
// the assigned loans in order with the request's creation time. It
// finishes nothing and returns no row unless every locked key was
// assigned (FinishingClaimParams.Assigned of them): the engine then rolls
// back and claims the statement-by-statement way, which replaces lost
// rows.
type FinishingClaimer interface {
	FinishingClaim(src CriteriaSource) *Query[engineio.FinishingClaimParams, engineio.FinishingClaimRow]
}

// LockableChecker is optionally implemented by RowLocker drivers whose
// database accepts a locking read on a source it cannot lock row by row (a
// MySQL view with GROUP BY, DISTINCT or aggregates is read into a temporary
// table and nothing is locked). CheckLockable returns a reason when the
// source cannot be locked, "" when it can.
type LockableChecker interface {
	CheckLockable(ctx context.Context, q Querier, source string) (string, error)
}

// Supports reports whether d supports strategy s.
func Supports(d Driver, s Strategy) bool { return d.Capabilities().Supports(s) }

// Every driver registers in every build; a driver that cannot work in this
// build (Oracle without cgo) says so when it is opened.
var (
	mu       sync.RWMutex
	registry = map[string]Driver{}
)

// Register makes a driver available under its schemes. It panics on a nil
// driver, a scheme registered twice, or capabilities that disagree with the
// driver's strategies or optional interfaces: all are programming errors.
// It leaves the statements alone: building a catalogue at every process's
// start costs more than most commands (BuildOnce builds and checks it on
// first use).
func Register(d Driver) {
	mu.Lock()
	defer mu.Unlock()
	if d == nil {
		panic("drivers: Register of a nil driver")
	}
	if err := checkInterfaces(d); err != nil {
		panic("drivers: " + err.Error())
	}
	for _, s := range d.Schemes() {
		if _, dup := registry[s]; dup {
			panic("drivers: Register called twice for scheme " + s)
		}
		registry[s] = d
	}
}

// Lookup returns the driver for a scheme.
func Lookup(scheme string) (Driver, error) {
	mu.RLock()
	defer mu.RUnlock()
	if d, ok := registry[scheme]; ok {
		return d, nil
	}
	return nil, problem.Usagef("unknown database scheme %q: use one of %s", scheme, strings.Join(knownSchemesLocked(), ", "))
}

// ByName returns the driver whose Name() is name, or that registered name as
// one of its schemes (mariadb, postgresql), for `loanq sql --dialect`.
func ByName(name string) (Driver, error) {
	mu.RLock()
	defer mu.RUnlock()
	name = strings.ToLower(strings.TrimSpace(name))
	for _, d := range registry {
		if d.Name() == name {
			return d, nil
		}
	}
	if d, ok := registry[name]; ok {
		return d, nil
	}
	return nil, problem.Usagef("unknown dialect %q: use one of %s", name, strings.Join(Names(), ", "))
}

// Names lists the registered dialect names, sorted.
func Names() []string {
	seen := map[string]bool{}
	var out []string
	for _, d := range registry {
		if !seen[d.Name()] {
			seen[d.Name()] = true
			out = append(out, d.Name())
		}
	}
	sort.Strings(out)
	return out
}

func knownSchemesLocked() []string {
	var out []string
	for s := range registry {
		out = append(out, s+"://")
	}
	sort.Strings(out)
	return out
}

// Connect parses a DSN, picks its driver and opens it.
func Connect(ctx context.Context, raw string) (Driver, *sql.DB, dsn.DSN, error) {
	d, target, err := ParseDSN(raw)
	if err != nil {
		return nil, nil, dsn.DSN{}, err
	}
	db, err := d.Open(ctx, target)
	if err != nil {
		return nil, nil, target, err
	}
	return d, db, target, nil
}

// ConnectFirst opens db's first connection, which proves that the database
// answers and accepts the DSN's credentials, and leaves it idle in the pool
// for the command's first statement. It sends nothing more: a ping
// (sql.DB.PingContext) would cost a round trip that the connection's
// start-up has just made needless.
func ConnectFirst(ctx context.Context, db *sql.DB) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	return conn.Close()
}

// ConnectError wraps a failure to connect with the DSN (password hidden) and
// makes sure no password leaks from the driver's message. kind is
// problem.Usage when the DSN must change (a wrong password or database name),
// problem.Failure when the server may be down or unreachable.
//
// A driver that tried several addresses or TLS modes (pgx with sslmode=prefer)
// reports the same failure once per attempt: each distinct line is printed
// once. A host name that does not resolve gets a hint that says so.
func ConnectError(kind problem.Kind, target dsn.DSN, err error, hint string) error {
	msg := ""
	for _, l := range strings.Split(target.Scrub(err.Error()), "\n") {
		l = strings.Join(strings.Fields(l), " ")
		switch {
		case l == "" || strings.Contains(msg, l):
			// said already (a repeated attempt)
		case msg == "" || strings.HasSuffix(msg, ":"):
			msg = strings.TrimSpace(msg + " " + l)
		default:
			msg += "; " + l
		}
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
		hint = "the host name does not resolve: check the host in --db / LOANQ_DB"
	}
	return &problem.Error{Kind: kind, Msg: target.Scrub(fmt.Sprintf("cannot connect to %s: %s", target.Redacted(), msg)), Hint: hint}
}
