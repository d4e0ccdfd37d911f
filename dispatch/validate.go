package dispatch

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/loanq/loanq/internal/sqllex"
	"github.com/loanq/loanq/internal/textsafe"
	"github.com/loanq/loanq/problem"
)

// Limits of stored text, the same on every dialect so that a name or a task
// accepted on one database is accepted on all: the tightest column decides.
const (
	// MaxUserChars: user_name and created_by are VARCHAR(100) on PostgreSQL
	// and MySQL, VARCHAR2(100 CHAR) on Oracle (ORA-12899, MySQL error 1406
	// beyond).
	MaxUserChars = 100
	// MaxCriteriaBytes: Oracle stores --where and --order in VARCHAR2(4000),
	// whose limit is in bytes.
	MaxCriteriaBytes = 4000
)

// validateUser checks the acting user before anything is stored under its
// name.
//
//   - Empty: no --user, no LOANQ_USER and an empty OS user name (common in
//     containers). Oracle would store the empty string as NULL and fail on NOT NULL.
//   - Leading or trailing white space: MySQL/MariaDB compare utf8mb4_bin
//     strings with PAD SPACE, so 'ana ' and 'ana' would be one user there
//     (one cap, one pipeline) and two everywhere else.
//   - Over MaxUserChars characters, or text no column can hold (invalid
//     UTF-8, control characters such as NUL, which PostgreSQL refuses).
//   - Characters that do not print as themselves (textsafe.Unsafe): an ESC
//     would drive the terminal of whoever lists the pipelines, and
//     "ana\u200b" would print as "ana" yet be another user.
func validateUser(user string) error {
	const how = "give --user NAME or set LOANQ_USER"
	if pos, r, ok := textsafe.FirstUnsafe(user, false); ok && strings.TrimSpace(user) != "" {
		return problem.Usagef("invalid user %s: character %d is %s, a control or invisible character; a user name must print as itself; %s",
			quote(user), pos, textsafe.CharName(r), how)
	}
	switch {
	case strings.TrimSpace(user) == "":
		return problem.Usagef("no acting user: --user, LOANQ_USER and the OS user name ($USER) are all empty or blank; %s", how)
	case strings.TrimSpace(user) != user:
		return problem.Usagef("invalid user %q: a user name may not begin or end with white space; %s", user, how)
	case !utf8.ValidString(user) || strings.IndexFunc(user, unicode.IsControl) >= 0:
		return problem.Usagef("invalid user %q: a user name must be UTF-8 text without control characters; %s", user, how)
	case utf8.RuneCountInString(user) > MaxUserChars:
		return problem.Usagef("invalid user %.20q…: %d characters, at most %d are stored; %s", user, utf8.RuneCountInString(user), MaxUserChars, how)
	}
	return nil
}

// validateCriteriaText checks --where or --order: its length, and that it
// stays inside the place loanq gives it in the criteria query (sqllex: its
// parentheses and quotes balance, no comment, no ';', no bind marker),
// tokenized as the database would.
func validateCriteriaText(flag, text string, syntax sqllex.Syntax) error {
	if len(text) > MaxCriteriaBytes {
		return problem.Usagef("--%s is %d bytes long; loanq stores at most %d bytes (Oracle's VARCHAR2(4000)): put the logic in a view and name it with --source", flag, len(text), MaxCriteriaBytes)
	}
	if err := sqllex.Check(syntax, text); err != nil {
		return &problem.Error{Kind: problem.Usage,
			Msg:  fmt.Sprintf("--%s %s is not one self-contained SQL expression: %v", flag, quote(text), err),
			Hint: criteriaHint}
	}
	return nil
}

const criteriaHint = "balance every '(' with ')' and close every quote outside string literals; " +
	"leave out comments ('--', '/* */', '#' on MySQL), ';' and bind markers"

// storedCriteria re-checks criteria read from the database, which anyone
// with write access to loanq_task may have written by hand: text that
// breaks out of its parentheses would run for every caller of the task.
func storedCriteria(t *Task, syntax sqllex.Syntax) error {
	for _, c := range []struct{ flag, text string }{{"where", t.Where}, {"order", t.Order}} {
		if err := sqllex.Check(syntax, c.text); err != nil {
			return &problem.Error{Kind: problem.Usage,
				Msg: fmt.Sprintf("task %s cannot be served: its stored --%s %s is not one self-contained SQL expression: %v",
					textsafe.Escape(t.Name), c.flag, quote(c.text), err),
				Hint: fmt.Sprintf("fix it with `loanq task update %s --%s …`; %s", textsafe.Escape(t.Name), c.flag, criteriaHint)}
		}
	}
	return nil
}

// quote is %q for messages: Go's quoting, which escapes control characters
// and invisible format characters, cut to 80 characters.
func quote(s string) string {
	if utf8.RuneCountInString(s) > 80 {
		return fmt.Sprintf("%q…", string([]rune(s)[:80]))
	}
	return fmt.Sprintf("%q", s)
}
