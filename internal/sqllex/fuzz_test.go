package sqllex_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"
	"unicode/utf8"

	_ "modernc.org/sqlite"

	"github.com/loanq/loanq/internal/sqllex"
)

// FuzzCheck: whatever the text, Check does not panic and points inside it;
// a text it accepts stays accepted inside parentheses, as loanq places it;
// and a text it accepts for SQLite cannot undo the condition loanq ANDs
// after it: SQLite itself runs the fragment in the criteria query's shape,
// and the query must find no row (or fail), never the row that "AND 1=0"
// excludes.
func FuzzCheck(f *testing.F) {
	for _, c := range cases {
		f.Add(c.text)
	}
	for _, s := range []string{
		"1=1) OR (1=1", "a = 1) OR 1=1 OR (a = 1", "[x]) OR ([x]", "`x`) OR (`x`", "'a''b') OR ('c'",
		"\"a\"\"\") OR (1", "x = 1 --", "1) UNION SELECT 1 FROM (SELECT 1", "1=1)OR(1=1", "a IN (1, (2))",
		"$x$ ) $x$", "e'\\'' ) OR (1", "[a]] ) OR (1=1 OR [x]",
	} {
		f.Add(s)
	}
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		f.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	f.Fuzz(func(t *testing.T, text string) {
		for name, s := range syntaxes {
			err := sqllex.Check(s, text)
			var le *sqllex.Error
			switch {
			case err == nil:
				if err := sqllex.Check(s, "("+text+") AND x = 1"); err != nil {
					t.Fatalf("%s: %q accepted, but not inside parentheses: %v", name, text, err)
				}
			case !errors.As(err, &le):
				t.Fatalf("%s: %q: %T is not a *sqllex.Error", name, text, err)
			case le.Pos < 1 || le.Pos > utf8.RuneCountInString(text)+1:
				t.Fatalf("%s: %q: position %d outside the text", name, text, le.Pos)
			}
		}
		if sqllex.Check(sqllex.SQLite, text) != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var n int
		err := db.QueryRowContext(ctx, "SELECT count(*) FROM (SELECT 1 AS id, 1 AS x, 'x' AS b) src WHERE ("+text+") AND 1=0").Scan(&n)
		if err == nil && n != 0 {
			t.Fatalf("%q passed the SQLite check and escaped its parentheses: %d row(s) despite AND 1=0", text, n)
		}
	})
}
