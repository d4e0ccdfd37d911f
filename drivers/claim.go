package drivers

import (
	"context"
	"fmt"
)

// ClaimItems claims up to k ready items of the bench table for owner with
// strategy st, using only the dialect's Statements, and returns their ids.
//
// Row-lock strategies (skip, nowait, wait): q must be a transaction. The items
// stay locked until it ends; the caller finishes them with BenchDone in the
// same transaction and commits (or rolls back, which puts them back). A
// lock-busy error (nowait) is returned as is: test it with Driver.IsLockBusy.
//
// Lease: q should be a transaction of its own that the caller commits at
// once (on SQLite an immediate one, which takes the write lock up front). The
// items are marked claimed by owner until now + ttlMillis; the caller finishes
// each with BenchLeaseDone. No ids can mean another claimer raced for the
// same items: check BenchReady before concluding that none is left.
func (s *Statements) ClaimItems(ctx context.Context, q Querier, st Strategy, owner string, ttlMillis int64, k int) ([]int64, error) {
	if st == Lease {
		if s.BenchLeaseRead == "" {
			return queryIDs(ctx, q, s.BenchLeaseClaim, owner, ttlMillis, k)
		}
		if _, err := q.ExecContext(ctx, s.BenchLeaseClaim, owner, ttlMillis, k); err != nil {
			return nil, fmt.Errorf("leasing bench items: %w", err)
		}
		return queryIDs(ctx, q, s.BenchLeaseRead, owner)
	}
	claim := s.BenchClaim(st)
	if claim == "" {
		return nil, fmt.Errorf("strategy %s has no bench claim statement on this database", st)
	}
	if s.BenchClaimRead == "" {
		return queryIDs(ctx, q, claim, k)
	}
	if _, err := q.ExecContext(ctx, claim, k); err != nil {
		return nil, fmt.Errorf("claiming bench items (%s): %w", st, err)
	}
	return queryIDs(ctx, q, s.BenchClaimRead)
}

func queryIDs(ctx context.Context, q Querier, query string, args ...any) ([]int64, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("claiming bench items: %w", err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("reading claimed bench ids: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claiming bench items: %w", err)
	}
	return ids, nil
}

// QueryIDs runs a query whose rows are one 64-bit id each and returns them
// in order: how the rows strategy reads the keys a claim locked.
func QueryIDs(ctx context.Context, q Querier, query string, args ...any) ([]int64, error) {
	return queryIDs(ctx, q, query, args...)
}
