package drivers

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/loanq/loanq/problem"
)

// MaxKeyLength is the longest loan key loanq stores, in characters: its
// tables keep every loan key as text of at most this length (VARCHAR(200),
// migration 00013). Integer keys take at most 20; a UUID takes 36.
const MaxKeyLength = 200

// KeyKind is what a key column's type says about the values it can hold,
// and (stored on the task as its name) how loanq treats the task's keys:
// integer keys are JSON numbers and bound as int64; text and UUID keys are
// JSON strings and bound as text.
type KeyKind int

const (
	// KeyUnknown: the type does not tell (an SQLite column declared without
	// a type, a computed view column, an Oracle NUMBER without a scale);
	// the rows themselves decide.
	KeyUnknown KeyKind = iota
	// KeyInteger: whole numbers (64-bit).
	KeyInteger
	// KeyText: character strings of up to MaxKeyLength characters.
	KeyText
	// KeyUUID: UUIDs (PostgreSQL's and MariaDB's uuid type), as their
	// canonical text.
	KeyUUID
	// KeyOther: a type loanq does not take as a key (floating point, dates,
	// binary, LOBs).
	KeyOther
)

// SupportedKeyTypes is what an error about a key column names.
const SupportedKeyTypes = "an integer, text (CHAR/VARCHAR/TEXT, keys of up to 200 characters) or UUID column"

// String is the kind's stored name (loanq_task.key_kind).
func (k KeyKind) String() string {
	switch k {
	case KeyText:
		return "text"
	case KeyUUID:
		return "uuid"
	case KeyOther:
		return "other"
	case KeyUnknown:
		return "unknown"
	}
	return "integer"
}

// ParseKeyKind reads a stored key kind; anything unknown (an empty column
// of a task created before migration 00013) is an integer task.
func ParseKeyKind(s string) KeyKind {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "text":
		return KeyText
	case "uuid":
		return KeyUUID
	}
	return KeyInteger
}

// KeyTyper is implemented by a driver whose database/sql driver does not
// report column types KeyKindOf can read (SQLite reports the declared type
// only, Oracle NUMBER as text). Its answer replaces the generic one.
type KeyTyper interface {
	KeyKind(ct *sql.ColumnType) KeyKind
}

// KeyDescriber is implemented by a driver whose catalogue tells a key's
// kind where the column type the client reports does not (MariaDB reports
// its UUID type as CHAR). Unknown: the generic answer stands.
type KeyDescriber interface {
	DescribeKey(ctx context.Context, q Querier, src CriteriaSource) (KeyKind, error)
}

// KeyKindOf classifies the key column of a criteria query by the column
// type the database reports for it (sql.Rows.ColumnTypes, available before
// any row is read). The generic rule reads the type name and the Go type the
// driver scans the column into, which pgx and go-sql-driver/mysql report
// from the server's type: integers of any width are integer keys, and a
// fixed-point type of scale 0 (NUMERIC(19,0), DECIMAL(20)) too; a UUID type
// is a UUID key; character types are text keys; anything else is not a key.
func KeyKindOf(d Driver, ct *sql.ColumnType) KeyKind {
	if kt, ok := d.(KeyTyper); ok {
		return kt.KeyKind(ct)
	}
	name := strings.ToUpper(ct.DatabaseTypeName())
	switch {
	case strings.Contains(name, "UUID"):
		return KeyUUID
	case strings.Contains(name, "CHAR") || strings.Contains(name, "TEXT") || name == "NAME" || name == "CITEXT":
		return KeyText
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
	return KeyOther
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
// that its type can be read (KeyKindOf) before the criteria query runs.
// Written once: every dialect reads it alike.
func KeyProbe(d Dialect, src CriteriaSource) *Stmt[NoParams] {
	s, err := Compile[NoParams](d, "KeyProbe", "SELECT src."+src.Key+" FROM "+src.Source+" src WHERE 1 = 0")
	if err != nil {
		panic("drivers: " + err.Error()) // no binds to check
	}
	return s
}

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// ParseKey checks a loan key given on the command line (or the API) for a
// task of kind k and returns it as loanq stores it: an integer's decimal
// text, a UUID in lower case, text as given. Bad input is a usage error
// that says what a key of this task looks like.
func ParseKey(k KeyKind, task, s string) (string, error) {
	switch k {
	case KeyText:
		switch n := utf8.RuneCountInString(s); {
		case strings.TrimSpace(s) == "":
			return "", problem.UsageAPI(fmt.Sprintf("invalid loan key %q for task %s: give the key as `loanq work list` or `work get` printed it", s, task),
				fmt.Sprintf("invalid loan key %q for task %s: give the key as a request's loans or GET /api/v1/pipeline show it", s, task))
		case n > MaxKeyLength || !utf8.ValidString(s):
			return "", problem.Usagef("invalid loan key for task %s: %d characters, more than the %d a loan key may have", task, n, MaxKeyLength)
		}
		return s, nil
	case KeyUUID:
		if !uuidRE.MatchString(s) {
			return "", problem.Usagef("invalid loan key %q for task %s: its keys are UUIDs such as 0b6f8a3e-5c1d-4f2a-9e7b-1c2d3e4f5a6b", s, task)
		}
		return strings.ToLower(s), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return "", problem.UsageAPI(fmt.Sprintf("invalid loan id %q for task %s: give the integer loan id that `loanq work get` printed", s, task),
			fmt.Sprintf("invalid loan id %q for task %s: give the integer loan id a request's loans or GET /api/v1/pipeline show", s, task))
	}
	return strconv.FormatInt(n, 10), nil
}

// KeyFits reports whether key, read back from one of loanq's own tables (a
// pool candidate), is a key of kind k as loanq writes one (the source key's
// KeyAsText): the decimal text of a 64-bit integer, exactly (no sign, zeros
// or spaces ParseInt would pass over); a UUID; text of at most MaxKeyLength
// characters. Only such a key may be bound against the source key column
// (KeysJSON, KeyArg): another one in an integer task is no JSON number or
// no bigint, and fails the whole statement (PostgreSQL refuses the cast,
// MySQL and SQLite the JSON), or is read as another loan's key (" 12" is
// loan 12). Rows that loanq did not write can hold anything the column
// takes, and a statement they fail fails for everybody (docs/security.md).
func KeyFits(k KeyKind, key string) bool {
	switch k {
	case KeyInteger:
		n, err := strconv.ParseInt(key, 10, 64)
		return err == nil && strconv.FormatInt(n, 10) == key
	case KeyUUID:
		// Either case: an SQLite source keeps the text it holds, and the
		// databases with a uuid type read both.
		return uuidRE.MatchString(key)
	}
	return utf8.ValidString(key) && utf8.RuneCountInString(key) <= MaxKeyLength
}

// KeyArg is key bound with the type of a key column of kind k, so that a
// lookup of the source row by key is served by the column's index: an
// int64 for integer keys, the text otherwise.
func KeyArg(k KeyKind, key string) any {
	if k == KeyInteger {
		if n, err := strconv.ParseInt(key, 10, 64); err == nil {
			return n
		}
	}
	return key
}

// KeysJSON is a list of keys of kind k as the JSON array text the InKeys
// conditions read: numbers for integer keys (so that the dialects read them
// as integers, as before), strings otherwise.
func KeysJSON(k KeyKind, keys []string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, key := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		if k == KeyInteger && isDecimal(key) {
			b.WriteString(key)
			continue
		}
		q, _ := json.Marshal(key) // a string always marshals
		b.Write(q)
	}
	b.WriteByte(']')
	return b.String()
}

// LoanIDsJSON is a list of keys as the JSON array of strings that loanq's
// own loan_id columns are compared with ({{inLoanIDs}}).
func LoanIDsJSON(keys []string) string { return KeysJSON(KeyText, keys) }

// isDecimal: s is an integer as a JSON number writes one (an optional
// minus, then 0 or digits without a leading zero), so that a key written
// as a number keeps the JSON valid. Digits alone are not enough: a loan_id
// such as 007, written by hand in an integer task's rows, made the whole
// list or answer invalid JSON — every `work list -o json`, the status of
// the request it names — and is written as a string instead.
func isDecimal(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" || (s[0] == '0' && len(s) > 1) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Key is a loan key as loanq shows it: the stored text, printed as a JSON
// number for an integer task (what scripts have always read) and a JSON
// string for a text or UUID task.
type Key struct {
	Text    string
	Integer bool
}

// NewKey is the key text of a task of kind k.
func NewKey(k KeyKind, text string) Key {
	return Key{Text: text, Integer: k == KeyInteger && isDecimal(text)}
}

// String is the key's text: what `{}` and LOANQ_LOAN_ID carry in `work run`.
func (k Key) String() string { return k.Text }

// MarshalJSON: a number for an integer key, a string otherwise.
func (k Key) MarshalJSON() ([]byte, error) {
	if k.Integer && isDecimal(k.Text) {
		return []byte(k.Text), nil
	}
	return json.Marshal(k.Text)
}

// UnmarshalJSON reads either form back (a client of the JSON output).
func (k *Key) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		k.Integer = false
		return json.Unmarshal(b, &k.Text)
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("a loan key is a number or a string: %w", err)
	}
	k.Text, k.Integer = n.String(), true
	return nil
}

// Keys wraps key texts of a task of kind k.
func Keys(k KeyKind, texts []string) []Key {
	out := make([]Key, len(texts))
	for i, t := range texts {
		out[i] = NewKey(k, t)
	}
	return out
}

// Int64 is an integer key's value (0 for a key that is not an integer):
// for code that knows its task's keys are integers (the bench, the demo).
func (k Key) Int64() int64 {
	n, _ := strconv.ParseInt(k.Text, 10, 64)
	return n
}

// Int64s are integer keys' values (Int64).
func Int64s(keys []Key) []int64 {
	out := make([]int64, len(keys))
	for i, k := range keys {
		out[i] = k.Int64()
	}
	return out
}

// Value binds a key as its text, as loanq's loan_id columns hold it.
func (k Key) Value() (driver.Value, error) { return k.Text, nil }
