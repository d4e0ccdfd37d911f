package schema

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/dsn"
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
	// (drivers.SelfMigrating: the embedded SQLite, which nobody else
	// administers, so a newcomer needs no `migrate up`).
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
	db, err := d.Open(connectCtx, target)
	if err != nil {
		return nil, err
	}
	if opts.Conns > 0 {
		db.SetMaxOpenConns(opts.Conns)
		db.SetMaxIdleConns(opts.Conns)
	}
	out := &Database{DB: db, Driver: d, DSN: target}
	if opts.Migrate == Always || (opts.Migrate == IfSelfMigrating && drivers.MigratesOnOpen(d)) {
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
