package sqlite_test

import (
	"testing"

	"github.com/loanq/loanq/drivers/drivertest"
	"github.com/loanq/loanq/drivers/sqlite"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

func TestConformance(t *testing.T) {
	drivertest.Exercise(t, &sqlite.Driver{}, testdb.Fresh(t, "sqlite"))
}
