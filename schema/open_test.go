package schema_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/testkit/testdb"
	"github.com/loanq/loanq/problem"
	"github.com/loanq/loanq/schema"
)

// A file database the user named must exist; without MustExist it is created.
func TestOpenMustExist(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "missing.db")
	_, err := schema.Open(ctx, "sqlite:"+path, schema.Options{MustExist: true})
	if problem.KindOf(err) != problem.Usage || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("MustExist on a missing file: %v, want bad input saying it does not exist", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the refused file was created (%v)", err)
	}
	db, err := schema.Open(ctx, "sqlite:"+path, schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := schema.Open(ctx, "sqlite:"+path, schema.Options{MustExist: true}); err != nil {
		t.Fatalf("MustExist on an existing file: %v", err)
	}
}

// Check refuses a database without loanq's schema; IfSelfMigrating migrates
// only the drivers that say so (SQLite); Always migrates any, and says so.
func TestOpenMigrateAndCheck(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		if _, err := schema.Open(ctx, dsn, schema.Options{Check: true}); problem.KindOf(err) != problem.Usage || !strings.Contains(err.Error(), "no loanq schema") {
			t.Fatalf("Check on an empty database: %v, want bad input", err)
		}
		d, _, err := drivers.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		selfMigrating := d.MigratesOnOpen()
		db, err := schema.Open(ctx, dsn, schema.Options{Migrate: schema.IfSelfMigrating, Check: true})
		switch {
		case selfMigrating && (err != nil || !db.Migrated):
			t.Fatalf("IfSelfMigrating on SQLite: migrated %v, %v", db != nil && db.Migrated, err)
		case !selfMigrating && err == nil:
			t.Fatalf("IfSelfMigrating on a server database migrated it")
		}
		if db != nil {
			db.Close()
		}
		db, err = schema.Open(ctx, dsn, schema.Options{Migrate: schema.Always, Check: true, Conns: 3})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if db.Migrated == selfMigrating {
			t.Errorf("Always: Migrated %v on a database that was migrated %v before", db.Migrated, selfMigrating)
		}
		if got := db.Stats().MaxOpenConnections; got != 3 {
			t.Errorf("Conns 3: pool of %d", got)
		}
	})
}
