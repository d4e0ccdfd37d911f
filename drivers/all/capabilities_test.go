package all

import (
	"strings"
	"testing"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/mysql"
	"github.com/loanq/loanq/drivers/postgres"
)

// pgStatements is PostgreSQL's driver claiming rows finish statements while
// it still implements drivers.FinishingClaimer.
type pgStatements struct{ *postgres.Driver }

func (pgStatements) Capabilities() drivers.Capabilities {
	c := (&postgres.Driver{}).Capabilities()
	c.RowsFinish = drivers.RowsFinishStatements
	return c
}

// mysqlOneStatement is MariaDB's driver claiming rows finish one-statement
// without the statement.
type mysqlOneStatement struct{ *mysql.Driver }

func (mysqlOneStatement) Capabilities() drivers.Capabilities {
	c := (&mysql.Driver{}).Capabilities()
	c.RowsFinish = drivers.RowsFinishOneStatement
	return c
}

// The rows finish capability and drivers.FinishingClaimer go together:
// CheckDriver (Register's check) refuses a driver where they disagree either way.
func TestRowsFinishNeedsItsStatement(t *testing.T) {
	for _, c := range []struct {
		d    drivers.Driver
		want string
	}{
		{pgStatements{&postgres.Driver{}}, "the driver is a drivers.FinishingClaimer, which rows finish statements never uses"},
		{mysqlOneStatement{&mysql.Driver{}}, "rows finish one-statement needs drivers.FinishingClaimer"},
	} {
		err := drivers.CheckDriver(c.d)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%T: CheckDriver gave %v, want %q", c.d, err, c.want)
		}
	}
	for _, d := range []drivers.Driver{&postgres.Driver{}, &mysql.Driver{}} {
		if err := drivers.CheckDriver(d); err != nil {
			t.Errorf("%s as it is: %v", d.Name(), err)
		}
	}
}
