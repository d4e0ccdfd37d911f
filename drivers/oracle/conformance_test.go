package oracle_test

import (
	"os"
	"testing"

	"github.com/loanq/loanq/drivers/drivertest"
	"github.com/loanq/loanq/drivers/oracle"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// TestConformance runs the driver suite against a real Oracle, given as
// LOANQ_TEST_ORACLE_DSN=oracle://user:pass@host:port/service (a cgo build
// with Oracle Instant Client is needed). The suite drops and recreates the
// loanq_ tables in that user's schema: use a schema of its own.
func TestConformance(t *testing.T) {
	if os.Getenv("LOANQ_TEST_ORACLE_DSN") == "" && !testdb.Required("oracle") {
		t.Skip("skipped: LOANQ_TEST_ORACLE_DSN is not set (oracle://user:pass@host:port/service of a throw-away schema)")
	}
	drivertest.Exercise(t, &oracle.Driver{}, testdb.Fresh(t, "oracle"))
}
