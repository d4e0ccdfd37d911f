package mysql_test

import (
	"testing"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/drivertest"
	"github.com/loanq/loanq/drivers/mysql"
)

// MySQL/MariaDB's capabilities, and the statements they say it sends of
// those a capability governs (no database needed).
func TestCapabilities(t *testing.T) {
	drivertest.Capabilities(t, &mysql.Driver{}, drivers.Capabilities{
		Strategies:  []drivers.Strategy{drivers.Skip, drivers.NoWait, drivers.Wait, drivers.Lease, drivers.Rows},
		Wait:        drivers.WaitQueueShared,
		WaitBound:   drivers.BoundSessionSetting,
		RoundFinish: drivers.FinishEach,
		UserCap:     drivers.UserCapRowLock,
		PoolClaim:   drivers.PoolClaimStatement,
		RowsFinish:  drivers.RowsFinishStatements,
		HoldLimit:   drivers.HoldLimitSessionSetting,
		Accounts:    drivers.AccountsDatabase,
		RoundReads:  drivers.RoundReadsTransaction,
		DDL:         drivers.DDLAutocommit,
	},
		"LockSkip", "LockNoWait", "LockWait", // strategies
		"WorkInsertRows",                                 // strategy rows
		"WaitLockSave", "WaitLockSet", "WaitLockRestore", // wait bound session-setting
		"LockWaitBounded", "LockShareBounded", // wait mode queue-shared
		"UserLockEnsure", "UserLock", // user cap row-lock
		"HoldLimitSet", "HoldLimitReset", // hold limit session-setting
		"PoolClaim", // pool claim statement
		"Identity",  // accounts database
	)
}
