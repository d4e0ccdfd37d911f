package oracle

import (
	"database/sql"
	"strings"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/sqllex"
)

var (
	_ sqllex.Syntaxer  = (*Driver)(nil)
	_ drivers.KeyTyper = (*Driver)(nil)
)

// CriteriaSyntax: how Oracle tokenizes a task's --where and --order.
func (*Driver) CriteriaSyntax() sqllex.Syntax { return sqllex.Oracle }

// KeyKind takes the character types as text keys, refuses the LOB, binary
// and date types by name and leaves NUMBER (which godror scans as text) to
// the rows: a key is commonly declared NUMBER without precision.
func (*Driver) KeyKind(ct *sql.ColumnType) drivers.KeyKind {
	t := strings.ToUpper(ct.DatabaseTypeName())
	switch {
	case t == "NUMBER" || t == "INTEGER":
		if _, scale, ok := ct.DecimalSize(); ok && scale == 0 {
			return drivers.KeyInteger
		}
		return drivers.KeyUnknown
	case strings.Contains(t, "CHAR"):
		return drivers.KeyText
	case strings.Contains(t, "CLOB"), strings.Contains(t, "RAW"),
		strings.Contains(t, "BLOB"), strings.Contains(t, "DATE"), strings.Contains(t, "TIME"),
		strings.HasPrefix(t, "BINARY_"), t == "ROWID", t == "UROWID":
		return drivers.KeyOther
	}
	return drivers.KeyUnknown
}
