package postgres

import "github.com/loanq/loanq/drivers"

// Tables: the column types of the demo's and the tests' tables (see drivers.Tables).
func (*Driver) Tables() drivers.Tables {
	return drivers.Tables{BigInt: "BIGINT", SmallInt: "SMALLINT", Flag: "SMALLINT", Text: "VARCHAR(%d)",
		Time: "TIMESTAMP", MultiRowValues: true}
}
