package drivers

import (
	"context"
	"fmt"
	"github.com/loanq/loanq/drivers/engineio"
)

// PoolLocker is implemented by a driver whose database cannot lock the
// first k rows of a query in one statement (Oracle: a row limit cannot go
// with FOR UPDATE): its capabilities say pool claim procedure, and its
// Statements leave PoolClaim empty.
type PoolLocker interface {
	// PoolClaimSQL is what ClaimPool sends, for `loanq sql` and the golden
	// tests.
	PoolClaimSQL() string
	// LockPool locks up to limit fresh candidates of the task's pool in
	// order inside tx, passing over those other transactions hold, and
	// returns their keys in order.
	LockPool(ctx context.Context, tx Querier, taskID, ttlMS int64, limit int) ([]string, error)
}

// ClaimPool locks up to limit fresh candidates of a task's pool in order,
// passing over those other claimers hold (docs/algorithm.md, "The candidate
// pool"). The locks last until tx ends.
func ClaimPool(ctx context.Context, d Driver, tx Querier, taskID, ttlMS int64, limit int) ([]string, error) {
	if d.Capabilities().PoolClaim == PoolClaimProcedure {
		p, ok := d.(PoolLocker)
		if !ok {
			return nil, fmt.Errorf("claiming pool candidates: the %s driver claims through a procedure but is no drivers.PoolLocker", d.Name())
		}
		return p.LockPool(ctx, tx, taskID, ttlMS, limit)
	}
	ids, err := engineio.LoanIDs(d.Statements().PoolClaim.All(ctx, tx, engineio.PoolClaimParams{TaskID: taskID, TTLMS: ttlMS, Limit: limit}))
	if err != nil {
		return nil, fmt.Errorf("claiming pool candidates: %w", err)
	}
	return ids, nil
}
