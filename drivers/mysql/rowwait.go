package mysql

import "github.com/loanq/loanq/drivers"

var _ drivers.RowWaiter = (*Driver)(nil)

// RowWaitSQL: an S lock on the row, granted when the claimer holding its X
// lock commits or rolls back, together with the other waiters' S locks
// (LOCK IN SHARE MODE: MariaDB has only this spelling). The bound is
// innodb_lock_wait_timeout, set by WaitLockSet.
func (*Driver) RowWaitSQL(src drivers.CriteriaSource) string {
	return "SELECT src." + src.Key + " FROM " + src.Source + " src WHERE src." + src.Key + " = ? LOCK IN SHARE MODE"
}
