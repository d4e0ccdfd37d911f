package drivers

import (
	"github.com/loanq/loanq/drivers/engineio"
	"reflect"
	"strings"
	"testing"
)

type pairRow struct {
	ID   int64  `col:"id"`
	Name string `col:"name"`
}

// The output names of a select list: aliases, a column reference's last
// identifier, quoted names as written; subqueries, function calls and
// CASE expressions are one item; a RETURNING list wins over a SELECT.
func TestSelectColumns(t *testing.T) {
	for _, c := range []struct {
		name, text string
		want       []string
	}{
		{"plain and qualified", `SELECT id, t.name FROM t`, []string{"id", "name"}},
		{"aliases, with and without AS", `SELECT COUNT(*) AS n, MAX(x) hi, 'a' lit FROM t`, []string{"n", "hi", "lit"}},
		{"case is kept by quotes, folded otherwise", `SELECT ID, "Mixed" FROM t`, []string{"id", "Mixed"}},
		{"no FROM", `SELECT clock_timestamp() AS db_now`, []string{"db_now"}},
		{"commas and FROM inside parentheses", `SELECT (SELECT COUNT(*) FROM a WHERE b IN (1, 2)) AS x, EXTRACT(EPOCH FROM now()) AS y FROM t`, []string{"x", "y"}},
		{"a CASE with an alias", `SELECT CASE WHEN a THEN 1 ELSE 0 END AS free FROM t`, []string{"free"}},
		{"the outermost SELECT of a WITH", `WITH c AS (SELECT q AS z FROM t) SELECT c.z, 1 AS one FROM c`, []string{"z", "one"}},
		{"DISTINCT", `SELECT DISTINCT loan_id FROM w`, []string{"loan_id"}},
		{"strings and comments are not read", `SELECT 'a, b FROM' AS s, -- FROM, x
  v /* , w */ FROM t`, []string{"s", "v"}},
		{"RETURNING", `UPDATE t SET a = 1 RETURNING id, name`, []string{"id", "name"}},
		{"INSERT … SELECT … RETURNING", `INSERT INTO t (a) SELECT b FROM u RETURNING id AS new_id`, []string{"new_id"}},
		{"RETURNING … INTO", `INSERT INTO t (a) VALUES (1) RETURNING id INTO :1`, []string{"id"}},
		{"a cast needs an alias, then has it", `SELECT x::bigint AS x FROM t`, []string{"x"}},
	} {
		got, err := SelectColumns(c.text)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: SelectColumns(%q) = %q, %v; want %q", c.name, c.text, got, err, c.want)
		}
	}
	for _, bad := range []string{
		`SELECT * FROM t`, `SELECT COUNT(*) FROM t`, `SELECT x::bigint FROM t`, `SELECT a + b FROM t`,
		`SELECT CASE WHEN a THEN 1 END FROM t`, `SELECT 1 FROM t`, `SELECT NULL FROM t`, `UPDATE t SET a = 1`,
	} {
		if got, err := SelectColumns(bad); err == nil {
			t.Errorf("SelectColumns(%q) = %q, want an error", bad, got)
		}
	}
}

// A column missing, added, misnamed or out of order fails the compile, with
// the statement's name; so does a row type without col tags. A dialect's
// rendering is what is checked.
func TestQueryColumnsChecked(t *testing.T) {
	ok := &Query[engineio.NoParams, pairRow]{SQL: `SELECT t.id, t.name FROM t`}
	if err := ok.compile(dollar, "Test"); err != nil {
		t.Fatalf("matching columns: %v", err)
	}
	if ok.Text() != `SELECT t.id, t.name FROM t` || ok.Empty() {
		t.Errorf("text %q", ok.Text())
	}
	empty := &Query[engineio.NoParams, pairRow]{}
	if err := empty.compile(dollar, "Test"); err != nil || !empty.Empty() {
		t.Errorf("an empty statement: %v", err)
	}
	for _, c := range []struct {
		name, written, want string
		compile             func(string) error
	}{
		{"a column missing", `SELECT id FROM t`, "(id)",
			func(w string) error { return (&Query[engineio.NoParams, pairRow]{SQL: w}).compile(dollar, "Test") }},
		{"a column more", `SELECT id, name, extra FROM t`, "extra",
			func(w string) error { return (&Query[engineio.NoParams, pairRow]{SQL: w}).compile(dollar, "Test") }},
		{"columns out of order", `SELECT name, id FROM t`, "(name, id)",
			func(w string) error { return (&Query[engineio.NoParams, pairRow]{SQL: w}).compile(dollar, "Test") }},
		{"a misnamed column", `SELECT id, nmae FROM t`, "nmae",
			func(w string) error { return (&Query[engineio.NoParams, pairRow]{SQL: w}).compile(dollar, "Test") }},
		{"an unnamed column", `SELECT id, UPPER(name) FROM t`, "alias",
			func(w string) error { return (&Query[engineio.NoParams, pairRow]{SQL: w}).compile(dollar, "Test") }},
		{"SELECT *", `SELECT * FROM t`, "alias",
			func(w string) error { return (&Query[engineio.NoParams, pairRow]{SQL: w}).compile(dollar, "Test") }},
		{"a template that renders an unnamed column", `SELECT id, {{now}} FROM t`, "NOW",
			func(w string) error { return (&Query[engineio.NoParams, pairRow]{SQL: w}).compile(dollar, "Test") }},
		{"a row type without col tags", `SELECT id FROM t`, "col tag",
			func(w string) error {
				return (&Query[engineio.NoParams, struct{ ID int64 }]{SQL: w}).compile(dollar, "Test")
			}},
		{"a row type that is no struct", `SELECT id FROM t`, "not a struct",
			func(w string) error { return (&Query[engineio.NoParams, int64]{SQL: w}).compile(dollar, "Test") }},
		{"binds are still checked", `SELECT id, name FROM t WHERE x = :nope`, ":nope",
			func(w string) error { return (&Query[engineio.NoParams, pairRow]{SQL: w}).compile(dollar, "Test") }},
	} {
		err := c.compile(c.written)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "statement Test") {
			t.Errorf("%s: compile %q: %v, want an error naming the statement and %s", c.name, c.written, err, c.want)
		}
	}
}

// Build refuses a dialect override that drops a column's alias, naming the
// statement.
func TestBuildChecksColumns(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "statement ActiveCountsPending") {
			t.Errorf("Build with an unnamed column: %v", r)
		}
	}()
	Build(dollar, testCaps, func(s *Statements) {
		testOverride(s)
		s.ActiveCountsPending.SQL = `SELECT user_name, COUNT(*) FROM loanq_work WHERE task_id = :task_id GROUP BY user_name`
	})
}
