package sqlite_test

import (
	"testing"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/drivertest"
	"github.com/loanq/loanq/drivers/sqlite"
)

// SQLite's capabilities, and the statements they say it sends of those a
// capability governs (no database needed).
func TestCapabilities(t *testing.T) {
	drivertest.Capabilities(t, &sqlite.Driver{}, drivers.Capabilities{
		Strategies:  []drivers.Strategy{drivers.Lease},
		Wait:        drivers.WaitPoll,
		WaitBound:   drivers.BoundNone,
		RoundFinish: drivers.FinishMany,
		UserCap:     drivers.UserCapOneWriter,
		PoolClaim:   drivers.PoolClaimStatement,
		RowsFinish:  drivers.RowsFinishStatements,
		HoldLimit:   drivers.HoldLimitNone,
		Accounts:    drivers.AccountsNone,
		RoundReads:  drivers.RoundReadsPool,
		DDL:         drivers.DDLTransactional,
	},
		"RequestFinishMany", // round finish many
		"PoolClaim",         // pool claim statement
	)
}
