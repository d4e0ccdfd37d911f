package bench

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/loanq/loanq/internal/testkit/testdb"
)

// A batch finish (DoneMany, LeaseDoneMany: one statement for a claim's or a
// get's items) locks the items it names and no others. On MariaDB an
// UPDATE whose WHERE is an IN over JSON_TABLE runs as a dependent subquery
// over every row of the table, and InnoDB locks each row it scans: 128
// engine-bench callers finishing 50 items each then waited on one another
// until InnoDB's lock-wait timeout. Here one session holds item 1; another
// finishes items 2-50 and must not wait for it.
func TestBatchFinishLocksOnlyItsItems(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		d, db := testdb.Migrated(t, dsn)
		if d.Name() == "sqlite" {
			t.Skip("SQLite has one writer at a time: no row locks to stay out of")
		}
		c, err := For(d)
		if err != nil {
			t.Fatal(err)
		}
		drop, err := createTables(ctx, db, c)
		if err != nil {
			t.Fatal(err)
		}
		defer drop()
		if err := fill(ctx, db, c, 100); err != nil {
			t.Fatal(err)
		}
		holder, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Rollback()
		if _, err := holder.ExecContext(ctx, "SELECT id FROM loanq_bench_item WHERE id = 1 FOR UPDATE"); err != nil {
			t.Fatal(err)
		}

		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		bound := "SET lock_timeout = '2s'"
		if d.Name() == "mysql" {
			bound = "SET SESSION innodb_lock_wait_timeout = 2"
		}
		if _, err := conn.ExecContext(ctx, bound); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for id := 2; id <= 50; id++ {
			ids = append(ids, strconv.Itoa(id))
		}
		list := "[" + strings.Join(ids, ",") + "]"
		res, err := c.DoneMany.Exec(ctx, conn, itemsParams{IDs: list, Owner: "w"})
		if err != nil {
			t.Fatalf("finishing items 2-50 beside a holder of item 1: %v", err)
		}
		if n, _ := res.RowsAffected(); n != 49 {
			t.Errorf("DoneMany finished %d items, want 49", n)
		}
		// None of them is leased to w: nothing to finish, and nothing to
		// wait for either.
		if _, err := c.LeaseDoneMany.Exec(ctx, conn, itemsParams{IDs: list, Owner: "w"}); err != nil {
			t.Fatalf("finishing leased items 2-50 beside a holder of item 1: %v", err)
		}
	})
}
