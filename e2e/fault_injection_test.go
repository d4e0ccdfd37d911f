package e2e

import (
	"context"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/printer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/loanq/loanq/bench"
	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/testkit/testdb"
	"github.com/loanq/loanq/problem"

	// The features' statement catalogues (drivers.Catalogue) that no test
	// of this package imports otherwise, so that the checks below see
	// every statement loanq sends.
	_ "github.com/loanq/loanq/dashboard"
	_ "github.com/loanq/loanq/namedlock"
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
	t.Parallel()
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
			if n := testdb.Int(t, d, e.DB, "SELECT COUNT(*) FROM loanq_work WHERE user_name = ? AND loan_id = ?", user, fmt.Sprint(got.Loans[0])); n != 1 {
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
			if _, err := e.Dispose(ctx, v, "1", "bystander", "complete", 0, false); problem.KindOf(err) != problem.Usage {
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

var (
	quoted      = regexp.MustCompile(`'(?:[^']|'')*'`)
	pgBind      = regexp.MustCompile(`\$\d+`)
	oracleBind  = regexp.MustCompile(`:\d+`)
	strftimeFmt = regexp.MustCompile(`^'(%[YmdHMfS]|[-:TZ ])*'$`)
)

// Every fixed statement of every dialect takes its values as bind
// parameters: the statements contain no fmt verbs and no quoted literal but
// fixed words (and SQLite's strftime formats), and the placeholders in each
// are exactly the binds its typed parameters supply (Oracle's RETURNING …
// INTO adds the out bind of InsertID): no placeholder written by hand
// beside the named binds, which a call would leave unbound.
func TestStatementsUseBinds(t *testing.T) {
	t.Parallel()
	checked := 0
	for _, name := range []string{"postgres", "mysql", "sqlite", "oracle"} {
		d, err := drivers.ByName(name)
		if err != nil {
			t.Logf("%s: not in this build (%v)", name, err)
			continue
		}
		// The engine's statements, then loanq bench's own catalogue, then
		// every feature's (drivers.Catalogue).
		bc, err := bench.For(d)
		if err != nil {
			t.Fatal(err)
		}
		catalogues := []any{d.Statements(), &bc.Statements}
		for _, c := range drivers.Catalogues() {
			cat, err := c.Compiled(d)
			if err != nil {
				t.Fatal(err)
			}
			catalogues = append(catalogues, cat)
		}
		for _, catalogue := range catalogues {
			all := reflect.ValueOf(catalogue).Elem()
			for i := 0; i < all.NumField(); i++ {
				field := all.Type().Field(i).Name
				stmt := all.Field(i).Addr()
				text := stmt.MethodByName("Text").Call(nil)[0].String()
				if text == "" {
					continue // not sent on this dialect (SQLite's row locks)
				}
				argsOf := stmt.MethodByName("Args")
				want := argsOf.Call([]reflect.Value{reflect.Zero(argsOf.Type().In(0))})[0].Len()
				for _, lit := range quoted.FindAllString(text, -1) {
					if strings.Contains(lit, "%") && !(name == "sqlite" && strftimeFmt.MatchString(lit)) {
						t.Errorf("%s %s: literal %s carries a %% verb", name, field, lit)
					}
				}
				bare := quoted.ReplaceAllString(text, "''")
				if strings.Contains(bare, "%") {
					t.Errorf("%s %s: a %% outside a literal (a fmt verb?):\n%s", name, field, text)
				}
				var got int
				switch name {
				case "postgres":
					got = len(pgBind.FindAllString(bare, -1))
				case "oracle":
					got = len(oracleBind.FindAllString(bare, -1))
					if got == want+1 && strings.Contains(bare, "RETURNING id INTO") {
						got = want // the out bind of InsertID
					}
				default:
					got = strings.Count(bare, "?")
				}
				if got != want {
					t.Errorf("%s %s: %d placeholders, its parameters bind %d:\n%s", name, field, got, want, text)
				}
				checked++
			}
		}
	}
	t.Logf("%d statements checked", checked)
	if checked == 0 {
		t.Fatal("no statements checked")
	}
}

// The source side of the same guarantee: the portable statements
// (drivers/portable.go) and every driver's overrides and dialect
// vocabulary (drivers/*/sql.go) are built from string literals and
// constants only (never fmt.Sprintf or a variable), and every query the
// engine sends (package dispatch) is a typed statement of the driver — a
// fixed one, or the criteria query built from the task (admin SQL by
// design, see docs) — given its values as a parameter struct, or an audit
// query, which binds nothing.
func TestSQLSourcesUseBinds(t *testing.T) {
	t.Parallel()
	portable := parseGo(t, "../drivers/portable.go", true)
	found := 0
	for _, decl := range portable.file.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "Portable" {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			if kv, ok := n.(*ast.KeyValueExpr); ok && isIdent(kv.Key, "SQL") {
				checkConstExpr(t, portable.fset, portable.consts, nil, kv.Value)
				found++
			}
			return true
		})
	}
	if found < 50 {
		t.Fatalf("drivers/portable.go: only %d Stmt{SQL: …} found in func Portable", found)
	}

	files, _ := filepath.Glob("../drivers/*/sql.go")
	driverFiles := len(files)
	if len(files) < 3 {
		t.Fatalf("found %d drivers/*/sql.go", len(files))
	}
	for _, f := range files {
		src := parseGo(t, f, true)
		var build *ast.FuncLit
		methods, overrides := 0, 0
		for _, decl := range src.file.Decls {
			switch d := decl.(type) {
			case *ast.GenDecl:
				if d.Tok != token.VAR {
					continue
				}
				for _, spec := range d.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if n.Name == "catalogueSQL" {
							overrides++
						}
						if i >= len(vs.Values) {
							continue
						}
						if call, ok := vs.Values[i].(*ast.CallExpr); ok && n.Name == "statements" && len(call.Args) == 3 {
							build, _ = call.Args[2].(*ast.FuncLit)
						}
						// What the dialect says its own way in the features'
						// catalogues: catalogue → field → text.
						if n.Name == "catalogueSQL" {
							ast.Inspect(vs.Values[i], func(n ast.Node) bool {
								if kv, ok := n.(*ast.KeyValueExpr); ok {
									if _, inner := kv.Value.(*ast.CompositeLit); !inner {
										checkConstExpr(t, src.fset, src.consts, nil, kv.Value)
									}
								}
								return true
							})
						}
					}
				}
			case *ast.FuncDecl:
				// The dialect's vocabulary: SQL text from literals, constants
				// and its arguments (SQL text of the written statements).
				if d.Recv == nil || d.Type.Results == nil || len(d.Type.Results.List) != 1 || !isIdent(d.Type.Results.List[0].Type, "string") {
					continue
				}
				args := map[string]bool{}
				for _, p := range d.Type.Params.List {
					for _, n := range p.Names {
						args[n.Name] = true
					}
				}
				methods++
				ast.Inspect(d.Body, func(n ast.Node) bool {
					if r, ok := n.(*ast.ReturnStmt); ok {
						for _, e := range r.Results {
							checkConstExpr(t, src.fset, src.consts, args, e)
						}
					}
					return true
				})
			}
		}
		if build == nil {
			t.Errorf("%s: no `var statements = drivers.Build(dialect{}, capabilities, func(s *drivers.Statements) {…})`", f)
			continue
		}
		if methods < 10 {
			t.Errorf("%s: only %d dialect methods returning SQL found", f, methods)
		}
		if overrides != 1 {
			t.Errorf("%s: no `var catalogueSQL` (the overrides of the features' catalogues, drivers.Overrides)", f)
		}
		// Every assignment of the overrides sets a statement's SQL.
		ast.Inspect(build.Body, func(n ast.Node) bool {
			if as, ok := n.(*ast.AssignStmt); ok && as.Tok == token.ASSIGN {
				for _, e := range as.Rhs {
					checkConstExpr(t, src.fset, src.consts, nil, e)
				}
			}
			return true
		})
	}

	// loanq bench's catalogue and DDL (bench/sql.go, bench/dialects.go): every
	// statement's SQL, every override and every DDL string is built from
	// literals and constants.
	benchSQL := 0
	for _, f := range []string{"../bench/sql.go", "../bench/dialects.go"} {
		src := parseGo(t, f, true)
		ast.Inspect(src.file, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.KeyValueExpr:
				if isIdent(x.Key, "SQL") {
					checkConstExpr(t, src.fset, src.consts, nil, x.Value)
					benchSQL++
				}
			case *ast.AssignStmt:
				for i, l := range x.Lhs {
					if sel, ok := l.(*ast.SelectorExpr); ok && sel.Sel.Name == "SQL" && i < len(x.Rhs) {
						checkConstExpr(t, src.fset, src.consts, nil, x.Rhs[i])
						benchSQL++
					}
				}
			case *ast.CompositeLit:
				if at, ok := x.Type.(*ast.ArrayType); ok && isIdent(at.Elt, "string") {
					for _, e := range x.Elts {
						checkConstExpr(t, src.fset, src.consts, nil, e)
						benchSQL++
					}
				}
			}
			return true
		})
	}
	if benchSQL < 30 {
		t.Fatalf("bench/sql.go and bench/dialects.go: only %d SQL texts found", benchSQL)
	}

	// The features' catalogues (drivers.Catalogue): every file of the
	// module that declares one builds each statement's SQL from literals
	// and constants.
	featureFiles, featureSQL := 0, 0
	err := filepath.WalkDir("..", func(path string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil || !strings.Contains(string(b), "drivers.NewCatalogue(") {
			return err
		}
		featureFiles++
		src := parseGo(t, path, true)
		ast.Inspect(src.file, func(n ast.Node) bool {
			if kv, ok := n.(*ast.KeyValueExpr); ok && isIdent(kv.Key, "SQL") {
				checkConstExpr(t, src.fset, src.consts, nil, kv.Value)
				featureSQL++
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if featureFiles < len(drivers.Catalogues()) || featureSQL < featureFiles {
		t.Fatalf("the features' catalogues: %d files, %d SQL texts found (%d catalogues declared)", featureFiles, featureSQL, len(drivers.Catalogues()))
	}

	// The engine side is checked on types, not on names: every statement it
	// runs is a drivers.Stmt (a statement of the driver or of one of its
	// catalogues, or the criteria query drivers built from the task), given
	// its values as an engineio.…Params value (or a …Params of the
	// catalogue's own, beside it).
	params := regexp.MustCompile(`^((?:drivers|engineio)\.[A-Z][A-Za-z]*|[a-z][A-Za-z]*)Params\{`)
	fset := token.NewFileSet()
	engine, info := typeCheck(t, fset, "github.com/loanq/loanq/dispatch")
	calls := 0
	for _, file := range engine {
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			switch sel.Sel.Name {
			case "ExecContext", "QueryContext", "QueryRowContext", "PrepareContext", "Prepare":
				// database/sql's own methods take SQL text: only the audit
				// queries (dispatch/auditsql.go), which bind nothing, are sent so.
				if len(call.Args) != 2 || expr(fset, call.Args[1]) != "q.SQL" {
					t.Errorf("%s: %s sends SQL text: not a typed statement", fset.Position(call.Pos()), expr(fset, call))
				}
			case "Exec", "Query", "QueryRow", "InsertID":
				if !isDriversStmt(info, sel.X) {
					t.Errorf("%s: %s sends %s: not a statement of the driver", fset.Position(call.Pos()), sel.Sel.Name, expr(fset, sel.X))
				} else if len(call.Args) != 3 || !params.MatchString(expr(fset, call.Args[2])) {
					t.Errorf("%s: %s: the values are not given as an engineio.…Params value", fset.Position(call.Pos()), expr(fset, call))
				}
			case "Compile", "MustStmt", "Text":
				// The engine neither builds a statement nor sends its text.
				if sel.Sel.Name == "Text" || isIdent(sel.X, "drivers") {
					t.Errorf("%s: %s: not a fixed statement", fset.Position(call.Pos()), expr(fset, call))
				}
			default:
				return true
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

// goSource is a parsed Go file and the names of its constants; in a file of
// SQL (sql is set) the constants are checked as statement text.
type goSource struct {
	fset   *token.FileSet
	file   *ast.File
	consts map[string]bool
}

func parseGo(t *testing.T, path string, sql bool) goSource {
	t.Helper()
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	src := goSource{fset: fset, file: file, consts: map[string]bool{}}
	for _, decl := range file.Decls {
		if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.CONST {
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					src.consts[n.Name] = true
					if sql {
						checkConstExpr(t, fset, src.consts, nil, vs.Values[i])
					}
				}
			}
		}
	}
	return src
}

func expr(fset *token.FileSet, e ast.Node) string {
	var b strings.Builder
	_ = printer.Fprint(&b, fset, e)
	return b.String()
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// checkConstExpr fails unless e is built of string literals, constants and
// (in a dialect's method) the method's arguments, args.
func checkConstExpr(t *testing.T, fset *token.FileSet, consts, args map[string]bool, e ast.Expr) {
	t.Helper()
	switch x := e.(type) {
	case *ast.BasicLit:
	case *ast.Ident:
		if !consts[x.Name] && !args[x.Name] {
			t.Errorf("%s: statement uses %s, which is not a constant", fset.Position(x.Pos()), x.Name)
		}
	case *ast.CallExpr:
		// A placeholder's number (strconv.Itoa(n) of Placeholder's argument).
		if expr(fset, x.Fun) == "strconv.Itoa" && len(x.Args) == 1 {
			if id, ok := x.Args[0].(*ast.Ident); ok && args[id.Name] {
				return
			}
		}
		// A local helper applied to literals (runHistogram(">=")) is still
		// a fixed string.
		if _, local := x.Fun.(*ast.Ident); !local {
			t.Errorf("%s: a statement is built by a call to %s (fmt.Sprintf?)", fset.Position(x.Pos()), expr(fset, x.Fun))
		}
		for _, a := range x.Args {
			if _, lit := a.(*ast.BasicLit); !lit {
				t.Errorf("%s: a statement helper is called with a non-literal argument", fset.Position(a.Pos()))
			}
		}
	case *ast.ParenExpr:
		checkConstExpr(t, fset, consts, args, x.X)
	case *ast.BinaryExpr:
		if x.Op != token.ADD {
			t.Errorf("%s: unexpected operator %s in a statement", fset.Position(x.Pos()), x.Op)
		}
		checkConstExpr(t, fset, consts, args, x.X)
		checkConstExpr(t, fset, consts, args, x.Y)
	default:
		t.Errorf("%s: a statement is built by %T, not from literals and constants", fset.Position(e.Pos()), e)
	}
}

// typeCheck parses the non-test files of a package of this module and
// type-checks them against the compiler's export data of its imports, which
// `go list -export` builds (or finds in the build cache).
func typeCheck(t *testing.T, fset *token.FileSet, path string) ([]*ast.File, *types.Info) {
	t.Helper()
	out, err := exec.Command("go", "list", "-export", "-deps", "-f",
		"{{.ImportPath}}\t{{.Export}}\t{{.Dir}}\t{{join .GoFiles \"\\t\"}}", path).Output()
	if err != nil {
		t.Fatalf("go list -export %s: %v", path, err)
	}
	exports := map[string]string{}
	var files []*ast.File
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		exports[f[0]] = f[1]
		if f[0] != path {
			continue
		}
		for _, name := range f[3:] {
			file, err := parser.ParseFile(fset, filepath.Join(f[2], name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, file)
		}
	}
	if len(files) == 0 {
		t.Fatalf("go list found no files of %s", path)
	}
	imp := importer.ForCompiler(fset, "gc", func(p string) (io.ReadCloser, error) {
		if exports[p] == "" {
			return nil, fmt.Errorf("no export data for %s", p)
		}
		return os.Open(exports[p])
	})
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}}
	if _, err := (&types.Config{Importer: imp}).Check(path, fset, files, info); err != nil {
		t.Fatalf("type-checking %s: %v", path, err)
	}
	return files, info
}

// isDriversStmt says whether e's type is drivers.Stmt[…] or a pointer to one.
func isDriversStmt(info *types.Info, e ast.Expr) bool {
	tv, ok := info.Types[e]
	if !ok {
		return false
	}
	typ := tv.Type
	if p, ok := typ.(*types.Pointer); ok {
		typ = p.Elem()
	}
	named, ok := types.Unalias(typ).(*types.Named)
	return ok && named.Obj().Name() == "Stmt" && named.Obj().Pkg() != nil &&
		named.Obj().Pkg().Path() == "github.com/loanq/loanq/drivers"
}
