package schema_test

import (
	"context"
	"io/fs"
	"testing"
	"testing/fstest"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/testkit/testdb"
	"github.com/loanq/loanq/schema"
)

// migrationsFS swaps a driver's migrations for a test's own.
type migrationsFS struct {
	drivers.Driver
	schema.MigrationStorer
	files fs.FS
}

func (m migrationsFS) Migrations() fs.FS { return m.files }

// A migration chosen as a deadlock victim by a transaction of the running
// fleet is run again where DDL is transactional (PostgreSQL): `migrate up`
// ends with every migration applied, not with "deadlock detected".
func TestUpRunsADeadlockVictimAgain(t *testing.T) {
	dsn := testdb.Fresh(t, "postgres")
	d, db := testdb.Open(t, dsn)
	if d.Capabilities().DDL != drivers.DDLTransactional {
		t.Fatalf("%s: DDL %q, want transactional", d.Name(), d.Capabilities().DDL)
	}
	files := fstest.MapFS{
		"00001_tables.sql": {Data: []byte("-- +goose Up\nCREATE TABLE dl_a (v int);\nCREATE TABLE dl_b (v int);\nINSERT INTO dl_a VALUES (0);\nINSERT INTO dl_b VALUES (0);\n-- +goose Down\nDROP TABLE dl_a;\nDROP TABLE dl_b;\n")},
	}
	m := migrationsFS{Driver: d, MigrationStorer: d.(schema.MigrationStorer), files: files}
	ctx := context.Background()
	if _, err := schema.Up(ctx, m, db); err != nil {
		t.Fatal(err)
	}
	// Migration 2 takes dl_a's row, then dl_b's. The fleet's transaction
	// holds dl_b's first and asks for dl_a's once migration 2 waits: a
	// cycle. The fleet's deadlock_timeout is long, so PostgreSQL's check
	// runs in the migration's backend first and ends the migration.
	files["00002_both.sql"] = &fstest.MapFile{Data: []byte("-- +goose Up\nUPDATE dl_a SET v = 2;\nUPDATE dl_b SET v = 2;\nALTER TABLE dl_b ADD COLUMN w int;\n-- +goose Down\nALTER TABLE dl_b DROP COLUMN w;\n")}
	fleet, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fleet.Rollback()
	for _, q := range []string{"SET LOCAL deadlock_timeout = '30s'", "UPDATE dl_b SET v = 1"} {
		if _, err := fleet.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	type upResult struct {
		applied []int64
		err     error
	}
	done := make(chan upResult, 1)
	go func() {
		applied, err := schema.Up(ctx, m, db)
		done <- upResult{applied, err}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !testdb.StatementWaitsForLock(t, d, db, "UPDATE dl_b SET v = 2") {
		if time.Now().After(deadline) {
			t.Fatal("migration 2 never waited for the fleet's row")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := fleet.ExecContext(ctx, "UPDATE dl_a SET v = 1"); err != nil {
		t.Fatalf("the fleet's transaction was the victim, not the migration: %v", err)
	}
	if err := fleet.Commit(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("migrate up after a deadlock: %v", r.err)
	}
	if len(r.applied) != 1 || r.applied[0] != 2 {
		t.Fatalf("applied %v, want [2]", r.applied)
	}
	if got := testdb.Int(t, d, db, "SELECT v FROM dl_b"); got != 2 {
		t.Fatalf("dl_b.v = %d after the rerun, want 2 (the migration ran after the fleet's commit)", got)
	}
}
