package bench

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
)

// locksPerClaim measures how many items one claim of batch items locks with
// strategy s, as `loanq explain` measures a task's claim: it claims once in
// a transaction it rolls back, while a second session counts the ready items
// it can still lock (the skip claim, SKIP LOCKED, asking for all of them).
// Locked = ready − still lockable. A claim that locks far more than it
// returns is why a strategy serialises: the other workers find nothing to
// take. It returns -1 where the database has no row locks (SQLite: one
// writer at a time). The table must be freshly filled: nothing else holds
// locks on it.
func locksPerClaim(ctx context.Context, d drivers.Driver, db *sql.DB, c *Catalogue, s drivers.Strategy, batch int) (int, error) {
	if _, ok := d.(drivers.RowLocker); !ok {
		return -1, nil
	}
	fail := func(err error) (int, error) {
		return 0, fmt.Errorf("measuring the rows one %s claim locks: %w", s, err)
	}
	left, err := c.Ready.One(ctx, db, engineio.NoParams{})
	if err != nil {
		return fail(err)
	}
	ready := int(left.N)
	a, err := db.BeginTx(ctx, nil) // as the workers' claims (worker.go)
	if err != nil {
		return fail(err)
	}
	defer a.Rollback() // changes nothing
	if _, err := claimItems(ctx, &c.Statements, a, s, "bench-probe", 60_000, batch); err != nil {
		return fail(err)
	}
	b, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fail(err)
	}
	defer b.Rollback()
	free, err := claimItems(ctx, &c.Statements, b, drivers.Skip, "bench-probe-b", 60_000, ready)
	if err != nil {
		return fail(err)
	}
	return max(0, ready-len(free)), nil
}
