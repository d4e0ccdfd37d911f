// Package sqllex reads an admin's SQL fragment (a task's --where or --order)
// the way a database's tokenizer would, far enough to tell whether the
// fragment stays where loanq puts it. The criteria query is
//
//	SELECT … FROM source src WHERE (<where>) AND NOT EXISTS (…) ORDER BY <order>, src.key
//
// and a --where such as `1=1) OR (1=1` closes loanq's parenthesis and opens
// its own: the eligibility condition is then OR-ed away, the query returns
// loans that are already assigned, and every `work get` of the task fails
// on the one-active-row index for everyone. A comment marker would cut the
// rest of the statement off, a ';' start another one, a bind marker take
// one of loanq's binds. Check refuses all of these outside string literals
// and quoted identifiers, which it has to recognise exactly as the database
// does: a quote the lexer thinks is inside a literal and the database
// thinks is not is how text escapes.
//
// A Syntax is one or more Readings. Where the server's settings change how
// it tokenizes (MySQL's NO_BACKSLASH_ESCAPES and ANSI_QUOTES, PostgreSQL's
// standard_conforming_strings), the syntax lists one reading per setting and
// a fragment must pass every one: loanq does not know the server's mode, and
// a text that is safe under all of them is safe under the one in force.
package sqllex

import (
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/loanq/loanq/internal/textsafe"
)

// Quote is one kind of quoted token.
type Quote struct {
	Open, Close rune
	// Doubling: a doubled Close inside stands for one ('it''s').
	Doubling bool
	// Backslash: a backslash escapes the character after it ('it\'s').
	Backslash bool
	// What names the token in messages: "string literal", "quoted identifier".
	What string
}

// Reading is how one database, in one server mode, splits text into tokens.
type Reading struct {
	// Name says which database and mode, for messages ("MySQL with
	// NO_BACKSLASH_ESCAPES"); one reading of a syntax may leave it empty.
	Name   string
	Quotes []Quote
	// HashComment: '#' starts a comment to the end of the line (MySQL).
	HashComment bool
	// DollarQuotes: $$…$$ and $tag$…$tag$ are string literals (PostgreSQL).
	DollarQuotes bool
	// EStrings: E'…' takes backslash escapes even when '…' does not
	// (PostgreSQL).
	EStrings bool
	// QQuotes: q'[…]', q'{…}', q'<…>', q'(…)' and q'X…X' are string
	// literals (Oracle), also after N.
	QQuotes bool
	// Binds are the bind markers the database would fill from loanq's
	// parameters.
	QuestionBind bool // ? (MySQL, SQLite)
	DollarBind   bool // $1 (PostgreSQL); $name on SQLite
	ColonBind    bool // :name, :1 (Oracle, SQLite); '::' is not one
	AtBind       bool // @name (SQLite)
	DollarName   bool // $name is a bind too (SQLite)
}

// Syntax is every way the database may read a fragment; Check demands that
// the fragment pass each.
type Syntax []Reading

// Error is a fragment refused: what is wrong and where.
type Error struct {
	// Pos is the 1-based character (not byte) position of the offending
	// text.
	Pos int
	// Problem says what is wrong there.
	Problem string
	// Reading names the reading that found it when the others did not
	// ("" when all did, or the syntax has one reading).
	Reading string
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%s at character %d", e.Problem, e.Pos)
	if e.Reading != "" {
		msg += " (as " + e.Reading + " reads it)"
	}
	return msg
}

// Check returns nil when text passes every reading of s, else the problem
// found first in the text; the reading that found it is named when another
// reading passed.
func Check(s Syntax, text string) error {
	if !utf8.ValidString(text) {
		return &Error{Pos: 1 + utf8.RuneCountInString(text[:firstInvalid(text)]), Problem: "invalid UTF-8"}
	}
	if pos, r, ok := textsafe.FirstUnsafe(text, true); ok {
		return &Error{Pos: pos, Problem: textsafe.CharName(r) + " (a control or invisible character)"}
	}
	var first *Error
	failed := 0
	for _, rd := range s {
		if err := check(rd, text); err != nil {
			failed++
			if first == nil || err.Pos < first.Pos {
				first = err
				first.Reading = rd.Name
			}
		}
	}
	if first == nil {
		return nil
	}
	if failed == len(s) {
		first.Reading = "" // every reading agrees: no mode to name
	}
	return first
}

func firstInvalid(s string) int {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				return i
			}
		}
	}
	return len(s)
}

// lexer walks text by runes, counting character positions.
type lexer struct {
	rs  []rune
	i   int
	rd  Reading
	par []int // positions of the open parentheses
}

func check(rd Reading, text string) *Error {
	l := &lexer{rs: []rune(text), rd: rd}
	for l.i < len(l.rs) {
		if err := l.step(); err != nil {
			return err
		}
	}
	if n := len(l.par); n > 0 {
		return &Error{Pos: l.par[n-1] + 1, Problem: "'(' is never closed"}
	}
	return nil
}

func (l *lexer) at(k int) rune {
	if l.i+k < len(l.rs) && l.i+k >= 0 {
		return l.rs[l.i+k]
	}
	return 0
}

// tokenStart: the rune at i does not continue an identifier or a number,
// so a prefix letter there (E'…', q'…') or a '$' begins a token of its own.
func (l *lexer) tokenStart() bool {
	return l.i == 0 || !identRune(l.rs[l.i-1])
}

func identRune(r rune) bool {
	return r == '_' || r == '$' || r == '#' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

func (l *lexer) step() *Error {
	r := l.at(0)
	pos := l.i + 1
	switch {
	case r == '(':
		l.par = append(l.par, l.i)
	case r == ')':
		if len(l.par) == 0 {
			return &Error{Pos: pos, Problem: "')' closes a parenthesis the text did not open"}
		}
		l.par = l.par[:len(l.par)-1]
	case r == ';':
		return &Error{Pos: pos, Problem: "';' ends the statement (give one SQL expression)"}
	case r == '-' && l.at(1) == '-':
		return &Error{Pos: pos, Problem: "comment marker '--'"}
	case r == '/' && l.at(1) == '*':
		return &Error{Pos: pos, Problem: "comment marker '/*'"}
	case r == '*' && l.at(1) == '/':
		return &Error{Pos: pos, Problem: "comment marker '*/'"}
	case r == '#' && l.rd.HashComment:
		return &Error{Pos: pos, Problem: "comment marker '#'"}
	case r == ':' && l.at(1) == ':':
		l.i += 2 // PostgreSQL's cast: not a bind marker
		return nil
	case r == ':' && l.rd.ColonBind && identRune(l.at(1)) && l.at(1) != '$' && l.at(1) != '#':
		return &Error{Pos: pos, Problem: "bind marker ':'"}
	case r == '?' && l.rd.QuestionBind:
		return &Error{Pos: pos, Problem: "bind marker '?'"}
	case r == '@' && l.rd.AtBind && identRune(l.at(1)):
		return &Error{Pos: pos, Problem: "bind marker '@'"}
	case r == '$' && l.tokenStart() && l.rd.DollarBind && unicode.IsDigit(l.at(1)):
		return &Error{Pos: pos, Problem: "bind marker '$'"}
	case r == '$' && l.tokenStart() && l.rd.DollarName && identRune(l.at(1)):
		return &Error{Pos: pos, Problem: "bind marker '$'"}
	case r == '$' && l.tokenStart() && l.rd.DollarQuotes:
		if tag, ok := l.dollarTag(); ok {
			return l.dollarQuoted(tag)
		}
	case (r == 'q' || r == 'Q') && l.rd.QQuotes && l.at(1) == '\'' && l.tokenStart():
		return l.qQuoted(1)
	case (r == 'n' || r == 'N') && l.rd.QQuotes && (l.at(1) == 'q' || l.at(1) == 'Q') && l.at(2) == '\'' && l.tokenStart():
		return l.qQuoted(2)
	case (r == 'e' || r == 'E') && l.rd.EStrings && l.at(1) == '\'' && l.tokenStart():
		l.i++
		return l.quoted(Quote{Open: '\'', Close: '\'', Doubling: true, Backslash: true, What: "string literal"})
	default:
		for _, q := range l.rd.Quotes {
			if r == q.Open {
				return l.quoted(q)
			}
		}
	}
	l.i++
	return nil
}

// quoted skips a quoted token starting at l.i (its Open).
func (l *lexer) quoted(q Quote) *Error {
	start := l.i + 1
	l.i++
	for l.i < len(l.rs) {
		r := l.rs[l.i]
		switch {
		case q.Backslash && r == '\\':
			l.i += 2
			continue
		case r == q.Close && q.Doubling && l.at(1) == q.Close:
			l.i += 2
			continue
		case r == q.Close:
			l.i++
			return nil
		}
		l.i++
	}
	return &Error{Pos: start, Problem: fmt.Sprintf("%s opened by %s is never closed", q.What, quoteRune(q.Open))}
}

// dollarTag reads $tag$ at l.i: an empty tag or an identifier without '$'
// (PostgreSQL's rule).
func (l *lexer) dollarTag() (string, bool) {
	j := l.i + 1
	for j < len(l.rs) && l.rs[j] != '$' {
		r := l.rs[j]
		if !(r == '_' || unicode.IsLetter(r) || (j > l.i+1 && unicode.IsDigit(r))) {
			return "", false
		}
		j++
	}
	if j >= len(l.rs) {
		return "", false
	}
	return string(l.rs[l.i : j+1]), true
}

func (l *lexer) dollarQuoted(tag string) *Error {
	start := l.i + 1
	t := []rune(tag)
	l.i += len(t)
	for ; l.i+len(t) <= len(l.rs); l.i++ {
		if string(l.rs[l.i:l.i+len(t)]) == tag {
			l.i += len(t)
			return nil
		}
	}
	return &Error{Pos: start, Problem: fmt.Sprintf("string literal opened by %s is never closed", tag)}
}

// qQuoted skips Oracle's q'X…X' whose q is at l.i+skip-1.
func (l *lexer) qQuoted(skip int) *Error {
	start := l.i + 1
	l.i += skip + 1 // past the quote
	if l.i >= len(l.rs) {
		return &Error{Pos: start, Problem: "string literal opened by q' is never closed"}
	}
	open := l.rs[l.i]
	closer := open
	switch open {
	case '[':
		closer = ']'
	case '{':
		closer = '}'
	case '<':
		closer = '>'
	case '(':
		closer = ')'
	}
	if unicode.IsSpace(open) {
		return &Error{Pos: l.i + 1, Problem: "q' must be followed by a delimiter other than white space"}
	}
	for l.i++; l.i+1 < len(l.rs); l.i++ {
		if l.rs[l.i] == closer && l.rs[l.i+1] == '\'' {
			l.i += 2
			return nil
		}
	}
	return &Error{Pos: start, Problem: fmt.Sprintf("string literal opened by q'%c is never closed", open)}
}

func quoteRune(r rune) string {
	if r == '\'' {
		return `"'"`
	}
	return "'" + string(r) + "'"
}
