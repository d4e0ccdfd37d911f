package bench

import (
	"context"
	"fmt"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
)

// claimItems claims up to k ready items of the bench table for owner with
// strategy st, using only the dialect's statements, and returns their ids.
//
// Row-lock strategies (skip, nowait, wait): q must be a transaction. The items
// stay locked until it ends; the caller finishes them with Done in the
// same transaction and commits (or rolls back, which puts them back). A
// lock-busy error (nowait) is returned as is: test it with Driver.IsLockBusy.
//
// Lease: q should be a transaction of its own that the caller commits at
// once (on SQLite an immediate one, which takes the write lock up front). The
// items are marked claimed by owner until now + ttlMillis; the caller finishes
// each with LeaseDone. No ids can mean another claimer raced for the
// same items: check Ready before concluding that none is left.
func claimItems(ctx context.Context, s *Statements, q drivers.Querier, st drivers.Strategy, owner string, ttlMillis int64, k int) ([]int64, error) {
	if st == drivers.Lease {
		lease := leaseClaimParams{Owner: owner, TTLMS: ttlMillis, Limit: k}
		if s.LeaseRead.Empty() {
			return claimed(drivers.ScanIDs(s.LeaseClaim.Query(ctx, q, lease)))
		}
		if _, err := s.LeaseClaim.Exec(ctx, q, lease); err != nil {
			return nil, fmt.Errorf("leasing bench items: %w", err)
		}
		return claimed(engineio.IDs(s.LeaseRead.All(ctx, q, ownerParams{Owner: owner})))
	}
	claim := s.Claim(st)
	if claim == nil || claim.Empty() {
		return nil, fmt.Errorf("strategy %s has no bench claim statement on this database", st)
	}
	if s.ClaimRead.Empty() {
		return claimed(drivers.ScanIDs(claim.Query(ctx, q, limitParams{Limit: k})))
	}
	if _, err := claim.Exec(ctx, q, limitParams{Limit: k}); err != nil {
		return nil, fmt.Errorf("claiming bench items (%s): %w", st, err)
	}
	return claimed(engineio.IDs(s.ClaimRead.All(ctx, q, engineio.NoParams{})))
}

func claimed(ids []int64, err error) ([]int64, error) {
	if err != nil {
		return nil, fmt.Errorf("claiming bench items: %w", err)
	}
	return ids, nil
}
