package drivers

import (
	"database/sql"
	"reflect"
)

// KeyKind is what a key column's type says about the values it can hold.
type KeyKind int

const (
	// KeyUnknown: the type does not tell (an SQLite column declared without
	// a type, a computed view column); the rows themselves decide.
	KeyUnknown KeyKind = iota
	// KeyInteger: whole numbers, which loanq stores as loan ids.
	KeyInteger
	// KeyNotInteger: text, UUID, binary, floating point, dates. loanq's
	// loan ids are 64-bit integers for now; such a key would fail every
	// criteria query of the task once a row has a non-numeric key.
	KeyNotInteger
)

// KeyTyper is implemented by a driver whose database/sql driver does not
// report column types KeyKindOf can read (SQLite reports the declared type
// only, Oracle NUMBER as text). Its answer replaces the generic one.
type KeyTyper interface {
	KeyKind(ct *sql.ColumnType) KeyKind
}

// KeyKindOf classifies the key column of a criteria query by the column
// type the database reports for it (sql.Rows.ColumnTypes, available before
// any row is read). The generic rule reads the Go type the driver scans the
// column into, which pgx and go-sql-driver/mysql report from the server's
// type: integers of any width are keys; a fixed-point type of scale 0
// (NUMERIC(19,0), DECIMAL(20)) too; anything else the driver names is not.
func KeyKindOf(d Driver, ct *sql.ColumnType) KeyKind {
	if kt, ok := d.(KeyTyper); ok {
		return kt.KeyKind(ct)
	}
	t := ct.ScanType()
	if t == nil || t.Kind() == reflect.Interface {
		return KeyUnknown
	}
	if integerType(t) {
		return KeyInteger
	}
	if _, scale, ok := ct.DecimalSize(); ok && scale == 0 {
		return KeyInteger
	}
	return KeyNotInteger
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

// KeyProbe is a query that returns no row and the key column of src, so
// that its type can be read (KeyKindOf) before the criteria query, which
// compares the key with loanq's integer loan ids and fails on a type
// mismatch where the database checks types (PostgreSQL) with a message that
// does not say why. Written once: every dialect reads it alike.
func KeyProbe(d Dialect, src CriteriaSource) *Stmt[NoParams] {
	s, err := Compile[NoParams](d, "KeyProbe", "SELECT src."+src.Key+" FROM "+src.Source+" src WHERE 1 = 0")
	if err != nil {
		panic("drivers: " + err.Error()) // no binds to check
	}
	return s
}
