package schema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/dsn"
	"github.com/loanq/loanq/internal/textsafe"
	"github.com/loanq/loanq/problem"
)

// MigrateWhen says whether Open brings the schema up to date.
type MigrateWhen int

const (
	// Never leaves the schema as it is (`migrate`, which does it itself;
	// `serve`, which writes nothing; a pool opened after the schema was
	// checked).
	Never MigrateWhen = iota
	// IfSelfMigrating migrates only a database whose driver says so
	// (Driver.MigratesOnOpen: the embedded SQLite, which nobody else
	// administers, so a newcomer needs no `migrate up`), and only when the
	// database is loanq's already or holds no table at all: an SQLite file
	// of some other application is refused, not given loanq's tables.
	IfSelfMigrating
	// Always migrates any database (the demo, which writes its sample table
	// anyway).
	Always
)

// Options say how Open treats the database.
type Options struct {
	// MustExist refuses a file database (SQLite) that does not exist:
	// opening it would create an empty file, and a mistyped path would look
	// like an empty queue. Set it when the user named the database (--db,
	// LOANQ_DB, DATABASE_URL); the zero-set-up default creates itself, and so
	// do `migrate up` and `demo`.
	MustExist bool
	// Migrate says whether to bring the schema up to date first.
	Migrate MigrateWhen
	// Check refuses a schema that is not the one this binary needs (not
	// migrated, behind, or newer).
	Check bool
	// Conns, when not 0, is the pool's size: as many open and idle
	// connections (a benchmark gives each worker its own).
	Conns int
	// ConnectTimeout, when not 0, bounds connecting (not migrating).
	ConnectTimeout time.Duration
	// Brief: the process sends each statement about once and ends (a
	// command-line call), so the driver connects for that where it has a
	// way (drivers.BriefOpener: PostgreSQL sends statements unprepared, in
	// one round trip each). Leave it unset for a process that repeats its
	// statements: serve, work run, lock run, a refill loop, the benchmarks.
	Brief bool
}

// Database is an open database: the pool, its driver, and the DSN it was
// opened with (print DSN.Redacted, never the raw string).
type Database struct {
	*sql.DB
	Driver drivers.Driver
	DSN    dsn.DSN
	// Migrated: Open applied migrations (the schema was missing or behind).
	Migrated bool
}

// Open is how every command, the benchmarks and the demo open loanq's
// database: parse the DSN and pick its driver, refuse a missing file when
// asked, connect, migrate and check the schema as opts say. On error nothing
// stays open.
func Open(ctx context.Context, raw string, opts Options) (*Database, error) {
	d, target, err := drivers.ParseDSN(raw)
	if err != nil {
		return nil, err
	}
	if opts.MustExist {
		if err := mustExist(target); err != nil {
			return nil, err
		}
	}
	connectCtx := ctx
	if opts.ConnectTimeout > 0 {
		var cancel context.CancelFunc
		connectCtx, cancel = context.WithTimeout(ctx, opts.ConnectTimeout)
		defer cancel()
	}
	var db *sql.DB
	if bo, ok := d.(drivers.BriefOpener); ok && opts.Brief {
		db, err = bo.OpenBrief(connectCtx, target)
	} else {
		db, err = d.Open(connectCtx, target)
	}
	if err != nil {
		if derr := dirNotWritable(target); derr != nil {
			return nil, derr
		}
		return nil, err
	}
	if opts.Conns > 0 {
		db.SetMaxOpenConns(opts.Conns)
		db.SetMaxIdleConns(opts.Conns)
	}
	out := &Database{DB: db, Driver: d, DSN: target}
	if opts.Migrate == IfSelfMigrating && d.MigratesOnOpen() {
		err = loanqsOrEmpty(ctx, d, db, target)
	}
	if err == nil && (opts.Migrate == Always || (opts.Migrate == IfSelfMigrating && d.MigratesOnOpen())) {
		out.Migrated, err = ensureCurrent(ctx, d, db)
	}
	if err == nil && opts.Check {
		err = Check(ctx, d, db, target.Redacted())
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return out, nil
}

// mustExist refuses a file database that does not exist (see
// Options.MustExist). An in-memory database always does.
func mustExist(target dsn.DSN) error {
	if !target.File || target.Database == ":memory:" {
		return nil
	}
	if _, err := os.Stat(target.Database); err == nil || !os.IsNotExist(err) {
		return nil
	}
	return problem.WithHint(problem.Usagef("the SQLite database %s does not exist", target.Database),
		fmt.Sprintf("check the path in --db / LOANQ_DB; to create it: loanq --db '%s' migrate up (or loanq --db '%s' demo)", target.Redacted(), target.Redacted()))
}

// dirNotWritable names the cause when a file database cannot be opened
// because its directory is not writable: SQLite creates the file there, and
// its journal and WAL files beside an existing one, so the driver's "unable
// to open database file (14)" is about the directory, not the file. Bad
// input (exit 2): the user picks another directory or --db. It probes by
// creating a file, which works the same on every OS; nil when the directory
// is writable or the DSN is not a file.
func dirNotWritable(target dsn.DSN) error {
	if !target.File || target.Database == ":memory:" || strings.HasPrefix(target.Database, "file:") {
		return nil
	}
	dir := filepath.Dir(target.Database)
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	probe, err := os.CreateTemp(dir, ".loanq-probe-*")
	if err == nil {
		probe.Close()
		os.Remove(probe.Name())
		return nil
	}
	if !errors.Is(err, fs.ErrPermission) {
		return nil
	}
	what := "create"
	if _, serr := os.Stat(target.Database); serr == nil {
		what = "write" // SQLite writes its journal and WAL files beside the database
	}
	return problem.WithHint(problem.Usagef("cannot open the SQLite database %s: its directory %s is not writable, and SQLite must %s files there",
		target.Redacted(), textsafe.Escape(dir), what),
		"run loanq in a directory you may write, give the directory write permission, or name a database elsewhere with --db sqlite:PATH or LOANQ_DB")
}

// TableLister is implemented by a self-migrating driver: it names tables of
// the database (a few are enough), so that self-migration can tell an empty
// database from someone else's.
type TableLister interface {
	SomeTables(ctx context.Context, db *sql.DB, n int) ([]string, error)
}

// loanqsOrEmpty refuses to self-migrate a database that has no loanq schema
// but holds other tables: a read-only command (`task list`) given some
// application's SQLite file must not add loanq's tables to it. An empty
// database (the zero-set-up default, a new file) and loanq's own, behind or
// current, pass.
func loanqsOrEmpty(ctx context.Context, d drivers.Driver, db *sql.DB, target dsn.DSN) error {
	_, found, err := read(ctx, d, db)
	if err != nil || found {
		return err
	}
	tl, ok := d.(TableLister)
	if !ok {
		return nil
	}
	tables, err := tl.SomeTables(ctx, db, 3)
	if err != nil {
		return fmt.Errorf("looking for tables in %s: %w", target.Redacted(), err)
	}
	if len(tables) == 0 {
		return nil
	}
	list := strings.Join(tables, ", ")
	if len(tables) == 3 {
		list += ", …"
	}
	return &problem.Error{Kind: problem.Usage,
		Msg: fmt.Sprintf("%s is not a loanq database: it holds other tables (%s) and no loanq schema; nothing was changed",
			target.Redacted(), textsafe.Escape(list)),
		Hint: "run `loanq migrate up` first to add loanq's tables beside them, or point --db / LOANQ_DB at loanq's database"}
}
