package postgres_test

import (
	"context"
	"testing"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/drivers/postgres"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// A waiter's lock wait bound (WaitLockSet) lasts for its transaction only,
// and WaitLockRestore with no saved value (WaitLockSave is empty here) puts
// back the session's own lock_timeout inside the transaction, for the
// serving statements: here 7 s, a run-time parameter of the DSN, not the server
// default.
func TestWaitLockBoundIsTransactionLocal(t *testing.T) {
	ctx := context.Background()
	d := &postgres.Driver{}
	if !d.Statements().WaitLockSave.Empty() {
		t.Fatal("WaitLockSave is set: the wait's bound would be saved and restored around the transaction, which PostgreSQL does not need")
	}
	_, dsn, err := drivers.ParseDSN(testdb.Fresh(t, "postgres") + "&lock_timeout=7s")
	if err != nil {
		t.Fatal(err)
	}
	db, err := d.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	show := func(q drivers.Querier) string {
		t.Helper()
		var v string
		if err := q.QueryRowContext(ctx, "SELECT current_setting('lock_timeout')").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if got := show(db); got != "7s" {
		t.Fatalf("session lock_timeout %q, want 7s from the DSN", got)
	}
	st := d.Statements()
	for _, serve := range []bool{false, true} {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.WaitLockSet.Exec(ctx, tx, engineio.MillisParams{MS: 1500}); err != nil {
			t.Fatal(err)
		}
		if got := show(tx); got != "1500ms" {
			t.Fatalf("bounded wait: lock_timeout %q, want 1500ms", got)
		}
		if serve { // granted and still pending: the waiter serves
			if _, err := st.WaitLockRestore.Exec(ctx, tx, engineio.SettingParams{}); err != nil {
				t.Fatal(err)
			}
			if got := show(tx); got != "7s" {
				t.Fatalf("serving after the wait: lock_timeout %q, want the session's 7s", got)
			}
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if got := show(db); got != "7s" {
			t.Fatalf("after the waiter's transaction (serve=%v): lock_timeout %q, want the session's 7s", serve, got)
		}
	}
}
