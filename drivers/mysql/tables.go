package mysql

import "github.com/loanq/loanq/drivers"

// Tables: the column types of the demo's and the tests' tables (see
// drivers.Tables). DATETIME holds the UTC time as given (the session time
// zone is UTC, see Config); InnoDB is named so that no server default engine
// without row locks is used.
func (*Driver) Tables() drivers.Tables {
	return drivers.Tables{BigInt: "BIGINT", SmallInt: "SMALLINT", Flag: "TINYINT", Text: "VARCHAR(%d)",
		Time: "DATETIME", Options: " ENGINE = InnoDB", MultiRowValues: true}
}
