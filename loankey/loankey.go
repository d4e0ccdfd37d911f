package loankey

import (
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/loanq/loanq/problem"
)

// MaxLength is the longest loan key loanq stores, in characters: its
// tables keep every loan key as text of at most this length (VARCHAR(200),
// migration 00013). Integer keys take at most 20; a UUID takes 36.
const MaxLength = 200

// Kind is what a key column's type says about the values it can hold,
// and (stored on the task as its name) how loanq treats the task's keys:
// integer keys are JSON numbers and bound as int64; text and UUID keys are
// JSON strings and bound as text.
type Kind int

const (
	// Unknown: the type does not tell (an SQLite column declared without
	// a type, a computed view column, an Oracle NUMBER without a scale);
	// the rows themselves decide.
	Unknown Kind = iota
	// Integer: whole numbers (64-bit).
	Integer
	// Text: character strings of up to MaxLength characters.
	Text
	// UUID: UUIDs (PostgreSQL's and MariaDB's uuid type), as their
	// canonical text.
	UUID
	// Other: a type loanq does not take as a key (floating point, dates,
	// binary, LOBs).
	Other
)

// SupportedTypes is what an error about a key column names.
const SupportedTypes = "an integer, text (CHAR/VARCHAR/TEXT, keys of up to 200 characters) or UUID column"

// String is the kind's stored name (loanq_task.key_kind).
func (k Kind) String() string {
	switch k {
	case Text:
		return "text"
	case UUID:
		return "uuid"
	case Other:
		return "other"
	case Unknown:
		return "unknown"
	}
	return "integer"
}

// ParseKind reads a stored key kind; anything unknown (an empty column
// of a task created before migration 00013) is an integer task.
func ParseKind(s string) Kind {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "text":
		return Text
	case "uuid":
		return UUID
	}
	return Integer
}

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// Parse checks a loan key given on the command line (or the API) for a
// task of kind k and returns it as loanq stores it: an integer's decimal
// text, a UUID in lower case, text as given. Bad input is a usage error
// that says what a key of this task looks like.
func Parse(k Kind, task, s string) (string, error) {
	switch k {
	case Text:
		switch n := utf8.RuneCountInString(s); {
		case strings.TrimSpace(s) == "":
			return "", problem.UsageAPI(fmt.Sprintf("invalid loan key %q for task %s: give the key as `loanq work list` or `work get` printed it", s, task),
				fmt.Sprintf("invalid loan key %q for task %s: give the key as a request's loans or GET /api/v1/pipeline show it", s, task))
		case n > MaxLength || !utf8.ValidString(s):
			return "", problem.Usagef("invalid loan key for task %s: %d characters, more than the %d a loan key may have", task, n, MaxLength)
		}
		return s, nil
	case UUID:
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

// Fits reports whether key, read back from one of loanq's own tables (a
// pool candidate), is a key of kind k as loanq writes one (the source key's
// KeyAsText): the decimal text of a 64-bit integer, exactly (no sign, zeros
// or spaces ParseInt would pass over); a UUID; text of at most MaxLength
// characters. Only such a key may be bound against the source key column
// (JSON, Arg): another one in an integer task is no JSON number or
// no bigint, and fails the whole statement (PostgreSQL refuses the cast,
// MySQL and SQLite the JSON), or is read as another loan's key (" 12" is
// loan 12). Rows that loanq did not write can hold anything the column
// takes, and a statement they fail fails for everybody (docs/security.md).
func Fits(k Kind, key string) bool {
	switch k {
	case Integer:
		n, err := strconv.ParseInt(key, 10, 64)
		return err == nil && strconv.FormatInt(n, 10) == key
	case UUID:
		// Either case: an SQLite source keeps the text it holds, and the
		// databases with a uuid type read both.
		return uuidRE.MatchString(key)
	}
	return utf8.ValidString(key) && utf8.RuneCountInString(key) <= MaxLength
}

// Arg is key bound with the type of a key column of kind k, so that a
// lookup of the source row by key is served by the column's index: an
// int64 for integer keys, the text otherwise.
func Arg(k Kind, key string) any {
	if k == Integer {
		if n, err := strconv.ParseInt(key, 10, 64); err == nil {
			return n
		}
	}
	return key
}

// JSON is a list of keys of kind k as the JSON array text the InKeys
// conditions read: numbers for integer keys (so that the dialects read them
// as integers, as before), strings otherwise.
func JSON(k Kind, keys []string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, key := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		if k == Integer && isDecimal(key) {
			b.WriteString(key)
			continue
		}
		q, _ := json.Marshal(key) // a string always marshals
		b.Write(q)
	}
	b.WriteByte(']')
	return b.String()
}

// TextJSON is a list of keys as the JSON array of strings that loanq's
// own loan_id columns are compared with ({{inLoanIDs}}).
func TextJSON(keys []string) string { return JSON(Text, keys) }

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

// New is the key text of a task of kind k.
func New(k Kind, text string) Key {
	return Key{Text: text, Integer: k == Integer && isDecimal(text)}
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

// List wraps key texts of a task of kind k.
func List(k Kind, texts []string) []Key {
	out := make([]Key, len(texts))
	for i, t := range texts {
		out[i] = New(k, t)
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

// Texts are keys' texts (String), as the disposition calls take them.
func Texts(keys []Key) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.Text
	}
	return out
}

// Value binds a key as its text, as loanq's loan_id columns hold it.
func (k Key) Value() (driver.Value, error) { return k.Text, nil }
