// Package schema applies loanq's embedded migrations (goose) and checks, before
// any other command runs, that the database's schema is the one this binary
// was built for.
package schema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/pressly/goose/v3"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/migrations"
	"github.com/loanq/loanq/problem"
)

// NewProvider returns a goose provider for the driver's migration folder, with
// the version table named loanq_schema_version so that loanq keeps to its own
// tables in a shared schema.
func NewProvider(d drivers.Driver, db *sql.DB) (*goose.Provider, error) {
	store, err := d.MigrationStore(migrations.VersionTable)
	if err != nil {
		return nil, fmt.Errorf("migration store for %s: %w", d.Name(), err)
	}
	return goose.NewProvider(goose.DialectCustom, db, d.Migrations(),
		goose.WithStore(store), goose.WithDisableGlobalRegistry(true))
}

// State is where a database's schema stands relative to this binary.
type State struct {
	Current int64 // highest applied version, 0 when never migrated
	Target  int64 // highest version embedded in this binary
}

// Read returns the schema state without changing anything.
func Read(ctx context.Context, d drivers.Driver, db *sql.DB) (State, error) {
	p, err := NewProvider(d, db)
	if err != nil {
		return State{}, err
	}
	target := int64(0)
	for _, s := range p.ListSources() {
		if s.Version > target {
			target = s.Version
		}
	}
	cur, err := p.GetDBVersion(ctx)
	if err != nil {
		// goose creates nothing on GetDBVersion; a missing version table reads
		// as "never migrated" on some dialects and as an error on others.
		if errors.Is(err, goose.ErrNoCurrentVersion) || !tableExists(ctx, d, db) {
			return State{Current: 0, Target: target}, nil
		}
		return State{}, fmt.Errorf("reading the schema version: %w", err)
	}
	return State{Current: cur, Target: target}, nil
}

func tableExists(ctx context.Context, d drivers.Driver, db *sql.DB) bool {
	var one int
	// A plain query against the version table works the same on every dialect.
	err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+migrations.VersionTable).Scan(&one)
	return err == nil
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
	res, err := p.Up(ctx)
	var applied []int64
	for _, r := range res {
		if r != nil && r.Source != nil && r.Error == nil {
			applied = append(applied, r.Source.Version)
		}
	}
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

// Status lists every embedded migration and whether it is applied.
func Status(ctx context.Context, d drivers.Driver, db *sql.DB) ([]Migration, error) {
	p, err := NewProvider(d, db)
	if err != nil {
		return nil, err
	}
	sts, err := p.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate status: %w", err)
	}
	out := make([]Migration, 0, len(sts))
	for _, s := range sts {
		m := Migration{Version: s.Source.Version, Name: baseName(s.Source.Path), Applied: s.State == goose.StateApplied}
		if m.Applied && !s.AppliedAt.IsZero() {
			m.AppliedAt = s.AppliedAt.UTC().Format("2006-01-02T15:04:05Z")
		}
		out = append(out, m)
	}
	return out, nil
}

func baseName(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[i+1:]
		}
	}
	return p
}

// EnsureCurrent migrates a database that is not migrated or behind (used for
// the embedded SQLite default, so a newcomer needs no extra step). Two
// processes may race here; the loser's error is forgiven when the schema is
// current afterwards.
func EnsureCurrent(ctx context.Context, d drivers.Driver, db *sql.DB) error {
	st, err := Read(ctx, d, db)
	if err != nil {
		return err
	}
	if st.Current >= st.Target {
		return nil
	}
	if _, err := Up(ctx, d, db); err != nil {
		if st2, err2 := Read(ctx, d, db); err2 == nil && st2.Current == st2.Target {
			return nil
		}
		return err
	}
	return nil
}
