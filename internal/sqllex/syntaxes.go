package sqllex

// The quoted tokens every database here has: '…' string literals and "…"
// quoted identifiers, each with its quote doubled inside.
var (
	single = Quote{Open: '\'', Close: '\'', Doubling: true, What: "string literal"}
	double = Quote{Open: '"', Close: '"', Doubling: true, What: "quoted identifier"}
)

// SQLite: '…', "…", `…` and […] (no escape inside: the first ']' ends it);
// binds ?, ?NNN, :name, @name and $name.
var SQLite = Syntax{{
	Name: "SQLite",
	Quotes: []Quote{single, double,
		{Open: '`', Close: '`', Doubling: true, What: "quoted identifier"},
		{Open: '[', Close: ']', What: "quoted identifier"}},
	QuestionBind: true, ColonBind: true, AtBind: true, DollarName: true,
}}

// MySQL and MariaDB tokenize by sql_mode, which loanq does not know: by
// default a backslash escapes in '…' and "…" (a string literal there);
// NO_BACKSLASH_ESCAPES turns that off, ANSI_QUOTES makes "…" an identifier.
// '#' starts a comment; binds are ?.
var MySQL = Syntax{
	{Name: "MySQL with the default sql_mode", Quotes: []Quote{
		{Open: '\'', Close: '\'', Doubling: true, Backslash: true, What: "string literal"},
		{Open: '"', Close: '"', Doubling: true, Backslash: true, What: "string literal"},
		backtick}, HashComment: true, QuestionBind: true},
	{Name: "MySQL with sql_mode NO_BACKSLASH_ESCAPES", Quotes: []Quote{single,
		{Open: '"', Close: '"', Doubling: true, What: "string literal"},
		backtick}, HashComment: true, QuestionBind: true},
	{Name: "MySQL with sql_mode ANSI_QUOTES", Quotes: []Quote{
		{Open: '\'', Close: '\'', Doubling: true, Backslash: true, What: "string literal"},
		double, backtick}, HashComment: true, QuestionBind: true},
}

var backtick = Quote{Open: '`', Close: '`', Doubling: true, What: "quoted identifier"}

// PostgreSQL: '…' takes backslash escapes only when
// standard_conforming_strings is off (on since 9.1, but a setting); E'…'
// always; $$…$$ and $tag$…$tag$ are literals; binds are $1, $2 … ('::' is
// a cast, '?' an operator).
var PostgreSQL = Syntax{
	{Name: "PostgreSQL", Quotes: []Quote{single, double}, EStrings: true, DollarQuotes: true, DollarBind: true},
	{Name: "PostgreSQL with standard_conforming_strings off", Quotes: []Quote{
		{Open: '\'', Close: '\'', Doubling: true, Backslash: true, What: "string literal"}, double},
		EStrings: true, DollarQuotes: true, DollarBind: true},
}

// Oracle: '…', "…", q'[…]' (and N'…', nq'…'); binds :name and :1.
var Oracle = Syntax{{Name: "Oracle", Quotes: []Quote{single, double}, QQuotes: true, ColonBind: true}}

// Strict is every reading above: what a driver that does not declare its
// syntax gets, since a fragment that passes all of them is safe on any of
// these databases. It refuses more than a given database needs to ('#' and
// '?' outside literals, for instance).
var Strict = func() Syntax {
	var s Syntax
	for _, d := range []Syntax{SQLite, MySQL, PostgreSQL, Oracle} {
		s = append(s, d...)
	}
	return s
}()

// Syntaxer is implemented by a driver that declares how its database
// tokenizes SQL.
type Syntaxer interface {
	CriteriaSyntax() Syntax
}

// For returns the syntax driver d declares, or Strict.
func For(d any) Syntax {
	if s, ok := d.(Syntaxer); ok {
		return s.CriteriaSyntax()
	}
	return Strict
}
