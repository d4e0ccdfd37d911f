package dispatch

import (
	"strings"
	"unicode"
	"unicode/utf8"

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
func validateUser(user string) error {
	const how = "give --user NAME or set LOANQ_USER"
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

// validateCriteriaText checks the length of --where or --order.
func validateCriteriaText(flag, text string) error {
	if len(text) > MaxCriteriaBytes {
		return problem.Usagef("--%s is %d bytes long; loanq stores at most %d bytes (Oracle's VARCHAR2(4000)): put the logic in a view and name it with --source", flag, len(text), MaxCriteriaBytes)
	}
	return nil
}
