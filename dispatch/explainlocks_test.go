package dispatch_test

import (
	"context"
	"testing"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/testkit/testdb"
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
		x, err := f.e.Explain(ctx, "probed", 5)
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
		if x, err = f.e.Explain(ctx, "probed", 5); err != nil {
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
