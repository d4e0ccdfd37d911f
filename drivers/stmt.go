package drivers

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"text/template"
)

// Stmt is one statement loanq sends, with the type of its parameters, P: a
// struct whose fields carry `bind:"name"` tags. A statement is written once
// with named binds (:task_id) and, where databases say a thing differently,
// template calls of the dialect's vocabulary ({{now}}, {{limit "10"}}; see
// Dialect). Compiling it for a dialect renders the template, numbers the
// binds in the dialect's placeholder syntax ($1, ?, :1) and records which
// field of P each placeholder takes, so the bind order of a call is derived
// from the names and a name without a field fails when the driver is built
// (every test that loads the driver), not at run time.
//
// Each occurrence of a name is its own placeholder, so a name used twice is
// bound twice: Oracle and the ? dialects bind SQL placeholders by position.
//
// A statement of a catalogue whose rows are read is a Query[P, R] instead,
// which also checks its columns against its row type (query.go); Stmt's own
// Query and QueryRow serve the statements compiled at run time (a task's
// criteria query) and the bench's claims.
type Stmt[P any] struct {
	// SQL is the statement as written. Empty means the dialect never sends
	// it; for a field of Statements, a capability decides that (the field's
	// `empty` tag says which; Capabilities.CapabilityStatements).
	SQL string

	name  string // the Statements field, for errors
	text  string // rendered for the dialect
	binds []int  // per placeholder, the index of P's field (outBind: the insert's returned id)
	d     Dialect
}

// outBind is the bind name an INSERT's {{returningID}} may use for the new
// id (Oracle's RETURNING id INTO :n); its value is supplied by the dialect's
// InsertID, not by P.
const outBind = "returned_id"

// Text is the statement as the dialect receives it ("" when not sent).
func (s *Stmt[P]) Text() string { return s.text }

// Empty reports whether the dialect never sends this statement. It is no
// switch of behaviour: where databases differ, the engine asks the driver's
// Capabilities, which Build checks against the statements.
func (s *Stmt[P]) Empty() bool { return s.text == "" }

// Args returns p's fields in the statement's bind order.
func (s *Stmt[P]) Args(p P) []any {
	v := reflect.ValueOf(p)
	out := make([]any, 0, len(s.binds))
	for _, i := range s.binds {
		if i >= 0 {
			out = append(out, v.Field(i).Interface())
		}
	}
	return out
}

func (s *Stmt[P]) check() error {
	if s.d == nil {
		return fmt.Errorf("statement %s was not compiled for a dialect", s.name)
	}
	if s.text == "" {
		return fmt.Errorf("statement %s is not available on this database", s.name)
	}
	return nil
}

// Exec runs the statement with p.
func (s *Stmt[P]) Exec(ctx context.Context, q Querier, p P) (sql.Result, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	return q.ExecContext(ctx, s.text, s.Args(p)...)
}

// Query runs the statement with p and returns its rows.
func (s *Stmt[P]) Query(ctx context.Context, q Querier, p P) (*sql.Rows, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	return q.QueryContext(ctx, s.text, s.Args(p)...)
}

// QueryRow runs the statement with p and returns its first row.
func (s *Stmt[P]) QueryRow(ctx context.Context, q Querier, p P) *Row {
	if err := s.check(); err != nil {
		return &Row{err: err}
	}
	return &Row{row: q.QueryRowContext(ctx, s.text, s.Args(p)...)}
}

// Row is the first row of a query, or the error that kept it from running.
type Row struct {
	row *sql.Row
	err error
}

// Scan copies the row's columns into dest, as sql.Row.Scan does
// (sql.ErrNoRows when there was none).
func (r *Row) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	return r.row.Scan(dest...)
}

// InsertID runs an INSERT written with {{returningID}} and returns the new
// row's id, the way the dialect hands it back (RETURNING, LastInsertId, or
// an out bind).
func (s *Stmt[P]) InsertID(ctx context.Context, q Querier, p P) (int64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	return s.d.InsertID(ctx, q, s.text, s.Args(p))
}

// compile renders s.SQL for d (empty stays empty).
func (s *Stmt[P]) compile(d Dialect, name string) error {
	s.name, s.d, s.text, s.binds = name, d, "", nil
	if strings.TrimSpace(s.SQL) == "" {
		return nil
	}
	rendered, err := renderTemplate(d, name, s.SQL)
	if err != nil {
		return err
	}
	text, names := numberBinds(d, rendered)
	fields, err := bindFields(reflect.TypeOf((*P)(nil)).Elem())
	if err != nil {
		return fmt.Errorf("statement %s: %w", name, err)
	}
	used := map[string]bool{}
	for _, n := range names {
		if n == outBind {
			s.binds = append(s.binds, -1)
			continue
		}
		i, ok := fields[n]
		if !ok {
			return fmt.Errorf("statement %s binds :%s, which its parameters %T do not have", name, n, *new(P))
		}
		used[n] = true
		s.binds = append(s.binds, i)
	}
	for n := range fields {
		if !used[n] {
			return fmt.Errorf("statement %s does not use parameter %q of %T (a bind order or name mistake?)", name, n, *new(P))
		}
	}
	s.text = text
	return nil
}

// compile builds one statement at run time (a task's criteria query, whose
// text depends on the task): text is final SQL for d, with binds already in
// d's placeholder syntax, numbered in the order of names. No template is
// rendered and the text is not scanned for binds, so SQL written by an admin
// (a task's --where) is sent exactly as written.
func compile[P any](d Dialect, name, text string, names ...string) (*Stmt[P], error) {
	fields, err := bindFields(reflect.TypeOf((*P)(nil)).Elem())
	if err != nil {
		return nil, fmt.Errorf("statement %s: %w", name, err)
	}
	s := &Stmt[P]{SQL: text, name: name, text: text, d: d}
	for _, n := range names {
		i, ok := fields[n]
		if !ok {
			return nil, fmt.Errorf("statement %s binds %s, which its parameters %T do not have", name, n, *new(P))
		}
		s.binds = append(s.binds, i)
	}
	return s, nil
}

var bindFieldCache sync.Map // reflect.Type → map[string]int

// bindFields maps the bind names of a parameter struct to field indexes.
func bindFields(t reflect.Type) (map[string]int, error) {
	if m, ok := bindFieldCache.Load(t); ok {
		return m.(map[string]int), nil
	}
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("parameters %s are not a struct", t)
	}
	m := map[string]int{}
	for i := 0; i < t.NumField(); i++ {
		name := t.Field(i).Tag.Get("bind")
		if name == "" {
			return nil, fmt.Errorf("field %s.%s has no bind tag", t, t.Field(i).Name)
		}
		m[name] = i
	}
	bindFieldCache.Store(t, m)
	return m, nil
}

// renderTemplate expands the dialect calls of a written statement.
//
// Every statement loanq writes calls the vocabulary in one form, {{word}} or
// {{word "arg" …}}; renderCalls expands that form itself, without
// text/template, whose parse and function table per statement were most of
// the CPU a loanq process spent before its first statement (BENCHMARKS.md,
// "Start-up"; BenchmarkBuild). Any other action, an
// unknown word or a wrong number of arguments goes to text/template, which
// renders it or says what is wrong exactly as before.
func renderTemplate(d Dialect, name, written string) (string, error) {
	if !strings.Contains(written, "{{") {
		return written, nil
	}
	if out, ok := renderCalls(d, written); ok {
		return out, nil
	}
	return renderWithTemplate(d, name, written)
}

// renderWithTemplate renders written with text/template and the
// vocabulary's function table.
func renderWithTemplate(d Dialect, name, written string) (string, error) {
	tmpl, err := template.New(name).Option("missingkey=error").Funcs(template.FuncMap{
		"now":                 d.Now,
		"nowPlusMs":           d.NowPlusMillis,
		"nowMinusMs":          d.NowMinusMillis,
		"age":                 d.SecondsSince,
		"ageMs":               d.MillisSince,
		"secondsBetween":      d.SecondsBetween,
		"startOfToday":        d.StartOfToday,
		"limit":               d.Limit,
		"integer":             d.Integer,
		"inIDs":               d.InIDs,
		"inLoanIDs":           d.InLoanIDs,
		"assignmentsFromJSON": d.AssignmentsFromJSON,
		"returningID":         d.ReturningID,
		"skipActiveConflict":  d.SkipActiveConflict,
		"requestAlive":        func(col string) string { return requestAlive(d, col) },
		"requestStale":        func(col string) string { return requestStale(d, col) },
	}).Parse(written)
	if err != nil {
		return "", fmt.Errorf("statement %s: %w", name, err)
	}
	var b strings.Builder
	if err := tmpl.Execute(&b, nil); err != nil {
		return "", fmt.Errorf("statement %s: %w", name, err)
	}
	return b.String(), nil
}

// renderCalls expands the {{word}} and {{word "arg" …}} calls of written;
// false when it holds anything else (renderTemplate then uses
// text/template).
func renderCalls(d Dialect, written string) (string, bool) {
	var b strings.Builder
	b.Grow(len(written) + 64)
	rest := written
	for {
		i := strings.Index(rest, "{{")
		if i < 0 {
			b.WriteString(rest)
			return b.String(), true
		}
		b.WriteString(rest[:i])
		j := strings.Index(rest[i:], "}}")
		if j < 0 {
			return "", false
		}
		word, args, ok := splitCall(rest[i+2 : i+j])
		if !ok {
			return "", false
		}
		out, ok := vocabulary(d, word, args)
		if !ok {
			return "", false
		}
		b.WriteString(out)
		rest = rest[i+j+2:]
	}
}

// splitCall reads `word "arg" "arg"`: a word, then Go double-quoted
// strings separated by spaces.
func splitCall(action string) (string, []string, bool) {
	action = strings.TrimSpace(action)
	n := 0
	for n < len(action) && isIdentChar(action[n]) && action[n] != '$' {
		n++
	}
	if n == 0 || !isIdentStart(action[0]) {
		return "", nil, false
	}
	word, rest := action[:n], action[n:]
	var args []string
	for {
		trimmed := strings.TrimLeft(rest, " ")
		if trimmed == "" {
			return word, args, true
		}
		if len(trimmed) == len(rest) || trimmed[0] != '"' {
			return "", nil, false // no space before it, or not a quoted string
		}
		end := 1
		for end < len(trimmed) && trimmed[end] != '"' {
			if trimmed[end] == '\\' {
				end++
			}
			end++
		}
		if end >= len(trimmed) {
			return "", nil, false
		}
		arg, err := strconv.Unquote(trimmed[:end+1])
		if err != nil {
			return "", nil, false
		}
		args = append(args, arg)
		rest = trimmed[end+1:]
	}
}

// vocabulary is the dialect's word called with args, as renderTemplate's
// function table has it; false for an unknown word or a wrong number of
// arguments.
func vocabulary(d Dialect, word string, args []string) (string, bool) {
	want := func(n int) bool { return len(args) == n }
	switch word {
	case "now":
		return d.Now(), want(0)
	case "startOfToday":
		return d.StartOfToday(), want(0)
	case "returningID":
		return d.ReturningID(), want(0)
	case "skipActiveConflict":
		return d.SkipActiveConflict(), want(0)
	}
	if len(args) == 1 {
		a := args[0]
		switch word {
		case "nowPlusMs":
			return d.NowPlusMillis(a), true
		case "nowMinusMs":
			return d.NowMinusMillis(a), true
		case "age":
			return d.SecondsSince(a), true
		case "ageMs":
			return d.MillisSince(a), true
		case "limit":
			return d.Limit(a), true
		case "integer":
			return d.Integer(a), true
		case "assignmentsFromJSON":
			return d.AssignmentsFromJSON(a), true
		case "requestAlive":
			return requestAlive(d, a), true
		case "requestStale":
			return requestStale(d, a), true
		}
	}
	if len(args) == 2 {
		switch word {
		case "secondsBetween":
			return d.SecondsBetween(args[0], args[1]), true
		case "inIDs":
			return d.InIDs(args[0], args[1]), true
		case "inLoanIDs":
			return d.InLoanIDs(args[0], args[1]), true
		}
	}
	return "", false
}

// requestAlive and requestStale are the vocabulary's words for a request's
// signs of life (alive.go).
func requestAlive(d Dialect, col string) string {
	return col + ` > ` + d.NowMinusMillis(requestAliveMS)
}

func requestStale(d Dialect, col string) string {
	return `(` + col + ` IS NULL OR ` + col + ` <= ` + d.NowMinusMillis(requestAliveMS) + `)`
}

// numberBinds replaces each :name bind of text with the dialect's
// placeholder, numbered from 1 in order of occurrence, and returns the names
// in that order. A bind is a colon followed by a letter or underscore, not
// preceded by a colon or an identifier character (so PostgreSQL's x::bigint,
// PL/SQL's := and Oracle's :1 are left alone), outside quoted text.
func numberBinds(d Dialect, text string) (string, []string) {
	var b strings.Builder
	b.Grow(len(text) + 16)
	var names []string
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(text) && text[j] != c {
				j++
			}
			b.WriteString(text[i:min(j+1, len(text))])
			i = j
		case c == ':' && i+1 < len(text) && isIdentStart(text[i+1]) && (i == 0 || (text[i-1] != ':' && !isIdentChar(text[i-1]))):
			j := i + 1
			for j < len(text) && isIdentChar(text[j]) {
				j++
			}
			names = append(names, text[i+1:j])
			b.WriteString(d.Placeholder(len(names)))
			i = j - 1
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), names
}

func isIdentStart(c byte) bool {
	return c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

func isIdentChar(c byte) bool {
	return isIdentStart(c) || ('0' <= c && c <= '9') || c == '$'
}

// MustStmt compiles one written statement (template calls and :name binds,
// as in Statements) for d, outside Statements: a dialect's alternative text
// (MySQL 8's names for MariaDB's session variables). It panics when the
// statement does not compile, a programming error.
func MustStmt[P any](d Dialect, name, written string) *Stmt[P] {
	s := &Stmt[P]{SQL: written}
	if err := s.compile(d, name); err != nil {
		panic("drivers: " + err.Error())
	}
	return s
}
