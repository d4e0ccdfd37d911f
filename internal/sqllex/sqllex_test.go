package sqllex_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/loanq/loanq/internal/sqllex"
)

// Each case is checked against the syntaxes named in ok (passes) and bad
// (refused, with want in the message); a syntax named in neither is not
// checked.
var cases = []struct {
	text    string
	ok, bad []string
	want    string
}{
	{text: "eligible = 1 AND priority > 3", ok: all},
	{text: "status IN ('new', 'open') AND (a OR b)", ok: all},
	{text: "note = 'it''s (fine'", ok: all},
	{text: "note = 'a;b -- c /* d */ # e ? :f $1 )'", ok: all},
	{text: `"weird ) col" = 1`, ok: all},
	{text: "1=1) OR (1=1", bad: all, want: "')' closes a parenthesis the text did not open at character 4"},
	{text: "(a = 1", bad: all, want: "'(' is never closed at character 1"},
	{text: "((a = 1)", bad: all, want: "'(' is never closed at character 1"},
	{text: "x = 1 -- c", bad: all, want: "comment marker '--' at character 7"},
	{text: "x = 1 /* c", bad: all, want: "comment marker '/*' at character 7"},
	{text: "x = 1 */", bad: all, want: "comment marker '*/' at character 7"},
	{text: "x = 1; DROP TABLE loan", bad: all, want: "';' ends the statement"},
	{text: "note = 'open", bad: all, want: `string literal opened by "'" is never closed at character 8`},
	{text: `"col = 1`, bad: all, want: `opened by '"' is never closed at character 1`},
	{text: "x = 1 \x1b[2J", bad: all, want: "U+001B (a control or invisible character) at character 7"},
	{text: "x\u200b = 1", bad: all, want: "U+200B"},
	{text: "x = 1\n  AND\ty = 2", ok: all},
	{text: "x = 'bad \xff utf8'", bad: all, want: "invalid UTF-8 at character 10"},

	// '#': a comment on MySQL only; an identifier character on Oracle.
	{text: "acct# = 5", ok: []string{"sqlite", "postgres", "oracle"}, bad: []string{"mysql", "strict"}, want: "comment marker '#'"},
	{text: "note = '#1'", ok: all},
	// Backslashes: MySQL reads 'a\' as unterminated by default, PostgreSQL
	// and SQLite read it as 'a\'.
	{text: `path = 'C:\'`, ok: []string{"sqlite", "oracle"}, bad: []string{"mysql", "postgres", "strict"}, want: "never closed"},
	// The break-out that relies on a backslash reading: balanced when \'
	// escapes, not under NO_BACKSLASH_ESCAPES.
	{text: `x = 'a\' ) OR (1=1 OR x = '`, bad: all, want: "')' closes a parenthesis the text did not open at character 10"},
	{text: `x = 'a\' ) OR (1=1 OR x = '`, bad: []string{"mysql"}, want: "(as MySQL with sql_mode NO_BACKSLASH_ESCAPES reads it)"},
	{text: `x = 'a\' ) OR (1=1 OR x = '`, bad: []string{"postgres"}, want: "(as PostgreSQL reads it)"},
	{text: `x = 'it\'s'`, ok: nil, bad: []string{"sqlite", "oracle"}, want: "never closed"},
	{text: `x = 'it\'s'`, bad: []string{"mysql"}, want: "(as MySQL with sql_mode NO_BACKSLASH_ESCAPES reads it)"},
	// Backticks and brackets.
	{text: "`odd ) name` = 1", ok: []string{"sqlite", "mysql"}},
	{text: "`it's` = 1", ok: []string{"sqlite", "mysql"}, bad: []string{"postgres", "oracle", "strict"}},
	{text: "[ ' ] ) OR (1=1 OR [ ' ]", bad: []string{"sqlite", "strict"}, want: "')' closes a parenthesis"},
	{text: "[ ' ] ) OR (1=1 OR [ ' ]", ok: []string{"postgres", "oracle"}}, // '…' holds the parens there
	// PostgreSQL: dollar quotes, E-strings, casts, $n binds.
	{text: "note = $$ ' $$ ) OR (1=1 OR '", bad: []string{"postgres"}, want: "')' closes a parenthesis the text did not open at character 16"},
	{text: "note = $$ ' $$ ) OR (1=1 OR '", bad: []string{"strict"}, want: "at character"},
	{text: "note = $tag$ it's ) $tag$", ok: []string{"postgres"}},
	{text: "note = $tag$ open", bad: []string{"postgres"}, want: "string literal opened by $tag$ is never closed at character 8"},
	{text: `note = E'it\'s'`, ok: []string{"postgres"}},
	{text: "created_at::date = current_date", ok: []string{"postgres"}},
	{text: "id = $1", bad: []string{"postgres", "sqlite", "strict"}, want: "bind marker '$' at character 6"},
	{text: "tags ? 'x'", ok: []string{"postgres"}, bad: []string{"mysql", "sqlite", "strict"}, want: "bind marker '?'"},
	{text: "a$1 = 2", ok: []string{"postgres"}},
	// Oracle: q-quotes, :binds.
	{text: "note = q'[it's ) ]'", ok: []string{"oracle"}},
	{text: "note = nq'{x}' AND y = q'!a'b!'", ok: []string{"oracle"}},
	{text: "note = q'[ ' ]' ) OR (1=1 OR ' '", bad: []string{"oracle"}, want: "')' closes a parenthesis"},
	{text: "note = q'[open", bad: []string{"oracle"}, want: "string literal opened by q'[ is never closed at character 8"},
	{text: "id = :id", bad: []string{"oracle", "sqlite", "strict"}, want: "bind marker ':' at character 6"},
	{text: "id = ?", bad: []string{"mysql", "sqlite", "strict"}, want: "bind marker '?' at character 6"},
	{text: "id = @x", bad: []string{"sqlite"}, want: "bind marker '@'"},
	{text: "id = @x", ok: []string{"mysql", "postgres", "oracle"}},
}

var all = []string{"sqlite", "mysql", "postgres", "oracle", "strict"}

var syntaxes = map[string]sqllex.Syntax{"sqlite": sqllex.SQLite, "mysql": sqllex.MySQL,
	"postgres": sqllex.PostgreSQL, "oracle": sqllex.Oracle, "strict": sqllex.Strict}

func TestCheck(t *testing.T) {
	for _, c := range cases {
		for _, name := range c.ok {
			if err := sqllex.Check(syntaxes[name], c.text); err != nil {
				t.Errorf("%s: %q refused: %v", name, c.text, err)
			}
		}
		for _, name := range c.bad {
			err := sqllex.Check(syntaxes[name], c.text)
			var le *sqllex.Error
			if !errors.As(err, &le) {
				t.Errorf("%s: %q accepted (err %v)", name, c.text, err)
				continue
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %q: %q does not say %q", name, c.text, err, c.want)
			}
		}
	}
}

// A driver declares its syntax; one that does not gets Strict.
type declares struct{}

func (declares) CriteriaSyntax() sqllex.Syntax { return sqllex.Oracle }

func TestFor(t *testing.T) {
	if got := sqllex.For(declares{}); len(got) != 1 || got[0].Name != "Oracle" {
		t.Errorf("For(a driver declaring Oracle) = %v", got)
	}
	if got := sqllex.For(struct{}{}); len(got) != len(sqllex.Strict) {
		t.Errorf("For(a driver declaring nothing) has %d readings, Strict %d", len(got), len(sqllex.Strict))
	}
}
