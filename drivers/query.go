package drivers

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
)

// Query is a statement that returns rows: its parameters P, as for Stmt,
// and its row type R, a struct whose fields carry `col:"name"` tags, one per
// column in the statement's order. Compiling it for a dialect also reads the
// select list of the rendered text (the outermost SELECT's, or a RETURNING
// list) and requires each item's output name (its alias, or a column
// reference's last identifier) to be R's tag at that place: a column added,
// dropped, renamed or moved by a dialect's override fails the build of the
// driver (every test that loads it), not a Scan at run time. Rows are then
// scanned by position into R's fields; outside drivers/, nothing scans a
// statement's result.
type Query[P, R any] struct {
	// SQL is the statement as written (see Stmt.SQL).
	SQL string

	stmt Stmt[P] // compiled from SQL
}

// Text is the statement as the dialect receives it ("" when not sent).
func (q *Query[P, R]) Text() string { return q.stmt.text }

// queryColumns marks a statement whose columns were checked against a row
// type (a feature catalogue's reads must be).
func (q *Query[P, R]) queryColumns() {}

// Empty reports whether the dialect never sends this statement (see
// Stmt.Empty).
func (q *Query[P, R]) Empty() bool { return q.stmt.text == "" }

// Args returns p's fields in the statement's bind order.
func (q *Query[P, R]) Args(p P) []any { return q.stmt.Args(p) }

// All runs the query with p and returns every row.
func (q *Query[P, R]) All(ctx context.Context, db Querier, p P) ([]R, error) {
	var out []R
	err := q.Each(ctx, db, p, func(r R) error {
		out = append(out, r)
		return nil
	})
	return out, err
}

// Each runs the query with p and calls f with each row in order; an error
// of f stops the reading and is returned.
func (q *Query[P, R]) Each(ctx context.Context, db Querier, p P, f func(R) error) error {
	rows, err := q.stmt.Query(ctx, db, p)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var r R
		if err := rows.Scan(rowDest(&r)...); err != nil {
			return fmt.Errorf("statement %s: %w", q.stmt.name, err)
		}
		if err := f(r); err != nil {
			return err
		}
	}
	return rows.Err()
}

// One runs the query with p and returns its first row; sql.ErrNoRows (as
// is, for errors.Is) when there is none.
func (q *Query[P, R]) One(ctx context.Context, db Querier, p P) (R, error) {
	var r R
	err := q.stmt.QueryRow(ctx, db, p).Scan(rowDest(&r)...)
	return r, err
}

// compile renders SQL for d and checks its binds against P and its columns
// against R.
func (q *Query[P, R]) compile(d Dialect, name string) error {
	q.stmt = Stmt[P]{SQL: q.SQL}
	if err := q.stmt.compile(d, name); err != nil {
		return err
	}
	if q.stmt.text == "" {
		return nil
	}
	return checkColumns(name, q.stmt.text, reflect.TypeOf((*R)(nil)).Elem())
}

// mustQuery is MustStmt for a statement that returns rows.
func mustQuery[P, R any](d Dialect, name, written string) *Query[P, R] {
	q := &Query[P, R]{SQL: written}
	if err := q.compile(d, name); err != nil {
		panic("drivers: " + err.Error())
	}
	return q
}

// CompileQuery is compile for a statement built at run time that returns
// rows: its columns are checked against R as at a driver's build.
func CompileQuery[P, R any](d Dialect, name, text string, names ...string) (*Query[P, R], error) {
	s, err := compile[P](d, name, text, names...)
	if err != nil {
		return nil, err
	}
	if err := checkColumns(name, text, reflect.TypeOf((*R)(nil)).Elem()); err != nil {
		return nil, err
	}
	return &Query[P, R]{SQL: text, stmt: *s}, nil
}

// rowDest is the scan destination of each of r's fields, in order.
func rowDest[R any](r *R) []any {
	v := reflect.ValueOf(r).Elem()
	out := make([]any, v.NumField())
	for i := range out {
		out[i] = v.Field(i).Addr().Interface()
	}
	return out
}

var colTagCache sync.Map // reflect.Type → []string, or error

// colTags returns the `col` tags of row type t in field order.
func colTags(t reflect.Type) ([]string, error) {
	if v, ok := colTagCache.Load(t); ok {
		if err, isErr := v.(error); isErr {
			return nil, err
		}
		return v.([]string), nil
	}
	var tags []string
	var err error
	if t.Kind() != reflect.Struct || t.NumField() == 0 {
		err = fmt.Errorf("row type %s is not a struct with fields", t)
	} else {
		for i := 0; i < t.NumField() && err == nil; i++ {
			name := t.Field(i).Tag.Get("col")
			if name == "" || !t.Field(i).IsExported() {
				err = fmt.Errorf("field %s.%s is not an exported field with a col tag", t, t.Field(i).Name)
			}
			tags = append(tags, name)
		}
	}
	if err != nil {
		colTagCache.Store(t, err)
		return nil, err
	}
	colTagCache.Store(t, tags)
	return tags, nil
}

// checkColumns requires the output names of text's select list to be the
// col tags of row type t, in order.
func checkColumns(name, text string, t reflect.Type) error {
	tags, err := colTags(t)
	if err != nil {
		return fmt.Errorf("statement %s: %w", name, err)
	}
	cols, err := SelectColumns(text)
	if err != nil {
		return fmt.Errorf("statement %s: %w", name, err)
	}
	if len(cols) != len(tags) || strings.Join(cols, ",") != strings.Join(tags, ",") {
		return fmt.Errorf("statement %s returns columns (%s), which its row type %s does not have in that order (%s)",
			name, strings.Join(cols, ", "), t, strings.Join(tags, ", "))
	}
	return nil
}

// SelectColumns returns the output names of a statement's result columns:
// the items of its RETURNING list when it has one at the top level, else of
// its outermost SELECT's list, up to that SELECT's FROM. An item's name is
// its alias (AS name, or a name after the expression) or, for a column
// reference (t.loan_id), its last identifier, lower-cased unless quoted. An
// item without a name (COUNT(*), a literal, *) is an error that asks for an
// alias.
func SelectColumns(text string) ([]string, error) {
	toks := topTokens(text)
	start := -1
	for i, t := range toks {
		if t.depth == 0 && t.keyword("RETURNING") {
			start = i + 1
			break
		}
	}
	if start < 0 {
		for i, t := range toks {
			if t.depth == 0 && t.keyword("SELECT") {
				start = i + 1
				break
			}
		}
	}
	if start < 0 {
		return nil, fmt.Errorf("no top-level SELECT or RETURNING list to read its columns from")
	}
	if start < len(toks) && (toks[start].keyword("DISTINCT") || toks[start].keyword("ALL")) {
		start++
	}
	var items [][]token
	var item []token
	for _, t := range toks[start:] {
		if t.depth == 0 && (t.keyword("FROM") || t.keyword("INTO") || t.text == ";") {
			break
		}
		if t.depth == 0 && t.text == "," {
			items = append(items, item)
			item = nil
			continue
		}
		item = append(item, t)
	}
	items = append(items, item)
	out := make([]string, 0, len(items))
	for n, it := range items {
		name, ok := itemName(it)
		if !ok {
			var words []string
			for _, t := range it {
				words = append(words, t.text)
			}
			return nil, fmt.Errorf("column %d (%s) has no name: give it an alias (AS name)", n+1, strings.Join(words, " "))
		}
		out = append(out, name)
	}
	return out, nil
}

// itemName is the output name of one select-list item.
func itemName(it []token) (string, bool) {
	// Tokens at the item's own level: what is inside parentheses is one
	// expression, named only by what follows it.
	var top []token
	for _, t := range it {
		if t.depth == it[0].depth {
			top = append(top, t)
		}
	}
	if len(top) == 0 {
		return "", false
	}
	last := top[len(top)-1]
	if !last.ident() {
		return "", false
	}
	if len(top) == 1 {
		return last.name(), true
	}
	prev := top[len(top)-2]
	switch {
	case prev.keyword("AS") || prev.text == ".":
		return last.name(), true
	case (prev.ident() || prev.text == ")" || prev.literal) && !last.keyword("END"):
		// An alias without AS: expression name.
		return last.name(), true
	}
	return "", false
}

// token is a word, quoted text, or punctuation of a statement, with the
// parenthesis depth it stands at.
type token struct {
	text    string
	depth   int
	quoted  bool // "identifier"
	literal bool // 'text' or a number
}

func (t token) keyword(k string) bool { return !t.quoted && !t.literal && strings.EqualFold(t.text, k) }

func (t token) ident() bool {
	if t.quoted {
		return true
	}
	if t.literal || t.text == "" || !isIdentStart(t.text[0]) {
		return false
	}
	for _, k := range []string{"NULL", "END", "TRUE", "FALSE", "ELSE", "THEN"} {
		if t.keyword(k) {
			return false
		}
	}
	return true
}

func (t token) name() string {
	if t.quoted {
		return t.text
	}
	return strings.ToLower(t.text)
}

// topTokens splits text into tokens with their depth, leaving out comments
// and white space. Parentheses carry the depth outside them.
func topTokens(text string) []token {
	out := make([]token, 0, len(text)/4) // about one token per 4 bytes of SQL: one allocation
	depth := 0
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '-' && i+1 < len(text) && text[i+1] == '-':
			for i < len(text) && text[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(text) && text[i+1] == '*':
			end := strings.Index(text[i+2:], "*/")
			if end < 0 {
				i = len(text)
			} else {
				i += end + 4
			}
		case c == '\'' || c == '"' || c == '`':
			j := i + 1
			for j < len(text) {
				if text[j] == c {
					if j+1 < len(text) && text[j+1] == c {
						j += 2
						continue
					}
					break
				}
				j++
			}
			body := text[i+1 : min(j, len(text))]
			out = append(out, token{text: body, depth: depth, quoted: c != '\'', literal: c == '\''})
			i = j + 1
		case c == '(':
			out = append(out, token{text: "(", depth: depth})
			depth++
			i++
		case c == ')':
			depth--
			out = append(out, token{text: ")", depth: depth})
			i++
		case isIdentStart(c):
			j := i
			for j < len(text) && isIdentChar(text[j]) {
				j++
			}
			out = append(out, token{text: text[i:j], depth: depth})
			i = j
		case '0' <= c && c <= '9':
			j := i
			for j < len(text) && (isIdentChar(text[j]) || text[j] == '.') {
				j++
			}
			out = append(out, token{text: text[i:j], depth: depth, literal: true})
			i = j
		default:
			out = append(out, token{text: text[i : i+1], depth: depth})
			i++
		}
	}
	return out
}
