package drivers

import (
	"context"
	"database/sql"
	"reflect"
	"strings"

	"github.com/loanq/loanq/loankey"
)

// KeyTyper is implemented by a driver whose database/sql driver does not
// report column types KeyKindOf can read (SQLite reports the declared type
// only, Oracle NUMBER as text). Its answer replaces the generic one.
type KeyTyper interface {
	KeyKind(ct *sql.ColumnType) loankey.Kind
}

// KeyDescriber is implemented by a driver whose catalogue tells a key's
// kind where the column type the client reports does not (MariaDB reports
// its UUID type as CHAR). Unknown: the generic answer stands.
type KeyDescriber interface {
	DescribeKey(ctx context.Context, q Querier, src CriteriaSource) (loankey.Kind, error)
}

// KeyKindOf classifies the key column of a criteria query by the column
// type the database reports for it (sql.Rows.ColumnTypes, available before
// any row is read). The generic rule reads the type name and the Go type the
// driver scans the column into, which pgx and go-sql-driver/mysql report
// from the server's type: integers of any width are integer keys, and a
// fixed-point type of scale 0 (NUMERIC(19,0), DECIMAL(20)) too; a UUID type
// is a UUID key; character types are text keys; anything else is not a key.
func KeyKindOf(d Driver, ct *sql.ColumnType) loankey.Kind {
	if kt, ok := d.(KeyTyper); ok {
		return kt.KeyKind(ct)
	}
	name := strings.ToUpper(ct.DatabaseTypeName())
	switch {
	case strings.Contains(name, "UUID"):
		return loankey.UUID
	case strings.Contains(name, "CHAR") || strings.Contains(name, "TEXT") || name == "NAME" || name == "CITEXT":
		return loankey.Text
	}
	t := ct.ScanType()
	if t == nil || t.Kind() == reflect.Interface {
		return loankey.Unknown
	}
	if integerType(t) {
		return loankey.Integer
	}
	if _, scale, ok := ct.DecimalSize(); ok && scale == 0 {
		return loankey.Integer
	}
	return loankey.Other
}

// integerType: an integer kind, or a nullable wrapper of one (sql.NullInt64,
// sql.Null[uint64]).
func integerType(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	case reflect.Struct:
		for _, f := range []string{"Int64", "Int32", "Int16", "Byte", "V"} {
			if sf, ok := t.FieldByName(f); ok && integerType(sf.Type) {
				return true
			}
		}
	}
	return false
}
