package postgres_test

import (
	"testing"

	"github.com/loanq/loanq/drivers/drivertest"
	"github.com/loanq/loanq/drivers/postgres"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

func TestConformance(t *testing.T) {
	drivertest.Exercise(t, &postgres.Driver{}, testdb.Fresh(t, "postgres"))
}
