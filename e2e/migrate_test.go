package e2e

import (
	"github.com/loanq/loanq/schema"

	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/loanq/loanq/internal/testkit/testdb"
)

type migrateStatus struct {
	Dialect    string `json:"dialect"`
	Version    int64  `json:"version"`
	Target     int64  `json:"target"`
	Migrations []struct {
		Version int64 `json:"version"`
		Applied bool  `json:"applied"`
	} `json:"migrations"`
}

func status(t *testing.T, dsn string) migrateStatus {
	t.Helper()
	r := mustOK(t, dsn, "admin", "--output", "json", "migrate", "status")
	var s migrateStatus
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("migrate status JSON: %v\n%s", err, r.stdout)
	}
	return s
}

// migrate up, status and down through the binary on every database; a second
// up changes nothing; a database that is not migrated, or migrated by a newer
// loanq, is refused by every other command with the way out.
func TestMigrateLifecycle(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		sqlite := strings.HasPrefix(dsn, "sqlite:")
		if sqlite {
			// An explicitly named SQLite file that does not exist is not
			// created by status (a mistyped path is not an empty queue);
			// an empty file is an empty database.
			r := loanq(t, dsn, "admin", "migrate", "status")
			if r.code != 2 || !strings.Contains(r.stderr, "does not exist") || !strings.Contains(r.stderr, "migrate up") {
				t.Fatalf("migrate status of a missing SQLite file: exit %d %s", r.code, r.stderr)
			}
			if err := os.WriteFile(strings.TrimPrefix(dsn, "sqlite:"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if s := status(t, dsn); s.Version != 0 || s.Target < 1 || len(s.Migrations) == 0 || s.Migrations[0].Applied {
			t.Fatalf("status of an empty database: %+v", s)
		}
		if !sqlite {
			// Only the embedded default migrates itself.
			r := loanq(t, dsn, "admin", "task", "list")
			if r.code != 2 || !strings.Contains(r.stderr, "loanq migrate up") {
				t.Fatalf("task list on an unmigrated database: exit %d %s", r.code, r.stderr)
			}
		}
		mustOK(t, dsn, "admin", "migrate", "up")
		d, db := testdb.Open(t, dsn)
		s := status(t, dsn)
		if s.Version != s.Target || !s.Migrations[len(s.Migrations)-1].Applied {
			t.Fatalf("status after up: %+v", s)
		}
		before := snapshot(t, db)
		r := mustOK(t, dsn, "admin", "migrate", "up")
		if !strings.Contains(r.stdout, "nothing to do") {
			t.Errorf("second up: %s", r.stdout)
		}
		if after := snapshot(t, db); after != before {
			t.Fatalf("a second `migrate up` changed the database:\n%s\n%s", before, after)
		}
		mustOK(t, dsn, "admin", "task", "list")

		// A newer loanq migrated this database: this binary must not touch it.
		testdb.Exec(t, d, db, "INSERT INTO loanq_schema_version (version_id, is_applied) VALUES (99, TRUE)")
		for _, args := range [][]string{{"task", "list"}, {"work", "get", "t"}, {"pipeline"}, {"migrate", "up"}, {"migrate", "down"}} {
			r := loanq(t, dsn, "admin", args...)
			if r.code != 2 || !strings.Contains(r.stderr, "99") {
				t.Errorf("%v on a schema newer than the binary: exit %d %s", args, r.code, r.stderr)
			}
		}
		testdb.Exec(t, d, db, "DELETE FROM loanq_schema_version WHERE version_id = 99")

		// down rolls back one migration at a time, newest first (version
		// numbers may have gaps: each helper of a round owns its own).
		for i := len(s.Migrations) - 1; i >= 0; i-- {
			want := int64(0)
			if i > 0 {
				want = s.Migrations[i-1].Version
			}
			mustOK(t, dsn, "admin", "migrate", "down")
			if after := status(t, dsn); after.Version != want {
				t.Fatalf("status after a down from %d: %+v", s.Migrations[i].Version, after)
			}
		}
		if r := mustOK(t, dsn, "admin", "migrate", "down"); !strings.Contains(r.stdout, "nothing to roll back") {
			t.Errorf("down on an empty schema: %s", r.stdout)
		}
		for _, table := range []string{"loanq_task", "loanq_work_request", "loanq_work", "loanq_query_run"} {
			if _, err := db.Exec("SELECT COUNT(*) FROM " + table); err == nil {
				t.Errorf("%s still exists after migrate down", table)
			}
		}
		mustOK(t, dsn, "admin", "migrate", "up")
	})
}

// The schema check every command runs first, and `migrate status`, are
// read-only: on a database loanq never migrated they create nothing, not even
// goose's version table (goose's own GetDBVersion and Status would).
func TestSchemaCheckCreatesNothing(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, db := testdb.Open(t, dsn)
		versionTable := func() bool {
			_, err := db.Exec("SELECT COUNT(*) FROM loanq_schema_version")
			return err == nil
		}
		if versionTable() {
			t.Fatal("a fresh database already has loanq_schema_version")
		}
		if s := status(t, dsn); s.Version != 0 || len(s.Migrations) == 0 || s.Migrations[0].Applied {
			t.Fatalf("status of an empty database: %+v", s)
		}
		if !strings.HasPrefix(dsn, "sqlite:") { // only the embedded default migrates itself
			for _, args := range [][]string{{"task", "list"}, {"work", "get", "t"}, {"pipeline"}} {
				if r := loanq(t, dsn, "admin", args...); r.code != 2 || !strings.Contains(r.stderr, "no loanq schema") {
					t.Errorf("%v on an unmigrated database: exit %d %s", args, r.code, r.stderr)
				}
			}
		}
		if versionTable() {
			t.Fatalf("a read-only command created loanq_schema_version on %s", d.Name())
		}
	})
}

// goose creates its version table and then inserts a version-0 row; where DDL
// commits on its own (MySQL/MariaDB, Oracle) a failure or a concurrent first
// run can leave the table without that row. It reads as version 0 and
// `migrate up` applies everything, instead of "missing zero version".
func TestEmptyVersionTable(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, db := testdb.Open(t, dsn)
		store, err := d.(schema.MigrationStorer).MigrationStore("loanq_schema_version")
		if err != nil {
			t.Fatal(err)
		}
		if err := store.CreateVersionTable(context.Background(), db); err != nil {
			t.Fatal(err)
		}
		if n := testdb.Int(t, d, db, "SELECT COUNT(*) FROM loanq_schema_version"); n != 0 {
			t.Fatalf("version table holds %d rows, want none", n)
		}
		if s := status(t, dsn); s.Version != 0 || s.Migrations[0].Applied {
			t.Fatalf("status with an empty version table: %+v", s)
		}
		if !strings.HasPrefix(dsn, "sqlite:") {
			if r := loanq(t, dsn, "admin", "task", "list"); r.code != 2 || !strings.Contains(r.stderr, "loanq migrate up") {
				t.Fatalf("task list with an empty version table: exit %d %s", r.code, r.stderr)
			}
		}
		mustOK(t, dsn, "admin", "migrate", "up")
		if s := status(t, dsn); s.Version != s.Target || !s.Migrations[len(s.Migrations)-1].Applied {
			t.Fatalf("status after up: %+v", s)
		}
		mustOK(t, dsn, "admin", "task", "list")
	})
}
