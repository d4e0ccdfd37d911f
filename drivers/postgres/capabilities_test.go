package postgres_test

import (
	"testing"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/drivertest"
	"github.com/loanq/loanq/drivers/postgres"
)

// PostgreSQL's capabilities, and the statements they say it sends of those
// a capability governs (no database needed).
func TestCapabilities(t *testing.T) {
	drivertest.Capabilities(t, &postgres.Driver{}, drivers.Capabilities{
		Strategies:  []drivers.Strategy{drivers.Skip, drivers.NoWait, drivers.Wait, drivers.Lease, drivers.Rows},
		PasswordEnv: []string{"PGPASSWORD"},
		Wait:        drivers.WaitQueueShared,
		WaitBound:   drivers.BoundTransactionLocal,
		RoundFinish: drivers.FinishMany,
		UserCap:     drivers.UserCapRowLock,
		PoolClaim:   drivers.PoolClaimStatement,
		RowsFinish:  drivers.RowsFinishOneStatement,
		HoldLimit:   drivers.HoldLimitTransactionLocal,
		Accounts:    drivers.AccountsDatabase,
		RoundReads:  drivers.RoundReadsTransaction,
		DDL:         drivers.DDLTransactional,
	},
		"RequestFinishMany",                  // round finish many
		"LockSkip", "LockNoWait", "LockWait", // strategies
		"WorkInsertRows",                 // strategy rows
		"WaitLockSet", "WaitLockRestore", // wait bound transaction-local: no save
		"LockWaitBounded", "LockShareBounded", // wait mode queue-shared
		"UserLockEnsure", "UserLock", // user cap row-lock
		"HoldLimitSet", // hold limit transaction-local: no reset
		"PoolClaim",    // pool claim statement
		"Identity",     // accounts database
	)
}
