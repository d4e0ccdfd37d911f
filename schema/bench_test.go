package schema_test

import (
	"context"
	"testing"

	"github.com/loanq/loanq/internal/testkit/testdb"
	"github.com/loanq/loanq/schema"
)

// benchOut is the migration that took the bench's objects out of the schema.
const benchOut = 14

// `migrate up` leaves no bench object in a production schema: a new
// database gets loanq's own tables only, and a database migrated before
// 00014 (which still holds loanq_bench_item and, on PostgreSQL, 00007's
// index) loses them. Down of 00014 recreates nothing, and up again is fine
// on a schema without them.
func TestMigrateUpLeavesNoBenchObject(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		d, db := testdb.Open(t, dsn)
		p, err := schema.NewProvider(d, db)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.UpTo(ctx, benchOut-1); err != nil {
			t.Fatalf("migrate up to %d: %v", benchOut-1, err)
		}
		if n := testdb.Objects(t, d, db, "loanq_bench"); n == 0 {
			t.Fatalf("a schema migrated before %05d holds no bench object: this test no longer tests the upgrade", benchOut)
		}
		if _, err := schema.Up(ctx, d, db); err != nil {
			t.Fatal(err)
		}
		if n := testdb.Objects(t, d, db, "loanq_bench"); n != 0 {
			t.Errorf("after migrate up of an existing schema: %d bench objects, want none", n)
		}
		v, err := schema.Down(ctx, d, db)
		if err != nil {
			t.Fatal(err)
		}
		if v == benchOut {
			if n := testdb.Objects(t, d, db, "loanq_bench"); n != 0 {
				t.Errorf("migrate down of %05d recreated %d bench objects, want none", benchOut, n)
			}
		}
		if _, err := schema.Up(ctx, d, db); err != nil {
			t.Fatalf("migrate up after down: %v", err)
		}
		if n := testdb.Objects(t, d, db, "loanq_bench"); n != 0 {
			t.Errorf("after down and up: %d bench objects, want none", n)
		}
	})
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, db := testdb.Migrated(t, dsn)
		if n := testdb.Objects(t, d, db, "loanq_bench"); n != 0 {
			t.Errorf("after migrate up of a new database: %d bench objects, want none", n)
		}
	})
}
