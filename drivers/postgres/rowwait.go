package postgres

import "github.com/loanq/loanq/drivers"

var _ drivers.RowWaiter = (*Driver)(nil)

// RowWaitSQL: FOR SHARE conflicts with the claimers' FOR NO KEY UPDATE (FOR
// KEY SHARE would not) and not with the other waiters' share locks. The
// bound is lock_timeout, set by WaitLockSet in the waiter's transaction.
func (*Driver) RowWaitSQL(src drivers.CriteriaSource) string {
	return `SELECT src.` + src.Key + ` FROM ` + src.Source + ` src WHERE src.` + src.Key + ` = $1 FOR SHARE OF src`
}
