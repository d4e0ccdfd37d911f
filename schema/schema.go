// Package schema opens loanq's database (Open: the one way every command,
// benchmark and the demo do it), applies loanq's embedded migrations (goose)
// and checks, before any other command runs, that the database's schema is
// the one this binary was built for.
package schema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/migrations"
	"github.com/loanq/loanq/problem"
)

// NewProvider returns a goose provider for the driver's migration folder, with
// the version table named loanq_schema_version so that loanq keeps to its own
// tables in a shared schema.
func NewProvider(d drivers.Driver, db *sql.DB) (*goose.Provider, error) {
	store, err := versionStore(d)
	if err != nil {
		return nil, err
	}
	return goose.NewProvider(goose.DialectCustom, db, d.Migrations(),
		goose.WithStore(store), goose.WithDisableGlobalRegistry(true))
}

// MigrationStorer is what a driver implements to have its schema migrated:
// goose's store of the version table in its dialect. Kept out of
// drivers.Driver so that the driver interface names no migration library.
type MigrationStorer interface {
	MigrationStore(table string) (database.Store, error)
}

func versionStore(d drivers.Driver) (*zeroStore, error) {
	ms, ok := d.(MigrationStorer)
	if !ok {
		return nil, fmt.Errorf("the %s driver has no migration store", d.Name())
	}
	store, err := ms.MigrationStore(migrations.VersionTable)
	if err != nil {
		return nil, fmt.Errorf("migration store for %s: %w", d.Name(), err)
	}
	return &zeroStore{store}, nil
}

// zeroStore reads a version table without rows as version 0. goose creates
// its table and then inserts a version-0 row, but where DDL commits on its own
// (Oracle, MySQL/MariaDB) the two are not atomic: a failed insert, or a
// second process that finds the table between the other's CREATE and INSERT,
// leaves or sees an empty table, and goose would stop every later command with
// "missing zero version". The version-0 row carries no information, so an
// empty table means "nothing applied" on every dialect.
type zeroStore struct{ database.Store }

var _ database.StoreExtender = (*zeroStore)(nil)

func (s *zeroStore) GetLatestVersion(ctx context.Context, db database.DBTxConn) (int64, error) {
	v, err := s.Store.GetLatestVersion(ctx, db)
	if errors.Is(err, database.ErrVersionNotFound) {
		return 0, nil
	}
	return v, err
}

func (s *zeroStore) ListMigrations(ctx context.Context, db database.DBTxConn) ([]*database.ListMigrationsResult, error) {
	ms, err := s.Store.ListMigrations(ctx, db)
	if err == nil && len(ms) == 0 {
		return []*database.ListMigrationsResult{{Version: 0, IsApplied: true}}, nil
	}
	return ms, err
}

// TableExists passes the dialect's own check through (goose looks for this
// method to decide whether to create its table). goose's SQLite store has
// none; goose then reads the version-0 row and creates the table when that
// fails, which an existing empty table would make fail. Here a table that
// answers the latest-version query exists, rows or not; as in goose, one that
// cannot be read counts as missing.
func (s *zeroStore) TableExists(ctx context.Context, db database.DBTxConn) (bool, error) {
	if t, ok := s.Store.(interface {
		TableExists(context.Context, database.DBTxConn) (bool, error)
	}); ok {
		exists, err := t.TableExists(ctx, db)
		if !errors.Is(err, errors.ErrUnsupported) {
			return exists, err
		}
	}
	_, err := s.Store.GetLatestVersion(ctx, db)
	return err == nil || errors.Is(err, database.ErrVersionNotFound), nil
}

// State is where a database's schema stands relative to this binary.
type State struct {
	Current int64 // highest applied version, 0 when never migrated
	Target  int64 // highest version embedded in this binary
}

// Read returns the schema state without changing anything. It does not ask
// goose: every goose.Provider method that reads the version (GetDBVersion,
// Status, GetVersions, HasPending) first creates the version table when it is
// missing (goose v3.29, Provider.initialize → ensureVersionTable), so a
// read-only command would create loanq_schema_version — or, for an Oracle
// account that reaches loanq's tables through CURRENT_SCHEMA and may create
// tables, a private empty one. Read sends only the dialect store's own
// table-exists check and latest-version query.
func Read(ctx context.Context, d drivers.Driver, db *sql.DB) (State, error) {
	st, _, err := read(ctx, d, db)
	return st, err
}

// read also says whether the version table was found.
func read(ctx context.Context, d drivers.Driver, db *sql.DB) (State, bool, error) {
	p, err := NewProvider(d, db) // reads the embedded files only, not the database
	if err != nil {
		return State{}, false, err
	}
	st := State{}
	for _, s := range p.ListSources() {
		st.Target = max(st.Target, s.Version)
	}
	store, err := versionStore(d)
	if err != nil {
		return State{}, false, err
	}
	// The version first: on a migrated database, the case of every command
	// but the first `migrate up`, it is the only statement sent (every loanq
	// call is a process that checks the schema; BENCHMARKS.md, "Start-up").
	// It is read also when a table-exists check would not see the table: an
	// Oracle account may reach the owner's tables through synonyms
	// (docs/oracle.md).
	v, verr := store.GetLatestVersion(ctx, db)
	if verr == nil {
		st.Current = v
		return st, true, nil
	}
	// It failed: a database never migrated has no version table (nothing
	// to read, and nothing is created); any other failure is said.
	exists, err := store.TableExists(ctx, db)
	if err != nil {
		return State{}, false, fmt.Errorf("looking for the version table %s: %w", migrations.VersionTable, err)
	}
	if !exists {
		return st, false, nil
	}
	return State{}, false, fmt.Errorf("reading the schema version: %w", verr)
}

// Check returns a usage error when the schema is not the one this binary
// needs: not migrated, behind, or newer than the binary.
func Check(ctx context.Context, d drivers.Driver, db *sql.DB, redactedDSN string) error {
	st, err := Read(ctx, d, db)
	if err != nil {
		return err
	}
	switch {
	case st.Current == 0:
		return &problem.Error{Kind: problem.Usage,
			Msg:  fmt.Sprintf("database %s has no loanq schema", redactedDSN),
			Hint: "run `loanq migrate up` first"}
	case st.Current < st.Target:
		return &problem.Error{Kind: problem.Usage,
			Msg:  fmt.Sprintf("database %s has loanq schema version %d; this loanq needs %d", redactedDSN, st.Current, st.Target),
			Hint: "run `loanq migrate up`"}
	case st.Current > st.Target:
		return newerError("database "+redactedDSN, st)
	}
	return nil
}

func newerError(what string, st State) error {
	return &problem.Error{Kind: problem.Usage,
		Msg:  fmt.Sprintf("%s has loanq schema version %d, newer than this loanq knows (%d)", what, st.Current, st.Target),
		Hint: "use the loanq release that migrated this database"}
}

// refuseNewer stops up and down on a schema migrated by a newer loanq: this
// binary does not know those migrations, so it can neither bring the schema
// "up" to its own older version nor roll back what it never applied.
func refuseNewer(ctx context.Context, d drivers.Driver, db *sql.DB) error {
	st, err := Read(ctx, d, db)
	if err != nil {
		return err
	}
	if st.Current > st.Target {
		return newerError("the database", st)
	}
	return nil
}

// Up applies every pending migration and returns the versions it applied.
func Up(ctx context.Context, d drivers.Driver, db *sql.DB) ([]int64, error) {
	if err := refuseNewer(ctx, d, db); err != nil {
		return nil, err
	}
	p, err := NewProvider(d, db)
	if err != nil {
		return nil, err
	}
	var applied []int64
	// Migrating beside running processes (docs/operations.md), a
	// migration's ALTER can meet their row locks in the other order and be
	// chosen as the deadlock victim. Where DDL is transactional the victim's
	// migration was rolled back whole, and the next Up starts from it again;
	// elsewhere its first statements may have committed, and it is not
	// repeated by itself.
	tries := 1
	if d.Capabilities().DDL == drivers.DDLTransactional {
		tries = 5
	}
	err = drivers.RetryDeadlock(ctx, d, tries, func() error {
		res, err := p.Up(ctx)
		for _, r := range res {
			if r != nil && r.Source != nil && r.Error == nil {
				applied = append(applied, r.Source.Version)
			}
		}
		return err
	})
	if err != nil {
		return applied, fmt.Errorf("migrate up: %w", err)
	}
	return applied, nil
}

// Down rolls back the most recent migration and returns its version (0 if none).
func Down(ctx context.Context, d drivers.Driver, db *sql.DB) (int64, error) {
	if err := refuseNewer(ctx, d, db); err != nil {
		return 0, err
	}
	p, err := NewProvider(d, db)
	if err != nil {
		return 0, err
	}
	res, err := p.Down(ctx)
	if err != nil {
		if errors.Is(err, goose.ErrNoNextVersion) {
			return 0, nil
		}
		return 0, fmt.Errorf("migrate down: %w", err)
	}
	if res == nil || res.Source == nil {
		return 0, nil
	}
	return res.Source.Version, nil
}

// Migration is one row of `migrate status`.
type Migration struct {
	Version   int64  `json:"version"`
	Name      string `json:"name"`
	Applied   bool   `json:"applied"`
	AppliedAt string `json:"applied_at,omitempty"`
}

// Status lists every embedded migration and whether it is applied. Like Read,
// it creates nothing (goose's own Status would create a missing version
// table): it asks the store about each version, as goose does.
func Status(ctx context.Context, d drivers.Driver, db *sql.DB) ([]Migration, error) {
	p, err := NewProvider(d, db)
	if err != nil {
		return nil, err
	}
	_, found, err := read(ctx, d, db)
	if err != nil {
		return nil, err
	}
	store, err := versionStore(d)
	if err != nil {
		return nil, err
	}
	out := []Migration{}
	for _, s := range p.ListSources() {
		m := Migration{Version: s.Version, Name: path.Base(s.Path)}
		if found {
			res, err := store.GetMigration(ctx, db, s.Version)
			if err != nil && !errors.Is(err, database.ErrVersionNotFound) {
				return nil, fmt.Errorf("migrate status: %w", err)
			}
			if res != nil {
				m.Applied = true
				if !res.Timestamp.IsZero() {
					m.AppliedAt = res.Timestamp.UTC().Format("2006-01-02T15:04:05Z")
				}
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// ensureCurrent migrates a database that is not migrated or behind, and says
// whether it was. Two processes may race here; the loser's error is forgiven
// when the schema is current afterwards.
func ensureCurrent(ctx context.Context, d drivers.Driver, db *sql.DB) (bool, error) {
	st, err := Read(ctx, d, db)
	if err != nil {
		return false, err
	}
	if st.Current >= st.Target {
		return false, nil
	}
	if _, err := Up(ctx, d, db); err != nil {
		if st2, err2 := Read(ctx, d, db); err2 == nil && st2.Current == st2.Target {
			return true, nil
		}
		return false, err
	}
	return true, nil
}
