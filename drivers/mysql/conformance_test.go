package mysql_test

import (
	"testing"

	"github.com/loanq/loanq/drivers/drivertest"
	"github.com/loanq/loanq/drivers/mysql"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

func TestConformance(t *testing.T) {
	drivertest.Exercise(t, &mysql.Driver{}, testdb.Fresh(t, "mysql"))
}
