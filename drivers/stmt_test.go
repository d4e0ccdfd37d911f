package drivers

import (
	"context"
	"errors"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/loankey"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// fakeDialect writes each piece of vocabulary as a recognisable word, with
// $n placeholders (numbered) or ? (unnumbered). It is string machinery only:
// InsertID is never reached by these tests.
type fakeDialect struct{ question bool }

func (f fakeDialect) Placeholder(n int) string {
	if f.question {
		return "?"
	}
	return "$" + strconv.Itoa(n)
}
func (fakeDialect) Now() string                                 { return "NOW()" }
func (fakeDialect) NowPlusMillis(ms string) string              { return "PLUS(" + ms + ")" }
func (fakeDialect) NowMinusMillis(ms string) string             { return "MINUS(" + ms + ")" }
func (fakeDialect) SecondsSince(ts string) string               { return "AGE(" + ts + ")" }
func (fakeDialect) MillisSince(ts string) string                { return "AGEMS(" + ts + ")" }
func (fakeDialect) SecondsBetween(a, b string) string           { return "BETWEEN(" + a + "," + b + ")" }
func (fakeDialect) StartOfToday() string                        { return "TODAY()" }
func (fakeDialect) Limit(n string) string                       { return "LIMIT " + n }
func (fakeDialect) Integer(expr string) string                  { return "INT(" + expr + ")" }
func (fakeDialect) InIDs(e, ids string) string                  { return e + " IN IDS(" + ids + ")" }
func (fakeDialect) KeyAsText(e string) string                   { return "TEXT(" + e + ")" }
func (fakeDialect) InKeys(e, ids string, _ loankey.Kind) string { return e + " IN KEYS(" + ids + ")" }
func (fakeDialect) InLoanIDs(e, ids string) string              { return e + " IN LOANIDS(" + ids + ")" }
func (fakeDialect) AssignmentsFromJSON(l string) string         { return "ASSIGNMENTS(" + l + ")" }
func (fakeDialect) SkipActiveConflict() string                  { return "" }
func (fakeDialect) ReturningID() string                         { return " RETURNING id INTO :returned_id" }
func (fakeDialect) TextLiteral(s string) string                 { return "TEXT'" + s + "'" }
func (fakeDialect) InsertID(context.Context, Querier, string, []any) (int64, error) {
	return 0, errors.New("fakeDialect runs nothing")
}

var (
	dollar   = fakeDialect{}
	question = fakeDialect{question: true}
)

func TestNumberBinds(t *testing.T) {
	for _, c := range []struct {
		name, in string
		d        Dialect
		out      string
		names    []string
	}{
		{"each occurrence its own placeholder", `SELECT :a, :b WHERE x = :a`, dollar,
			`SELECT $1, $2 WHERE x = $3`, []string{"a", "b", "a"}},
		{"question marks", `SELECT :a, :b WHERE x = :a`, question,
			`SELECT ?, ? WHERE x = ?`, []string{"a", "b", "a"}},
		{"a bind first", `:first + 1`, dollar, `$1 + 1`, []string{"first"}},
		{"quoted text is not scanned", `SELECT ':a', 'it''s :b', "c:d" FROM t WHERE e = :e`, dollar,
			`SELECT ':a', 'it''s :b', "c:d" FROM t WHERE e = $1`, []string{"e"}},
		{"casts", `SELECT :ms::bigint, x::text`, dollar, `SELECT $1::bigint, x::text`, []string{"ms"}},
		{"PL/SQL assignment", `BEGIN l_n := :n; END;`, dollar, `BEGIN l_n := $1; END;`, []string{"n"}},
		{"numbered binds stay", `BEGIN p(:1, :2); END;`, dollar, `BEGIN p(:1, :2); END;`, nil},
		{"identifiers with $ and colons inside words", `SELECT banner FROM v$version WHERE a:b = :c$d`, dollar,
			`SELECT banner FROM v$version WHERE a:b = $1`, []string{"c$d"}},
		{"a name runs to the end of its identifier", `x IN (:ids) AND y=:user_name2`, question,
			`x IN (?) AND y=?`, []string{"ids", "user_name2"}},
		{"an unterminated quote ends the text", `SELECT 'x :a`, dollar, `SELECT 'x :a`, nil},
	} {
		out, names := numberBinds(c.d, c.in)
		if out != c.out || !reflect.DeepEqual(names, c.names) {
			t.Errorf("%s: numberBinds(%q) = %q %q, want %q %q", c.name, c.in, out, names, c.out, c.names)
		}
	}
}

type pairParams struct {
	// Declared in the other order from the statement's binds.
	Count int    `bind:"count"`
	Name  string `bind:"name"`
}

func compiled[P any](t *testing.T, d Dialect, written string) *Stmt[P] {
	t.Helper()
	s := &Stmt[P]{SQL: written}
	if err := s.compile(d, "Test"); err != nil {
		t.Fatalf("compile %q: %v", written, err)
	}
	return s
}

// The binds are taken from the parameters by name, in the statement's
// order, whatever the order of the struct's fields; a name used twice is
// bound twice.
func TestArgsFollowTheNames(t *testing.T) {
	s := compiled[pairParams](t, dollar, `UPDATE t SET n = :name WHERE c < :count AND (:name = '' OR m = :name)`)
	if want := `UPDATE t SET n = $1 WHERE c < $2 AND ($3 = '' OR m = $4)`; s.Text() != want {
		t.Errorf("text %q, want %q", s.Text(), want)
	}
	got := s.Args(pairParams{Count: 3, Name: "ana"})
	if want := []any{"ana", 3, "ana", "ana"}; !reflect.DeepEqual(got, want) {
		t.Errorf("args %v, want %v", got, want)
	}
	if s.Empty() {
		t.Error("a compiled statement reports Empty")
	}
	if got := compiled[engineio.NoParams](t, question, `SELECT 1`).Args(engineio.NoParams{}); len(got) != 0 {
		t.Errorf("NoParams binds %v", got)
	}
}

func TestCompileErrors(t *testing.T) {
	for _, c := range []struct {
		name, written, want string
		compile             func(written string) error
	}{
		{"a bind name the parameters do not have", `SELECT :name, :count, :nmae`, ":nmae",
			func(w string) error { return (&Stmt[pairParams]{SQL: w}).compile(dollar, "Test") }},
		{"a parameter field the statement does not use", `SELECT :name`, `"count"`,
			func(w string) error { return (&Stmt[pairParams]{SQL: w}).compile(dollar, "Test") }},
		{"a field without a bind tag", `SELECT :x`, "no bind tag",
			func(w string) error {
				return (&Stmt[struct {
					X int `bind:"x"`
					Y int
				}]{SQL: w}).compile(dollar, "Test")
			}},
		{"parameters that are not a struct", `SELECT :x`, "not a struct",
			func(w string) error { return (&Stmt[int]{SQL: w}).compile(dollar, "Test") }},
		{"an unknown template function", `SELECT {{nope}}`, "nope",
			func(w string) error { return (&Stmt[engineio.NoParams]{SQL: w}).compile(dollar, "Test") }},
		{"a template syntax error", `SELECT {{now`, "Test",
			func(w string) error { return (&Stmt[engineio.NoParams]{SQL: w}).compile(dollar, "Test") }},
	} {
		err := c.compile(c.written)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "Test") {
			t.Errorf("%s: compile %q: %v, want an error naming the statement and %s", c.name, c.written, err, c.want)
		}
	}
}

type templateParams struct {
	MS  int64  `bind:"ms"`
	IDs string `bind:"ids"`
	N   int    `bind:"n"`
}

// Each template function is the dialect's word for it, its arguments placed
// as given; binds inside them are numbered with the rest, after rendering.
func TestTemplateFunctions(t *testing.T) {
	s := compiled[templateParams](t, dollar, `SELECT {{now}}, {{nowPlusMs ":ms"}}, {{nowMinusMs "5"}}, {{age "a.t"}}, {{ageMs "a.t"}},
  {{secondsBetween "a.t" "b.t"}}, {{startOfToday}}, {{integer "AVG(x)"}}
FROM t WHERE {{inIDs "id" ":ids"}} {{limit ":n"}}`)
	want := `SELECT NOW(), PLUS($1), MINUS(5), AGE(a.t), AGEMS(a.t),
  BETWEEN(a.t,b.t), TODAY(), INT(AVG(x))
FROM t WHERE id IN IDS($2) LIMIT $3`
	if s.Text() != want {
		t.Errorf("rendered\n%s\nwant\n%s", s.Text(), want)
	}
	if got := s.Args(templateParams{MS: 7, IDs: "[1,2]", N: 10}); !reflect.DeepEqual(got, []any{int64(7), "[1,2]", 10}) {
		t.Errorf("args %v", got)
	}

	// returningID's :returned_id is the dialect's out bind: it has a
	// placeholder but takes no field of the parameters.
	ins := compiled[pairParams](t, dollar, `INSERT INTO t (name, count) VALUES (:name, :count){{returningID}}`)
	if want := `INSERT INTO t (name, count) VALUES ($1, $2) RETURNING id INTO $3`; ins.Text() != want {
		t.Errorf("insert %q, want %q", ins.Text(), want)
	}
	if got := ins.Args(pairParams{Count: 1, Name: "x"}); !reflect.DeepEqual(got, []any{"x", 1}) {
		t.Errorf("insert args %v, want the parameters alone", got)
	}
}

// A statement a dialect does not send, or one never compiled, fails when
// run, before anything reaches the database (q is never called).
func TestUnavailableStatement(t *testing.T) {
	ctx := context.Background()
	empty := compiled[engineio.NoParams](t, dollar, " \n ")
	if !empty.Empty() || empty.Text() != "" {
		t.Fatalf("blank statement: Empty %v, text %q", empty.Empty(), empty.Text())
	}
	for what, s := range map[string]*Stmt[engineio.NoParams]{"not available": empty, "not compiled": {SQL: "SELECT 1"}} {
		if _, err := s.Exec(ctx, nil, engineio.NoParams{}); err == nil || !strings.Contains(err.Error(), what) {
			t.Errorf("Exec: %v, want %q", err, what)
		}
		if _, err := s.Query(ctx, nil, engineio.NoParams{}); err == nil || !strings.Contains(err.Error(), what) {
			t.Errorf("Query: %v, want %q", err, what)
		}
		var n int
		if err := s.QueryRow(ctx, nil, engineio.NoParams{}).Scan(&n); err == nil || !strings.Contains(err.Error(), what) {
			t.Errorf("QueryRow: %v, want %q", err, what)
		}
		if _, err := s.InsertID(ctx, nil, engineio.NoParams{}); err == nil || !strings.Contains(err.Error(), what) {
			t.Errorf("InsertID: %v, want %q", err, what)
		}
	}
}

func TestMustStmt(t *testing.T) {
	s := MustStmt[pairParams](question, "Alt", `SET x = :count, y = :name`)
	if s.Text() != `SET x = ?, y = ?` || !reflect.DeepEqual(s.Args(pairParams{Count: 1, Name: "n"}), []any{1, "n"}) {
		t.Errorf("MustStmt: %q %v", s.Text(), s.Args(pairParams{Count: 1, Name: "n"}))
	}
	for _, bad := range []string{`SET x = :count`, `SET x = :count, y = :name, z = :other`, `SET x = {{now`} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), "Alt") {
					t.Errorf("MustStmt(%q) did not panic naming the statement: %v", bad, r)
				}
			}()
			MustStmt[pairParams](question, "Alt", bad)
		}()
	}
}

// compile takes run-time text as final: nothing in it is a template or a
// bind name, and the binds are the names given, in order.
func TestCompileRunTimeText(t *testing.T) {
	text := `SELECT id FROM loan WHERE note <> ':x' AND kind::text = '{{now}}' AND task = $2 LIMIT $1`
	s, err := compile[engineio.CriteriaParams](dollar, "Crit", text, "limit", "task_id")
	if err != nil {
		t.Fatal(err)
	}
	if s.Text() != text {
		t.Errorf("text changed: %q", s.Text())
	}
	if got := s.Args(engineio.CriteriaParams{TaskID: 9, Limit: 4}); !reflect.DeepEqual(got, []any{4, int64(9)}) {
		t.Errorf("args %v, want limit then task id", got)
	}
	if _, err := compile[engineio.CriteriaParams](dollar, "Crit", text, "limit", "taskid"); err == nil || !strings.Contains(err.Error(), "taskid") {
		t.Errorf("an unknown bind name: %v", err)
	}

	// The criteria query: the task id is the first placeholder, the limit
	// the second, ending the query.
	q := CriteriaQuery(dollar, CriteriaSource{Source: "loan", Key: "id", Where: "a = 'x:y'", Order: "priority"})
	if !strings.HasSuffix(q.Text(), "\nLIMIT $2") || !strings.Contains(q.Text(), "w.task_id = $1") ||
		!strings.Contains(q.Text(), "a = 'x:y'") || !strings.Contains(q.Text(), "ORDER BY priority, src.id") {
		t.Errorf("criteria query:\n%s", q.Text())
	}
	if got := q.Args(engineio.CriteriaParams{TaskID: 5, Limit: 3}); !reflect.DeepEqual(got, []any{int64(5), 3}) {
		t.Errorf("criteria args %v, want task id then limit", got)
	}
}

// Every portable statement compiles with its parameters: each bind name is a
// field of its type and each field is bound.
func TestPortableStatementsCompile(t *testing.T) {
	for _, d := range []Dialect{dollar, question} {
		st := Build(d, testCaps, testOverride)
		if n := len(st.List()); n < 60 {
			t.Errorf("only %d statements", n)
		}
		if got := st.BoundedLock(7).Text(); !strings.Contains(got, "FOR UPDATE") || strings.Contains(got, "{wait_s}") {
			t.Errorf("BoundedLock: %q", got)
		}
		if st.Lock(Lease) != nil || st.Lock(Skip) != &st.LockSkip {
			t.Error("Lock picks the wrong statement")
		}
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "missing: ") || !strings.Contains(r.(string), "TaskInsert") {
			t.Errorf("Build with a required statement missing: %v", r)
		}
	}()
	Build(dollar, testCaps, func(s *Statements) { testOverride(s); s.TaskInsert.SQL = "" })
}

// TestRenderCallsAgreesWithTemplate: renderTemplate's own expansion of
// {{word "arg" …}} (renderCalls) gives what text/template gives, for every
// template action written anywhere in loanq's Go files, and handles every
// one of the simple form itself (the others go to text/template).
func TestRenderCallsAgreesWithTemplate(t *testing.T) {
	actions := map[string]bool{}
	re := regexp.MustCompile(`\{\{[^{}\n]*\}\}`)
	err := filepath.WalkDir("..", func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && (e.Name() == ".git" || e.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if e.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, a := range re.FindAllString(string(b), -1) {
			actions[a] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	simple := regexp.MustCompile(`^\{\{(now|nowPlusMs|nowMinusMs|age|secondsBetween|startOfToday|limit|integer|inIDs|inLoanIDs|assignmentsFromJSON|returningID|skipActiveConflict|requestAlive|requestStale)( "[^"\\]*")*\}\}$`)
	handled := 0
	for a := range actions {
		for _, d := range []Dialect{fakeDialect{}, fakeDialect{question: true}} {
			written := "SELECT " + a + " FROM t"
			want, werr := renderWithTemplate(d, "t", written)
			got, ok := renderCalls(d, written)
			if simple.MatchString(a) && werr == nil && !ok {
				t.Errorf("%s: renderCalls left it to text/template", a)
			}
			if !ok {
				continue
			}
			handled++
			if werr != nil {
				t.Errorf("%s: renderCalls gave %q, text/template an error: %v", a, got, werr)
			} else if got != want {
				t.Errorf("%s: renderCalls gave %q, text/template %q", a, got, want)
			}
		}
	}
	if handled < 40 {
		t.Errorf("only %d of the %d actions found were rendered by renderCalls: is the walk reading loanq's files?", handled, len(actions))
	}
	// What renderCalls leaves to text/template still renders, or fails, as before.
	for _, written := range []string{`{{- now}}`, `{{limit "1" "2"}}`, `{{nope}}`, `{{limit "}}"}}`, "{{limit `5`}}", `{{ now }}`} {
		want, werr := renderWithTemplate(fakeDialect{}, "t", written)
		got, gerr := renderTemplate(fakeDialect{}, "t", written)
		if got != want || (werr == nil) != (gerr == nil) {
			t.Errorf("%s: renderTemplate gave %q, %v; text/template %q, %v", written, got, gerr, want, werr)
		}
	}
}

// BenchmarkBuild is what a loanq process pays, in CPU, for the engine's
// statements at its first database call (drivers.BuildOnce): every command
// is a process of its own (BENCHMARKS.md, "Start-up").
func BenchmarkBuild(b *testing.B) {
	for b.Loop() {
		Build(dollar, testCaps, testOverride)
	}
}
