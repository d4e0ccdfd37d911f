package sqlite

import (
	"net/url"
	"strings"

	"github.com/loanq/loanq/dsn"
	"github.com/loanq/loanq/problem"
)

// ParseDSN reads sqlite:PATH, sqlite://PATH, file:PATH (each with an optional
// ?query) and a plain path ending in .db, .sqlite or .sqlite3. Its scheme is
// sqlite whatever was typed: that is how the DSN prints.
func (*Driver) ParseDSN(raw string) (dsn.DSN, error) {
	raw = strings.TrimSpace(raw)
	rest := raw
	if i := strings.Index(raw, ":"); i > 1 && hasFileScheme(raw) {
		rest = strings.TrimPrefix(raw[i+1:], "//")
	}
	if strings.Contains(rest, "@") {
		// sqlite://user:pass@host/x is not a file path: refuse it without
		// echoing what may be a password.
		return dsn.DSN{}, problem.Usagef("malformed SQLite DSN %s: an SQLite DSN names a file and has no user, password or host (e.g. sqlite:loanq.db); a file name with '@' is not supported", dsn.RedactLoose(raw))
	}
	q := url.Values{}
	if i := strings.Index(rest, "?"); i >= 0 {
		var err error
		if q, err = url.ParseQuery(rest[i+1:]); err != nil {
			return dsn.DSN{}, problem.Usagef("malformed SQLite DSN %q: %v", raw, err)
		}
		rest = rest[:i]
	}
	rest = strings.TrimSpace(rest)
	if rest == "" {
		return dsn.DSN{}, problem.Usagef("malformed SQLite DSN %q: no file path (e.g. sqlite:loanq.db)", raw)
	}
	// Every form prints as sqlite:PATH (dsn.DSN.Redacted of a file DSN).
	return dsn.DSN{Scheme: "sqlite", Raw: raw, Database: dsn.CleanPath(rest), Query: q, File: true}, nil
}

func hasFileScheme(raw string) bool {
	lower := strings.ToLower(raw)
	for _, s := range (&Driver{}).Schemes() {
		if strings.HasPrefix(lower, s+":") {
			return true
		}
	}
	return false
}

// AcceptsPlainPath: a path without a scheme is an SQLite file when it ends
// in .db, .sqlite or .sqlite3.
func (*Driver) AcceptsPlainPath(raw string) bool {
	if strings.Contains(raw, "?") {
		return false
	}
	lower := strings.ToLower(raw)
	for _, ext := range []string{".db", ".sqlite", ".sqlite3"} {
		if strings.HasSuffix(lower, ext) {
			return true
		}
	}
	return false
}
