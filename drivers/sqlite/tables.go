package sqlite

import "github.com/loanq/loanq/drivers"

// Tables: the column types of the demo's and the tests' tables (see
// drivers.Tables). Times are fixed-width ISO text, as in loanq's own tables
// (sql.go), so that ordering by a time column is time order.
func (*Driver) Tables() drivers.Tables {
	return drivers.Tables{BigInt: "INTEGER", SmallInt: "INTEGER", Flag: "INTEGER", Text: "TEXT",
		Time: "TEXT", TimeLayout: "2006-01-02T15:04:05Z", MultiRowValues: true}
}
