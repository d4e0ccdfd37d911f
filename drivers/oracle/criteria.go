package oracle

import (
	"database/sql"
	"github.com/loanq/loanq/loankey"
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
func (*Driver) KeyKind(ct *sql.ColumnType) loankey.Kind {
	t := strings.ToUpper(ct.DatabaseTypeName())
	switch {
	case t == "NUMBER" || t == "INTEGER":
		if _, scale, ok := ct.DecimalSize(); ok && scale == 0 {
			return loankey.Integer
		}
		return loankey.Unknown
	case strings.Contains(t, "CHAR"):
		return loankey.Text
	case strings.Contains(t, "CLOB"), strings.Contains(t, "RAW"),
		strings.Contains(t, "BLOB"), strings.Contains(t, "DATE"), strings.Contains(t, "TIME"),
		strings.HasPrefix(t, "BINARY_"), t == "ROWID", t == "UROWID":
		return loankey.Other
	}
	return loankey.Unknown
}
