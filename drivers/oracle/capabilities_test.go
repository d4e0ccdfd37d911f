package oracle_test

import (
	"testing"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/drivertest"
	"github.com/loanq/loanq/drivers/oracle"
)

// Oracle's capabilities, and the statements they say it sends of those a
// capability governs (no database needed).
func TestCapabilities(t *testing.T) {
	drivertest.Capabilities(t, &oracle.Driver{}, drivers.Capabilities{
		Strategies:  []drivers.Strategy{drivers.Skip, drivers.NoWait, drivers.Wait, drivers.Lease, drivers.Rows},
		Wait:        drivers.WaitQueueExclusive,
		WaitBound:   drivers.BoundInStatement,
		RoundFinish: drivers.FinishEach,
		UserCap:     drivers.UserCapRowLock,
		PoolClaim:   drivers.PoolClaimProcedure,
		RowsFinish:  drivers.RowsFinishStatements,
		HoldLimit:   drivers.HoldLimitByDBA,
		Accounts:    drivers.AccountsDatabase,
		RoundReads:  drivers.RoundReadsPool,
		DDL:         drivers.DDLAutocommit,
	},
		"LockSkip", "LockNoWait", "LockWait", // strategies
		"WorkInsertRows",             // strategy rows
		"LockWaitBounded",            // wait mode queue-exclusive, the bound in the statement
		"UserLockEnsure", "UserLock", // user cap row-lock
		"Identity", // accounts database
	)
}
