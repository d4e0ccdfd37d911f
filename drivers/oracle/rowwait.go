package oracle

import "github.com/loanq/loanq/drivers"

var _ drivers.RowWaiter = (*Driver)(nil)

// RowWaitSQL: Oracle has no share row lock, so the waiter queues with FOR
// UPDATE, bounded in the statement (WAIT n, ORA-30006 when n runs out), and
// rolls back the moment it is granted.
func (*Driver) RowWaitSQL(src drivers.CriteriaSource) string {
	return "SELECT src." + src.Key + " FROM " + src.Source + " src WHERE src." + src.Key + " = :1 FOR UPDATE WAIT {wait_s}"
}
