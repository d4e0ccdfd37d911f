package oracle

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/loanq/loanq/migrations"
	"github.com/loanq/loanq/schema"
)

func newTestStore(t *testing.T) *Store {
	t.Helper()
	s, err := NewStore(migrations.VersionTable)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The version-table check looks in the session's current schema, not in the
// login user's own (user_tables): a processor account whose sessions set
// CURRENT_SCHEMA to the owner must find the owner's table.
func TestStoreTableExistsLooksInCurrentSchema(t *testing.T) {
	got := newTestStore(t).SQL().TableExists
	want := "SELECT COUNT(*) FROM all_tables\n" +
		"WHERE owner = SYS_CONTEXT('USERENV', 'CURRENT_SCHEMA') AND table_name = :1"
	if got != want {
		t.Errorf("TableExists is\n%s\nwant\n%s", got, want)
	}
}

// The DSN form docs/oracle.md gives a processor account reaches godror as an
// ALTER SESSION of every new session.
func TestCurrentSchemaThroughDSN(t *testing.T) {
	d := mustDSN(t, "oracle://loanq_app:pw@db.example:1521/XEPDB1?alterSession=CURRENT_SCHEMA%3DLOANQ_OWNER")
	P, err := ConnectParams(d)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, kv := range P.AlterSession {
		if kv == [2]string{"CURRENT_SCHEMA", "LOANQ_OWNER"} {
			found = true
		}
	}
	if !found {
		t.Errorf("alter session %v does not set CURRENT_SCHEMA=LOANQ_OWNER", P.AlterSession)
	}
}

// The schema check that every command runs first (schema.Read, Check, and
// `migrate status`) sends only the store's own read statements and creates
// nothing on a schema without loanq's version table.
func TestSchemaCheckCreatesNothing(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t)
	rec := newRecorder(st.SQL())
	db := rec.DB()
	defer db.Close()

	state, err := schema.Read(ctx, &Driver{}, db)
	if err != nil || state.Current != 0 || state.Target < 2 {
		t.Fatalf("Read of an empty schema: %+v, %v", state, err)
	}
	if err := schema.Check(ctx, &Driver{}, db, "oracle://x"); err == nil || !strings.Contains(err.Error(), "no loanq schema") {
		t.Fatalf("Check of an empty schema: %v", err)
	}
	ms, err := schema.Status(ctx, &Driver{}, db)
	if err != nil || len(ms) < 2 || ms[0].Applied {
		t.Fatalf("Status of an empty schema: %+v, %v", ms, err)
	}
	calls := rec.take()
	for _, c := range calls {
		if c.Note != "" || (c.SQL != st.SQL().TableExists && c.SQL != st.SQL().GetLatestVersion) {
			t.Errorf("a read-only check sent %q %s", c.Note, c.SQL)
		}
	}
	if len(calls) != 6 || rec.created {
		t.Errorf("sent %d statements (want 3 × table check + latest version), created %v:\n%s", len(calls), rec.created, script("", calls))
	}
}

// Oracle commits CREATE TABLE on its own, so goose's create and its insert of
// the version-0 row are not atomic: a failed insert or a concurrent first run
// leaves the table without rows. Such a table reads as version 0, and
// `migrate up` applies every migration into it.
func TestEmptyVersionTableIsVersionZero(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t)
	rec := newRecorder(st.SQL())
	rec.created = true // the table exists, its version-0 row does not
	db := rec.DB()
	defer db.Close()

	state, err := schema.Read(ctx, &Driver{}, db)
	if err != nil || state.Current != 0 {
		t.Fatalf("Read of an empty version table: %+v, %v (want version 0)", state, err)
	}
	if err := schema.Check(ctx, &Driver{}, db, "oracle://x"); err == nil || !strings.Contains(err.Error(), "no loanq schema") {
		t.Fatalf("Check of an empty version table: %v", err)
	}
	rec.take()
	applied, err := schema.Up(ctx, &Driver{}, db)
	if want := migrationVersions(t, &Driver{}); err != nil || fmt.Sprint(applied) != fmt.Sprint(want) {
		t.Fatalf("migrate up into an empty version table: applied %v, %v; want %v", applied, err, want)
	}
	for _, c := range rec.take() {
		if c.SQL == st.SQL().CreateVersionTable {
			t.Errorf("migrate up created the version table again")
		}
		if c.SQL == st.SQL().Insert && c.Args[0] == int64(0) {
			t.Errorf("migrate up inserted a version-0 row")
		}
	}
	versions := migrationVersions(t, &Driver{})
	if fmt.Sprint(rec.applied) != fmt.Sprint(versions) {
		t.Errorf("version table holds %v, want %v", rec.applied, versions)
	}
	// Down to nothing, then down again: nothing to roll back, no error.
	var downs []int64
	for i := len(versions) - 1; i >= 0; i-- {
		downs = append(downs, versions[i])
	}
	for _, want := range append(downs, 0) {
		v, err := schema.Down(ctx, &Driver{}, db)
		if err != nil || v != want {
			t.Fatalf("migrate down: %d, %v; want %d", v, err, want)
		}
	}
}

// goose's own table: the latest applied row is found by time, then id (the
// identity column is NOORDER on RAC); task show's latest runs likewise.
func TestOracleOrdersByTimeThenID(t *testing.T) {
	s := newTestStore(t).SQL()
	for name, q := range map[string]string{"GetMigration": s.GetMigration, "ListMigrations": s.ListMigrations} {
		if !strings.Contains(q, "ORDER BY tstamp DESC, id DESC") {
			t.Errorf("store %s:\n%s", name, q)
		}
	}
	if q := (&Driver{}).Statements().TaskRuns.Text(); !strings.Contains(q, "ORDER BY started_at DESC, id DESC\nFETCH FIRST 10 ROWS ONLY") {
		t.Errorf("TaskRuns:\n%s", q)
	}
}
