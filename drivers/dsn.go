package drivers

import (
	"net/url"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/loanq/loanq/problem"
)

// DefaultDSN is the zero-set-up database: an SQLite file in the current directory.
const DefaultDSN = "sqlite:loanq.db"

// DSN is a parsed connection string. Password is kept apart so that nothing
// printed (errors, `migrate status`, logs) can contain it.
type DSN struct {
	Scheme   string // postgres, mysql, oracle, sqlite
	Raw      string // as given; never print it, use Redacted
	User     string
	Password string
	Host     string // host:port
	Database string // database name, Oracle service, or SQLite file path
	Query    url.Values
}

// ParseDSN understands the forms of SPEC §5:
//
//	postgres://user:pass@host:port/db?sslmode=disable  (also postgresql://)
//	mysql://user:pass@host:port/db
//	oracle://user:pass@host:port/service
//	sqlite:PATH, sqlite://PATH, or a plain path ending in .db/.sqlite/.sqlite3
func ParseDSN(raw string) (DSN, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		raw = DefaultDSN
	}
	lower := strings.ToLower(raw)
	if strings.HasPrefix(lower, "sqlite:") || strings.HasPrefix(lower, "file:") {
		return parseSQLite(raw)
	}
	if !strings.Contains(raw, "://") && !strings.Contains(raw, "?") {
		for _, ext := range []string{".db", ".sqlite", ".sqlite3"} {
			if strings.HasSuffix(lower, ext) {
				return DSN{Scheme: "sqlite", Raw: raw, Database: cleanPath(raw), Query: url.Values{}}, nil
			}
		}
		return DSN{}, problem.Usagef("malformed database DSN %q: expected postgres://…, mysql://…, oracle://…, sqlite:PATH or a path ending in .db", redactLoose(raw))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return DSN{}, problem.Usagef("malformed database DSN %s: %s", redactLoose(raw), scrubURLError(err))
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme == "" || u.Opaque != "" {
		return DSN{}, problem.Usagef("malformed database DSN %q: expected SCHEME://user:pass@host:port/name, e.g. postgres://app@127.0.0.1:5432/loans", redactLoose(raw))
	}
	if scheme == "postgresql" {
		scheme = "postgres"
	}
	if (u.User == nil && strings.Contains(raw, "@")) || strings.Contains(u.Path+u.RawQuery+u.Fragment, "@") {
		// An '@' that did not end the user info: the password may be lying in
		// the path or query, where it would be printed.
		return DSN{}, problem.Usagef("malformed database DSN %s: user:password@ must follow %s:// directly (percent-encode '@', '/', '?' and '#' in a password)", redactLoose(raw), scheme)
	}
	d := DSN{Scheme: scheme, Raw: raw, Host: u.Host, Query: u.Query()}
	if u.User != nil {
		d.User = u.User.Username()
		d.Password, _ = u.User.Password()
	}
	d.Database = strings.TrimPrefix(u.Path, "/")
	switch scheme {
	case "postgres":
		if d.Host == "" && d.Query.Get("host") == "" {
			return DSN{}, problem.Usagef("malformed PostgreSQL DSN %s: no host (e.g. postgres://user@127.0.0.1:5432/db)", d.Redacted())
		}
	case "mysql", "oracle":
		if d.Host == "" {
			return DSN{}, problem.Usagef("malformed %s DSN %s: no host (e.g. %s://user:pass@127.0.0.1:%s/%s)", scheme, d.Redacted(), scheme, map[string]string{"mysql": "3306", "oracle": "1521"}[scheme], map[string]string{"mysql": "db", "oracle": "SERVICE"}[scheme])
		}
		if d.Database == "" || strings.Contains(d.Database, "/") {
			what := map[string]string{"mysql": "database name", "oracle": "service name"}[scheme]
			return DSN{}, problem.Usagef("malformed %s DSN %s: the path must be the %s (e.g. %s://user:pass@host:port/NAME)", scheme, d.Redacted(), what, scheme)
		}
		if u.Port() != "" && !allDigits(u.Port()) {
			return DSN{}, problem.Usagef("malformed %s DSN %s: port %q is not a number", scheme, d.Redacted(), u.Port())
		}
	}
	return d, nil
}

func parseSQLite(raw string) (DSN, error) {
	rest := raw[strings.Index(raw, ":")+1:]
	rest = strings.TrimPrefix(rest, "//")
	q := url.Values{}
	if i := strings.Index(rest, "?"); i >= 0 {
		var err error
		q, err = url.ParseQuery(rest[i+1:])
		if err != nil {
			return DSN{}, problem.Usagef("malformed SQLite DSN %q: %v", raw, err)
		}
		rest = rest[:i]
	}
	rest = strings.TrimSpace(rest)
	if rest == "" {
		return DSN{}, problem.Usagef("malformed SQLite DSN %q: no file path (e.g. sqlite:loanq.db)", raw)
	}
	rest = cleanPath(rest)
	return DSN{Scheme: "sqlite", Raw: raw, Database: rest, Query: q}, nil
}

// cleanPath cleans and trims a file path until it is stable, so that the
// printed (Redacted) form of an SQLite DSN parses back to the same file.
func cleanPath(p string) string {
	for p != ":memory:" {
		clean := strings.TrimSpace(filepath.Clean(p))
		if clean == p {
			break
		}
		p = clean
	}
	return p
}

func allDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

var plainOption = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,40}$`)

// Redacted is the DSN as it may be printed: the password replaced by ***.
func (d DSN) Redacted() string {
	if d.Scheme == "sqlite" {
		return "sqlite:" + d.Database
	}
	u := url.URL{Scheme: d.Scheme, Host: d.Host, Path: "/" + d.Database}
	if d.User != "" {
		if d.Password != "" {
			u.User = url.UserPassword(d.User, "xxx")
		} else {
			u.User = url.User(d.User)
		}
	}
	// Only plain options (sslmode=disable, connect_timeout=5) are shown: a
	// password may hide in a parameter, or in a DSN that parsed oddly.
	q := url.Values{}
	for k, v := range d.Query {
		if strings.Contains(strings.ToLower(k), "pass") || !plainOption.MatchString(k) {
			continue
		}
		for _, x := range v {
			if plainOption.MatchString(x) {
				q.Add(k, x)
			}
		}
	}
	u.RawQuery = q.Encode()
	return strings.Replace(u.String(), ":xxx@", ":***@", 1)
}

// Scrub removes the password from a message a driver produced.
func (d DSN) Scrub(msg string) string {
	if d.Password == "" {
		return msg
	}
	msg = strings.ReplaceAll(msg, d.Password, "***")
	if esc := url.QueryEscape(d.Password); esc != d.Password {
		msg = strings.ReplaceAll(msg, esc, "***")
	}
	if esc := url.PathEscape(d.Password); esc != d.Password {
		msg = strings.ReplaceAll(msg, esc, "***")
	}
	return msg
}

// redactLoose hides anything between "://user:" and "@" in a string that did
// not parse, so even a malformed DSN's password is never echoed.
func redactLoose(raw string) string {
	i := strings.Index(raw, "://")
	if i < 0 {
		return raw
	}
	rest := raw[i+3:]
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return raw
	}
	cred := rest[:at]
	if c := strings.Index(cred, ":"); c >= 0 {
		cred = cred[:c] + ":***"
	}
	return raw[:i+3] + cred + rest[at:]
}

func scrubURLError(err error) string {
	var msg string
	if ue, ok := err.(*url.Error); ok {
		msg = ue.Err.Error()
	} else {
		msg = err.Error()
	}
	return msg
}
