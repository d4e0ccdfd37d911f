package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/postgres"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// The hold limit is SET LOCAL on the lock transaction, enforced by the
// server (an idle transaction past the limit loses its session), and gone
// with the transaction; the connection also asks the server for TCP
// keepalives.
func TestHoldLimitSession(t *testing.T) {
	ctx := context.Background()
	_, dsn, err := drivers.ParseDSN(testdb.Fresh(t, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	d := &postgres.Driver{}
	db, err := d.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	show := func(q drivers.Querier, name string) string {
		t.Helper()
		var v string
		if err := q.QueryRowContext(ctx, "SELECT current_setting('"+name+"')").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if got := show(db, "tcp_keepalives_idle"); got != "30" {
		t.Errorf("server-side tcp_keepalives_idle %q, want 30", got)
	}
	idle0, stmt0 := show(db, "idle_in_transaction_session_timeout"), show(db, "statement_timeout")
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if set, err := drivers.LimitHold(ctx, d, tx, 2500*time.Millisecond, 7*time.Second); err != nil || !set {
		t.Fatalf("LimitHold: set=%v %v", set, err)
	}
	if idle, stmt := show(tx, "idle_in_transaction_session_timeout"), show(tx, "statement_timeout"); idle != "2500ms" || stmt != "7s" {
		t.Fatalf("inside the lock transaction: idle %s, statement %s; want 2500ms and 7s", idle, stmt)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if idle, stmt := show(db, "idle_in_transaction_session_timeout"), show(db, "statement_timeout"); idle != idle0 || stmt != stmt0 {
		t.Fatalf("the session kept the hold limit after its transaction: %s, %s", idle, stmt)
	}

	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := drivers.LimitHold(ctx, d, tx, time.Second, time.Minute); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond)
	var one int
	if err := tx.QueryRowContext(ctx, "SELECT 1").Scan(&one); err == nil {
		t.Fatal("a transaction idle past its hold limit still ran a statement: the server did not end its session")
	}
}
