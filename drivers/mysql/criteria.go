package mysql

import (
	"context"
	"database/sql"
	"github.com/loanq/loanq/loankey"
	"strings"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/sqllex"
)

var _ sqllex.Syntaxer = (*Driver)(nil)

// CriteriaSyntax: how MySQL and MariaDB tokenize a task's --where and
// --order, in each sql_mode that changes it.
func (*Driver) CriteriaSyntax() sqllex.Syntax { return sqllex.MySQL }

var _ drivers.KeyDescriber = (*Driver)(nil)

// keyDataType binds: the schema (NULL: the current database), the table or
// view, the column. Answers the column's declared type.
const keyDataType = `SELECT DATA_TYPE FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? AND COLUMN_NAME = ?`

// DescribeKey: MariaDB's UUID type (10.7) reaches the client as CHAR, which
// KeyKindOf takes as text; the catalogue names it. A view's column is
// listed with the type of what it selects.
func (*Driver) DescribeKey(ctx context.Context, q drivers.Querier, src drivers.CriteriaSource) (loankey.Kind, error) {
	var schema sql.NullString
	table := src.Source
	if i := strings.IndexByte(table, '.'); i >= 0 {
		schema, table = sql.NullString{String: table[:i], Valid: true}, table[i+1:]
	}
	var typ string
	err := q.QueryRowContext(ctx, keyDataType, schema, table, src.Key).Scan(&typ)
	if err != nil {
		return loankey.Unknown, err
	}
	if strings.EqualFold(typ, "uuid") {
		return loankey.UUID, nil
	}
	return loankey.Unknown, nil
}
