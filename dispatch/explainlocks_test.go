package dispatch_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/testkit/testdb"
	"github.com/loanq/loanq/loankey"
)

// `loanq explain` on MySQL/MariaDB reads InnoDB's count of the record locks
// the probe's claim holds. With nothing in work, a rows claim of 5 holds
// about two records per row (the index entry and the row). With 40 loans in
// work ahead of its picks, MariaDB keeps those locked too (docs/mysql.md, "A
// rows claim keeps the locks of the rows it passes over"): the count shows
// it, while the second session's count of eligible rows cannot.
func TestExplainCountsTheRecordsAClaimHolds(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 100)
		if !drivers.Supports(f.d, drivers.Rows) {
			t.Skipf("%s has no rows strategy", f.d.Name())
		}
		ctx := context.Background()
		f.task(t, dispatch.TaskSpec{Name: "probed", Lock: drivers.Rows})
		// Through FreshInnoDBTrx, as every read of innodb_trx in the tests:
		// one reading it less than 0.1 s before would keep it stale.
		explain := func() (x *dispatch.Explanation, err error) {
			testdb.FreshInnoDBTrx(func() { x, err = f.e.Explain(ctx, "probed", 5) })
			return x, err
		}
		x, err := explain()
		if err != nil {
			t.Fatal(err)
		}
		if f.d.Name() != "mysql" {
			if x.Probe.RecordsLockedMeasured {
				t.Errorf("%s: records locked measured (%d): only InnoDB counts them", f.d.Name(), x.Probe.RecordsLocked)
			}
			return
		}
		p := x.Probe
		if !p.RecordsLockedMeasured || p.Claimed != 5 || p.RecordsLocked < 5 || dispatch.PassedOverLocked(p) {
			t.Fatalf("nothing in work: claimed %d, records locked %d (measured %v), passed over %v; want 5, 5 to 20, not passed over",
				p.Claimed, p.RecordsLocked, p.RecordsLockedMeasured, dispatch.PassedOverLocked(p))
		}
		if _, err := f.e.Get(ctx, "probed", "busy", 40, fast); err != nil {
			t.Fatal(err)
		}
		if x, err = explain(); err != nil {
			t.Fatal(err)
		}
		p = x.Probe
		if p.RowsLocked != 5 || p.RecordsLocked < 2*40 || !dispatch.PassedOverLocked(p) {
			t.Fatalf("40 loans in work: eligible rows locked %d, records locked %d, passed over %v; want 5, at least 80 (the loans in work), true",
				p.RowsLocked, p.RecordsLocked, dispatch.PassedOverLocked(p))
		}
		t.Logf("mysql: a rows claim of 5 with 40 loans in work ahead holds %d record locks", p.RecordsLocked)
	})
}

// What a rows claim locks besides its picks, pinned per database
// (docs/mysql.md, "A rows claim keeps the locks of the rows it passes
// over"): with 40 loans in work ahead of its picks, a claim of 5 is held
// open while a second session tries one of those loans with NOWAIT, as the
// application updating a loan in work would. PostgreSQL locks only the rows
// the claim returns: the loan is free. MariaDB keeps the rows its WHERE
// turned away: the loan waits for the claim. Should a MariaDB release stop
// doing so, this test fails and the DBA page must be changed with it.
func TestRowsClaimAndTheLoansInWorkItPassesOver(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 100)
		rl, ok := f.d.(drivers.RowLocker)
		if !ok {
			t.Skipf("%s has no rows strategy", f.d.Name())
		}
		ctx := context.Background()
		task := f.task(t, dispatch.TaskSpec{Name: "passed", Lock: drivers.Rows})
		if _, err := f.e.Get(ctx, "passed", "busy", 40, fast); err != nil { // loans 1-40 in work
			t.Fatal(err)
		}
		claim, err := f.db.BeginTx(ctx, rl.RowsTxOptions())
		if err != nil {
			t.Fatal(err)
		}
		defer claim.Rollback()
		src := drivers.CriteriaSource{Source: "loan", Key: "id", Where: "eligible = 1", Order: "priority", Kind: loankey.Integer}
		picked, err := rl.LockRows(ctx, claim, src, task.ID, 5)
		if err != nil || fmt.Sprint(picked) != "[41 42 43 44 45]" {
			t.Fatalf("the claim locked %v (%v), want loans 41 to 45", picked, err)
		}
		app, err := f.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer app.Rollback()
		_, err = app.ExecContext(ctx, "SELECT id FROM loan WHERE id = 7 FOR UPDATE NOWAIT")
		switch f.d.Name() {
		case "postgres":
			if err != nil {
				t.Fatalf("PostgreSQL: loan 7, in work, passed over by the claim: %v; want it free", err)
			}
		case "mysql":
			if err == nil {
				t.Fatal("MariaDB: loan 7, in work, passed over by the claim, was free; docs/mysql.md says the claim keeps it locked: update the page")
			}
			if !f.d.IsLockBusy(err) {
				t.Fatalf("MariaDB: loan 7 with NOWAIT: %v; want a lock error (the claim holds it)", err)
			}
		}
	})
}
