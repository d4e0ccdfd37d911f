package oracle

import "github.com/loanq/loanq/drivers"

// Tables: the column types of the demo's and the tests' tables (see
// drivers.Tables). Oracle before 23ai has no multi-row VALUES: one row per
// INSERT.
func (*Driver) Tables() drivers.Tables {
	return drivers.Tables{BigInt: "NUMBER(19)", SmallInt: "NUMBER(3)", Flag: "NUMBER(1)", Text: "VARCHAR2(%d)",
		Time: "TIMESTAMP"}
}
