package drivers

import (
	"context"
	"github.com/loanq/loanq/loankey"
	"strings"
)

// Dialect is how one database writes what every database says differently:
// the vocabulary the portable statements are written in ({{now}},
// {{nowPlusMs ":ttl_ms"}}, {{limit "10"}} …) and the placeholder syntax
// their :name binds become. Each driver implements it in its sql.go, beside
// the statements it writes its own way.
//
// Expression arguments are SQL text (a bind such as ":ttl_ms", a column, a
// literal), placed in the result as given.
type Dialect interface {
	// Placeholder is the n-th bind marker (from 1): $n, ? or :n.
	Placeholder(n int) string
	// Now is the database clock in UTC, in the form loanq stores times in.
	Now() string
	// NowPlusMillis is Now moved forward by ms milliseconds; NULL ms gives NULL.
	NowPlusMillis(ms string) string
	// NowMinusMillis is Now moved back by ms milliseconds.
	NowMinusMillis(ms string) string
	// SecondsSince is the whole seconds from the stored time ts to Now.
	SecondsSince(ts string) string
	// MillisSince is the whole milliseconds from the stored time ts to Now
	// (rates over spans shorter than a second: sizing.go).
	MillisSince(ts string) string
	// SecondsBetween is the whole seconds from the stored time from to to.
	SecondsBetween(from, to string) string
	// StartOfToday is midnight of the database clock's UTC day, comparable
	// with stored times.
	StartOfToday() string
	// Limit is the clause ending a query after n rows (LIMIT n, FETCH FIRST
	// n ROWS ONLY). Only for queries that lock nothing.
	Limit(n string) string
	// Integer casts a numeric expression to an integer the driver scans
	// into an int64.
	Integer(expr string) string
	// InIDs is the condition "expr is one of the ids in ids", a JSON array
	// text such as "[3,7,9]" (one bind for a whole batch). Written so the
	// planner looks expr up by its index whatever its statistics say: a
	// freshly filled table must not be scanned whole for a handful of keys.
	InIDs(expr, ids string) string
	// KeyAsText is a source key expression as the text loanq stores loan
	// keys in (its loan_id columns are text, migration 00013): an integer's
	// decimal digits, a UUID's canonical lower-case form, text as it is.
	// The criteria query compares the source key with loanq's loan ids
	// through it, and lists its keys with it.
	KeyAsText(expr string) string
	// InKeys is the condition "the source key expr is one of keys", a JSON
	// array text (KeysJSON: numbers for integer keys, strings otherwise),
	// read with the key column's own type so that its index serves the
	// lookup.
	InKeys(expr, keys string, kind loankey.Kind) string
	// InLoanIDs is the condition "loanq's loan_id column expr is one of
	// ids", a JSON array of strings (LoanIDsJSON).
	InLoanIDs(expr, ids string) string
	// AssignmentsFromJSON is a subquery of the assignments in list, a JSON
	// array text of [loan id, request id, user name] arrays such as
	// `[["3",17,"ann"],["7",18,"bob"]]`, with columns n (the position, for
	// ORDER BY), loan_id (text), request_id and user_name.
	AssignmentsFromJSON(list string) string
	// SkipActiveConflict ends an INSERT INTO loanq_work so that a row the
	// one-active-row index refuses is skipped instead of failing the
	// statement (PostgreSQL: ON CONFLICT … DO NOTHING, which the partial
	// index needs named). "" where a duplicate-key error undoes the failing
	// statement only, and the engine takes it as "assigned meanwhile".
	SkipActiveConflict() string
	// ReturningID is what an INSERT ends with so that InsertID can read the
	// new row's id ("RETURNING id", nothing, or "RETURNING id INTO
	// :returned_id", whose value InsertID supplies).
	ReturningID() string
	// InsertID runs an INSERT ending with ReturningID and returns the id.
	InsertID(ctx context.Context, q Querier, query string, args []any) (int64, error)
	// TextLiteral is s as a string literal of the dialect, for the rare
	// statement that must carry a value in its text (a claim's four-eyes
	// condition goes into criteria that some drivers hand to a procedure
	// as text: dispatch/governance.go). A standard literal doubles its
	// quotes (StandardTextLiteral); a dialect where a backslash may escape
	// says it its own way.
	TextLiteral(s string) string
}

// ReturnedID is InsertID for dialects whose INSERT … RETURNING id returns
// the id as a one-row result (PostgreSQL, SQLite).
func ReturnedID(ctx context.Context, q Querier, query string, args []any) (int64, error) {
	var id int64
	err := q.QueryRowContext(ctx, query, args...).Scan(&id)
	return id, err
}

// Rebind turns the ? placeholders of SQL that is not one of loanq's
// statements (a test's fixture, which holds no literal '?') into d's.
func Rebind(d Dialect, query string) string {
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString(d.Placeholder(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// StandardTextLiteral is s as the SQL standard writes a string literal:
// in single quotes, each quote doubled, nothing else special.
func StandardTextLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
