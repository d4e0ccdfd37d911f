package e2e

import (
	"context"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/testdb"
	"github.com/loanq/loanq/problem"
)

// injections are values a processor could type, each of which would change
// a statement that pasted it into SQL text.
var injections = []string{
	"1; DROP TABLE loanq_work--",
	"' OR '1'='1",
	"x'); DELETE FROM loanq_task; --",
	`"; DROP TABLE loanq_task; --`,
	`\'; DROP TABLE loan; -- x`, // MySQL's backslash escape; "-- " starts its comment (a trailing space would be refused as a user name)
	"Robert'); DROP TABLE loanq_work_request;--",
	"admin' --",
	"%s %d %v %%",
	"$1 :1 ?",
	"ünïcødé ✓",
}

// Every value that comes from a processor reaches the database as a bind
// parameter (issue 6 part 5). Injection-like user names are served, stored
// verbatim in loanq_work_request.user_name and loanq_work.user_name, see
// only their own pipeline (a tautology pasted into the pipeline query would
// show everyone's) and disposition their own loans; injection-like task
// names, loan ids and request ids are refused as bad input or unknown; and
// afterwards every table is intact and the audit clean.
func TestInjectionTreatedAsData(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, e := prepare(t, dsn, 40)
		ctx := context.Background()
		mustOK(t, dsn, "admin", "task", "create", "t", "--where", "eligible = 1", "--order", "priority")
		// A valid task name can carry SQL comment dashes and dots.
		mustOK(t, dsn, "admin", "task", "create", "loanq_task--", "--where", "eligible = 1", "--order", "priority")
		other := decode(t, mustOK(t, dsn, "bystander", "--output", "json", "work", "get", "t", "--count", "2"))

		// User names on the command line.
		for _, user := range injections {
			got := decode(t, mustOK(t, dsn, user, "--output", "json", "work", "get", "t", "--count", "1"))
			if got.User != user || got.Status != "assigned" || len(got.Loans) != 1 {
				t.Fatalf("user %q: %+v", user, got)
			}
			var stored string
			if err := e.DB.QueryRow(testdb.Rebind(d, "SELECT user_name FROM loanq_work_request WHERE id = ?"), got.RequestID).Scan(&stored); err != nil {
				t.Fatal(err)
			}
			if stored != user {
				t.Fatalf("user %q stored as %q", user, stored)
			}
			if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work WHERE user_name = ? AND loan_id = ?", user, got.Loans[0]); n != 1 {
				t.Fatalf("user %q: its work row is not stored under its name", user)
			}
			if p := pipelineLoans(t, dsn, user, "t"); len(p) != 1 || p[0] != got.Loans[0] {
				t.Fatalf("pipeline of %q: %v, want only %v", user, p, got.Loans)
			}
			// It cannot disposition someone else's loan, and can its own.
			if r := loanq(t, dsn, user, "disposition", "t", strconv.FormatInt(other.Loans[0], 10), "complete"); r.code != 2 {
				t.Fatalf("user %q dispositioned a bystander's loan: exit %d %s", user, r.code, r.stderr)
			}
			mustOK(t, dsn, user, "disposition", "t", strconv.FormatInt(got.Loans[0], 10), "never")
			// The engine API takes the same value as a user.
			items, err := e.Pipeline(ctx, user, "")
			if err != nil || len(items) != 0 {
				t.Fatalf("engine pipeline of %q after its disposition: %v %v", user, items, err)
			}
		}

		// Task names, loan ids and request ids on the command line.
		for _, v := range injections {
			for _, args := range [][]string{
				{"work", "get", v},
				{"work", "status", v},
				{"disposition", "t", v, "complete"},
				{"disposition", v, "1", "complete"},
				{"pipeline", "--task", v},
				{"task", "show", v},
			} {
				if r := loanq(t, dsn, "bystander", args...); r.code != 2 {
					t.Fatalf("loanq %q: exit %d, want 2\n%s%s", args, r.code, r.stdout, r.stderr)
				}
			}
		}
		// Task names through the engine API: refused as bad input, nothing run.
		for _, v := range injections {
			if _, err := e.Get(ctx, v, "bystander", 1, dispatch.GetOptions{NoWait: true}); problem.KindOf(err) != problem.Usage {
				t.Fatalf("engine Get of task %q: %v, want bad input", v, err)
			}
			if _, err := e.Dispose(ctx, v, 1, "bystander", "complete", 0, false); problem.KindOf(err) != problem.Usage {
				t.Fatalf("engine Dispose in task %q: %v, want bad input", v, err)
			}
			if _, err := e.Pipeline(ctx, "bystander", v); problem.KindOf(err) != problem.Usage {
				t.Fatalf("engine Pipeline of task %q: %v, want bad input", v, err)
			}
		}
		// The task whose name looks like SQL works like any other.
		got := decode(t, mustOK(t, dsn, "' OR '1'='1", "--output", "json", "work", "get", "loanq_task--", "--count", "3"))
		if got.Status != "assigned" || len(got.Loans) != 3 || got.Task != "loanq_task--" {
			t.Fatalf("work get on task loanq_task--: %+v", got)
		}
		if _, err := e.Status(ctx, got.RequestID, false, dispatch.GetOptions{}); err != nil {
			t.Fatal(err)
		}

		// Every table intact, every row accounted for.
		n := int64(len(injections))
		for q, want := range map[string]int64{
			"SELECT COUNT(*) FROM loan":                                     40,
			"SELECT COUNT(*) FROM loanq_task":                               2,
			"SELECT COUNT(*) FROM loanq_work_request":                       n + 2,
			"SELECT COUNT(*) FROM loanq_work":                               n + 2 + 3,
			"SELECT COUNT(*) FROM loanq_work WHERE disposition = 'never'":   n,
			"SELECT COUNT(*) FROM loanq_work WHERE user_name = 'bystander'": 2,
		} {
			if got := testdb.Int(t, d, e.DB, q); got != want {
				t.Errorf("%s: %d, want %d", q, got, want)
			}
		}
		if got := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work WHERE user_name = ?", "' OR '1'='1"); got != 4 {
			t.Errorf("work rows of user ' OR '1'='1: %d, want 4", got)
		}
		audit(t, e)
	})
}

// bindCounts is how many distinct bind parameters each statement takes, from
// the comments of drivers.Statements.
var bindCounts = map[string]int{
	"Now": 0, "TaskInsert": 11, "TaskByName": 1, "TaskByID": 1, "TaskList": 0, "TaskRuns": 1,
	"RequestInsert": 3, "RequestByID": 1, "RequestsPending": 1, "RequestFinish": 3, "RequestLoans": 1,
	"LockSkip": 1, "LockNoWait": 1, "LockWait": 1,
	"LeaseAcquire": 3, "LeaseToken": 2, "LeaseFenceRelease": 3, "LeaseRelease": 3,
	"ActiveCountForUser": 2, "WorkInsert": 4, "QueryRunInsert": 8,
	"ActiveWork": 2, "LastWork": 2, "Dispose": 4, "Pipeline": 3,
	"HoldMeasured": 1, "HoldLimitSet": 2, "HoldLimitReset": 0,
}

var (
	quoted      = regexp.MustCompile(`'(?:[^']|'')*'`)
	pgBind      = regexp.MustCompile(`\$(\d+)`)
	oracleBind  = regexp.MustCompile(`:(\d+)`)
	strftimeFmt = regexp.MustCompile(`^'(%[YmdHMfS]|[-:TZ ])*'$`)
)

// Every fixed statement of every dialect takes its values as bind
// parameters: the statements contain no fmt verbs and no quoted literal but
// fixed words (and SQLite's strftime formats), and each has exactly the
// binds its field documents (statements not listed here: the same number in
// every dialect), in the dialect's placeholder syntax.
func TestStatementsUseBinds(t *testing.T) {
	checked := 0
	seenCounts := map[string]int{}
	for _, name := range []string{"postgres", "mysql", "sqlite", "oracle"} {
		d, err := drivers.ByName(name)
		if err != nil {
			t.Logf("%s: not in this build (%v)", name, err)
			continue
		}
		for _, st := range d.Statements().List() {
			want, documented := bindCounts[st.Field]
			if !documented {
				// A statement this test does not list: its bind count must be
				// the same in every dialect (the first one seen sets it).
				if n, ok := seenCounts[st.Field]; ok {
					want = n
				} else {
					want = -1
				}
			}
			if st.SQL == "" {
				continue // not available on this dialect (SQLite's row locks)
			}
			for _, lit := range quoted.FindAllString(st.SQL, -1) {
				if strings.Contains(lit, "%") && !(name == "sqlite" && strftimeFmt.MatchString(lit)) {
					t.Errorf("%s %s: literal %s carries a %% verb", name, st.Field, lit)
				}
			}
			bare := quoted.ReplaceAllString(st.SQL, "''")
			if strings.Contains(bare, "%") {
				t.Errorf("%s %s: a %% outside a literal (a fmt verb?):\n%s", name, st.Field, st.SQL)
			}
			var got int
			switch name {
			case "postgres":
				got = distinct(pgBind.FindAllStringSubmatch(bare, -1))
			case "oracle":
				got = distinct(oracleBind.FindAllStringSubmatch(bare, -1))
				if got == want+1 && strings.Contains(bare, "RETURNING") {
					got = want // RETURNING id INTO :n is the output bind of InsertReturningID
				}
			default:
				got = strings.Count(bare, "?")
			}
			if want < 0 {
				seenCounts[st.Field] = got
				want = got
			}
			if got != want {
				t.Errorf("%s %s: %d binds, want %d:\n%s", name, st.Field, got, want, st.SQL)
			}
			checked++
		}
	}
	t.Logf("%d statements checked", checked)
	if checked == 0 {
		t.Fatal("no statements checked")
	}
}

func distinct(m [][]string) int {
	seen := map[string]bool{}
	for _, x := range m {
		seen[x[1]] = true
	}
	return len(seen)
}

// The source side of the same guarantee: the statements of every driver's
// sql.go are built from string literals and constants only (never
// fmt.Sprintf or a variable), and every query the engine sends
// (package dispatch) is a fixed statement, the criteria query built from the
// task (admin SQL by design, see docs), an audit query, or one of the
// portable per-task statements of drivers/report.go (tq.…) — with every value
// passed as an argument.
func TestSQLSourcesUseBinds(t *testing.T) {
	files, _ := filepath.Glob("../drivers/*/sql.go")
	driverFiles := len(files)
	if len(files) < 3 {
		t.Fatalf("found %d drivers/*/sql.go", len(files))
	}
	for _, f := range files {
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		consts := map[string]bool{}
		var statements *ast.CompositeLit
		for _, decl := range file.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range g.Specs {
				vs, ok := spec.(*ast.ValueSpec)
				if !ok {
					continue
				}
				for i, n := range vs.Names {
					if g.Tok == token.CONST {
						consts[n.Name] = true
						checkConstExpr(t, fset, consts, vs.Values[i])
					}
					if g.Tok == token.VAR && n.Name == "statements" {
						statements, _ = vs.Values[i].(*ast.CompositeLit)
					}
				}
			}
		}
		if statements == nil {
			t.Errorf("%s: no `var statements = drivers.Statements{…}`", f)
			continue
		}
		for _, el := range statements.Elts {
			kv := el.(*ast.KeyValueExpr)
			checkConstExpr(t, fset, consts, kv.Value)
		}
	}

	allowed := regexp.MustCompile(`^(e\.sql\(\)\.[A-Z][A-Za-z]*|e\.sql\(\)\.Lock\(strategy\)|e\.sql\(\)\.BoundedLock\(seconds\)|e\.Driver\.CriteriaQuery\([a-z]+\.criteria\(\)\)|q\.SQL|tq\.[A-Z][A-Za-z]*)$`)
	files, _ = filepath.Glob("../dispatch/*.go")
	calls := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			arg := -1
			switch sel.Sel.Name {
			case "ExecContext", "QueryContext", "QueryRowContext", "Exec", "Query", "QueryRow":
				arg = 1
				if !strings.HasSuffix(sel.Sel.Name, "Context") {
					arg = 0
				}
			case "InsertReturningID":
				arg = 2
			}
			if arg < 0 || len(call.Args) <= arg {
				return true
			}
			var b strings.Builder
			_ = printer.Fprint(&b, fset, call.Args[arg])
			if !allowed.MatchString(b.String()) {
				t.Errorf("%s: %s sends %s: not a fixed statement", fset.Position(call.Pos()), sel.Sel.Name, b.String())
			}
			calls++
			return true
		})
	}
	t.Logf("%d driver files and %d engine query calls checked", driverFiles, calls)
	if calls < 20 {
		t.Fatalf("only %d query calls found in package dispatch", calls)
	}
}

// checkConstExpr fails unless e is built of string literals and constants.
func checkConstExpr(t *testing.T, fset *token.FileSet, consts map[string]bool, e ast.Expr) {
	t.Helper()
	switch x := e.(type) {
	case *ast.BasicLit:
	case *ast.Ident:
		if !consts[x.Name] {
			t.Errorf("%s: statement uses %s, which is not a constant", fset.Position(x.Pos()), x.Name)
		}
	case *ast.CallExpr:
		// A local helper applied to literals (Oracle's msInterval(":2")) is
		// still a fixed string.
		if _, local := x.Fun.(*ast.Ident); !local {
			t.Errorf("%s: a statement is built by a call to %T (fmt.Sprintf?)", fset.Position(x.Pos()), x.Fun)
		}
		for _, a := range x.Args {
			if _, lit := a.(*ast.BasicLit); !lit {
				t.Errorf("%s: a statement helper is called with a non-literal argument", fset.Position(a.Pos()))
			}
		}
	case *ast.ParenExpr:
		checkConstExpr(t, fset, consts, x.X)
	case *ast.BinaryExpr:
		if x.Op != token.ADD {
			t.Errorf("%s: unexpected operator %s in a statement", fset.Position(x.Pos()), x.Op)
		}
		checkConstExpr(t, fset, consts, x.X)
		checkConstExpr(t, fset, consts, x.Y)
	default:
		t.Errorf("%s: a statement is built by %T, not from literals and constants", fset.Position(e.Pos()), e)
	}
}
