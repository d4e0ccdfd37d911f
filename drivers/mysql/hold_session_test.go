package mysql_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/mysql"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// The hold limit is set on the lock transaction's session, enforced by the
// server (an idle transaction past the limit loses its session), and gone
// from the pooled connection once the transaction has ended.
func TestHoldLimitSession(t *testing.T) {
	ctx := context.Background()
	d, db := openFresh(t)
	db.SetMaxOpenConns(1) // one session: what the pool hands out next is the one the limit was set on
	vars := func(q drivers.Querier) (idle int64, stmt float64) {
		t.Helper()
		if err := q.QueryRowContext(ctx, "SELECT @@session.idle_transaction_timeout, @@session.max_statement_time").Scan(&idle, &stmt); err != nil {
			t.Fatal(err)
		}
		return idle, stmt
	}
	idle0, stmt0 := vars(db)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if set, err := drivers.LimitHold(ctx, d, tx, 2500*time.Millisecond, 7*time.Second); err != nil || !set {
		t.Fatalf("LimitHold: set=%v %v", set, err)
	}
	if idle, stmt := vars(tx); idle != 3 || stmt != 7 {
		t.Fatalf("inside the lock transaction: idle_transaction_timeout %d, max_statement_time %g; want 3 and 7", idle, stmt)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if idle, stmt := vars(db); idle != idle0 || stmt != stmt0 {
		t.Fatalf("the pooled session kept the hold limit: %d, %g (defaults %d, %g)", idle, stmt, idle0, stmt0)
	}

	// Enforcement: a transaction left idle past its limit loses its session.
	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := drivers.LimitHold(ctx, d, tx, time.Second, time.Minute); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	var one int
	if err := tx.QueryRowContext(ctx, "SELECT 1").Scan(&one); err == nil {
		t.Fatal("a transaction idle past its hold limit still ran a statement: the server did not end its session")
	}
	tx.Rollback()
	if idle, stmt := vars(db); idle != idle0 || stmt != stmt0 {
		t.Fatalf("the next session carries the hold limit: %d, %g", idle, stmt)
	}
}

// openFresh opens a fresh test database through the driver itself (not the
// engine), closed when the test ends.
func openFresh(t *testing.T) (*mysql.Driver, *sql.DB) {
	t.Helper()
	_, dsn, err := drivers.ParseDSN(testdb.Fresh(t, "mysql"))
	if err != nil {
		t.Fatal(err)
	}
	d := &mysql.Driver{}
	db, err := d.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return d, db
}
