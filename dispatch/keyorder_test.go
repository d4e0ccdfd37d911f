package dispatch_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// An integer key named in --order sorts as a number, under every strategy and
// with a pool: loanq reads the key as text (its loan ids are text), and on
// PostgreSQL the text expression's output column takes the key column's name,
// which an unqualified ORDER BY name would then mean (10 before 9).
func TestIntegerKeyInOrderSortsAsNumber(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		f := setup(t, dsn, 12)
		ctx := context.Background()
		// One priority for all: the key decides the order (the loan index
		// (eligible, priority, id) serves it, as rows tasks need).
		testdb.Exec(t, f.d, f.db, "UPDATE loan SET priority = 0")
		type variant struct {
			name     string
			lock     drivers.Strategy
			prefetch int
		}
		var variants []variant
		for _, lock := range f.d.Capabilities().Strategies {
			variants = append(variants, variant{name: "by-id-" + string(lock), lock: lock})
		}
		variants = append(variants, variant{name: "by-id-pool", prefetch: 20})
		for _, v := range variants {
			f.task(t, dispatch.TaskSpec{Name: v.name, Order: "priority, id", Lock: v.lock, Prefetch: v.prefetch})
			var got []string
			for i := 0; i < 12; i++ {
				r, err := f.e.Get(ctx, v.name, "ana", 1, fast)
				if err != nil || len(r.Loans) != 1 {
					t.Fatalf("%s: get %d: %+v %v", v.name, i+1, r, err)
				}
				got = append(got, r.Loans[0].String())
			}
			if want := "[1 2 3 4 5 6 7 8 9 10 11 12]"; fmt.Sprint(got) != want {
				t.Errorf("%s: loans handed out as %v, want %s (the order's id as a number)", v.name, got, want)
			}
		}
	})
}
