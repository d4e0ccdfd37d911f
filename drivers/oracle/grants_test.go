package oracle

import (
	"testing"

	"github.com/loanq/loanq/drivers/drivertest"
)

// A grant script revokes on every table the migrations create, so an
// account given another role keeps nothing of the old one (a table left out
// kept an admin's INSERT on loanq_api_token after a re-grant as processor).
func TestRevokeCoversEveryTable(t *testing.T) {
	drivertest.SameTables(t, "the tables a grant script revokes on", revokeTables(), drivertest.MigratedTables(t, "oracle"))
}
