// Package dsn reads and prints loanq's connection strings (DSNs). It knows
// the URL syntax every server driver shares and how to keep a password out
// of everything loanq prints; which database a DSN names, and the forms and
// aliases each database accepts, are the drivers' business (package drivers
// picks the driver by scheme; each driver's ParseDSN checks its own forms).
package dsn

import (
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/loanq/loanq/problem"
)

// Default is the zero-set-up database: an SQLite file in the current directory.
const Default = "sqlite:loanq.db"

// DSN is a parsed connection string. Password is kept apart so that nothing
// printed (errors, `migrate status`, logs) can contain it.
type DSN struct {
	// Scheme is the scheme as written, lower-cased (postgres, postgresql,
	// mysql, mariadb, oracle). A file DSN's is the name it prints as
	// (file:x.db prints as sqlite:x.db).
	Scheme   string
	Raw      string // as given; never print it, use Redacted
	User     string
	Password string
	Host     string // host:port
	Database string // database name, Oracle service, or SQLite file path
	Query    url.Values
	File     bool // a file database (SQLite): printed as SCHEME:PATH
}

// SchemeOf returns the lower-cased scheme of raw ("postgres" in
// postgres://…, "sqlite" in sqlite:x.db). One letter is a Windows drive.
func SchemeOf(raw string) (string, bool) {
	i := strings.Index(raw, ":")
	if i < 2 {
		return "", false
	}
	for j, r := range raw[:i] {
		letter := (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
		if !letter && (j == 0 || !(r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.')) {
			return "", false
		}
	}
	return strings.ToLower(raw[:i]), true
}

// ParseURL splits a SCHEME://user:password@host:port/path?query DSN the way
// users mean it when they type a password as it is: the LAST '@' before the
// host ends the user information, so a password may hold '/', '#', '?', ':',
// '&', spaces and '@' (as libpq and go-sql-driver/mysql read their own
// formats). The user is everything up to the first ':'. A password may also be
// percent-encoded. Forms that cannot be read one way only are refused with a
// message that shows no part of the password.
func ParseURL(raw string) (DSN, error) {
	raw = strings.TrimSpace(raw)
	i := strings.Index(raw, "://")
	if i <= 0 {
		return DSN{}, problem.Usagef("malformed database DSN %s: expected SCHEME://user:pass@host:port/name, e.g. postgres://app@127.0.0.1:5432/loans", RedactLoose(raw))
	}
	scheme := strings.ToLower(raw[:i])
	rest := raw[i+3:]
	d := DSN{Scheme: scheme, Raw: raw}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		userinfo := rest[:at]
		rest = rest[at+1:]
		user, pass, hasPass := strings.Cut(userinfo, ":")
		if first := strings.Index(pass, "@"); first >= 0 && strings.ContainsAny(pass[first:], "/?#") {
			// "u:p@h/db?x=a@b": either a password holding "@h/db?x=a" or a
			// query holding an '@'; refuse rather than guess.
			return DSN{}, problem.Usagef("ambiguous database DSN %s: the part before the last '@' holds another '@' followed by '/', '?' or '#'; percent-encode the password (e.g. '@' as %%40, '/' as %%2F) or any '@' after the host", scheme+"://***@…")
		}
		var err error
		if d.User, err = url.PathUnescape(user); err != nil || strings.ContainsAny(user, "/?#") {
			return DSN{}, problem.Usagef("malformed database DSN %s: the user name holds a '%%', '/', '?' or '#' that is not percent-encoded", scheme+"://***@…")
		}
		if hasPass {
			if d.Password, err = url.PathUnescape(pass); err != nil {
				return DSN{}, problem.Usagef("malformed database DSN %s: the password holds a '%%' that does not start a percent-escape; write '%%' as %%25 (percent-encode the password)", redactUser(scheme, d.User, rest))
			}
			if d.Password == "" {
				hasPass = false
			}
		}
	}
	u, err := url.Parse(scheme + "://" + rest)
	if err != nil {
		return DSN{}, problem.Usagef("malformed database DSN %s: %s", redactUser(scheme, d.User, "…"), urlErrorText(err))
	}
	d.Host = u.Host
	d.Database = strings.TrimPrefix(u.Path, "/")
	d.Query = u.Query()
	// A password given as a parameter (libpq's ?password=) is a password too:
	// kept apart like the other, never printed.
	if pw := d.Query.Get("password"); pw != "" {
		if d.Password == "" {
			d.Password = pw
		}
		d.Query.Del("password")
	}
	return d, nil
}

// redactUser prints scheme://user:***@rest for messages about a DSN whose
// password was already split off.
func redactUser(scheme, user, rest string) string {
	if user == "" {
		return scheme + "://***@" + rest
	}
	return scheme + "://" + url.User(user).String() + ":***@" + rest
}

func urlErrorText(err error) string {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err.Error()
	}
	return err.Error()
}

// CheckHostDB is the check shared by the server drivers whose DSN must name
// a host, a numeric port if any, and one path segment (database or service).
func CheckHostDB(d DSN, dbName, example string) error {
	if d.Host == "" {
		return problem.Usagef("malformed DSN %s: no host (e.g. %s)", d.Redacted(), example)
	}
	hostPort := d.Host[strings.LastIndex(d.Host, "]")+1:] // after an IPv6 literal
	if c := strings.LastIndex(hostPort, ":"); c >= 0 && !allDigits(hostPort[c+1:]) {
		port := hostPort[c+1:]
		return problem.Usagef("malformed DSN %s: port %q is not a number (e.g. %s)", d.Redacted(), port, example)
	}
	if d.Database == "" || strings.Contains(d.Database, "/") {
		return problem.Usagef("malformed DSN %s: the path must be the %s (e.g. %s)", d.Redacted(), dbName, example)
	}
	return nil
}

// CleanPath cleans and trims a file path until it is stable, so that the
// printed (Redacted) form of a file DSN parses back to the same file.
func CleanPath(p string) string {
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

var (
	plainOption = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.-]{1,40}$`) })
	plainValue  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_./,:-]{1,80}$`) }) // host=/var/run/postgresql
)

// Redacted is the DSN as it may be printed: the password replaced by ***.
// A file DSN (no host) prints as SCHEME:PATH.
//
// The public parts (user, host, database, options) print as they are, so
// that the printed form is a DSN to type again with the password put back
// (the "Try:" lines of demo seed). A part that holds the whole password is
// hidden whole: *** for the user, host or database, left out for an option.
// Never a piece of a part: hiding the pieces a part shares with the
// password (Pw_sec_proc, user sec_proc: ******) tells which pieces those
// are, and leaves a DSN nobody can use.
func (d DSN) Redacted() string {
	if d.File {
		return d.Scheme + ":" + d.Database
	}
	s := d.assemble(d.holdsPassword)
	// A password may also run across the separators between two parts
	// ("db?ssl" in .../db?sslmode=disable): then every part is hidden.
	if d.Password != "" {
		printed := strings.TrimPrefix(s, d.Scheme+"://")
		for _, side := range strings.SplitN(printed, ":***@", 2) {
			if d.holdsPassword(side) {
				return d.assemble(func(string) bool { return true })
			}
		}
	}
	return s
}

// assemble prints the DSN with the password as *** and each public part for
// which hide says so (as parsed or as encoded) as *** or, an option, left out.
func (d DSN) assemble(hide func(string) bool) string {
	part := func(s, encoded string) string {
		if s != "" && (hide(s) || hide(encoded)) {
			return "***"
		}
		return encoded
	}
	var b strings.Builder
	b.WriteString(d.Scheme + "://")
	if d.User != "" {
		b.WriteString(part(d.User, url.User(d.User).String()))
		if d.Password != "" {
			b.WriteString(":***")
		}
		b.WriteString("@")
	}
	b.WriteString(part(d.Host, strings.TrimPrefix((&url.URL{Host: d.Host}).String(), "//")))
	b.WriteString("/" + part(d.Database, strings.TrimPrefix((&url.URL{Path: "/" + d.Database}).EscapedPath(), "/")))
	// Only plain options (sslmode=disable, connect_timeout=5) are shown: a
	// password may hide in a parameter.
	q := url.Values{}
	for k, v := range d.Query {
		if strings.Contains(strings.ToLower(k), "pass") || !plainOption().MatchString(k) || hide(k) {
			continue
		}
		for _, x := range v {
			if plainValue().MatchString(x) && !hide(x) && !hide(url.QueryEscape(x)) {
				q.Add(k, x)
			}
		}
	}
	if len(q) > 0 {
		b.WriteString("?" + q.Encode())
	}
	return b.String()
}

// passwordForms are the ways the password may be written: as it is and
// percent-encoded as a query value, a path and user information.
func (d DSN) passwordForms() []string {
	if d.Password == "" {
		return nil
	}
	return []string{d.Password, url.QueryEscape(d.Password), url.PathEscape(d.Password), url.UserPassword("", d.Password).String()[1:]}
}

// holdsPassword reports whether s holds the whole password in any of its
// forms.
func (d DSN) holdsPassword(s string) bool {
	for _, form := range d.passwordForms() {
		if strings.Contains(s, form) {
			return true
		}
	}
	return false
}

// Scrub removes the password from a message a driver or server produced: the
// password itself and its escaped forms, each replaced by ***. Only the whole
// password: the drivers are never given it in a string (see each driver's
// ParseDSN), so a message holds it only where a public part does, and
// hiding pieces would garble the public parts it quotes (database "sec_pg"
// as "***pg") and tell which pieces those are.
func (d DSN) Scrub(msg string) string {
	for _, form := range d.passwordForms() {
		msg = strings.ReplaceAll(msg, form, "***")
	}
	return msg
}

// RedactLoose hides everything between "://" and the last '@' of a string
// that did not parse, so even a malformed DSN's password is never echoed.
func RedactLoose(raw string) string {
	i := strings.Index(raw, "://")
	if i < 0 {
		if at := strings.LastIndex(raw, "@"); at >= 0 {
			return "***" + raw[at:]
		}
		return raw
	}
	rest := raw[i+3:]
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return raw
	}
	return raw[:i+3] + "***" + rest[at:]
}
