package mysql

import (
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/loanq/loanq/dsn"
	"github.com/loanq/loanq/problem"
)

// ParseDSN reads mysql:// and mariadb:// URLs, both checked the same way:
// a host, a numeric port if any, and the database name as the path. A
// password may be typed as it is (see dsn.ParseURL). The options are
// checked by building the driver's configuration (see Config).
func (*Driver) ParseDSN(raw string) (dsn.DSN, error) {
	d, err := dsn.ParseURL(raw)
	if err != nil {
		return d, err
	}
	if err := dsn.CheckHostDB(d, "database name", d.Scheme+"://user:pass@127.0.0.1:3306/db"); err != nil {
		return dsn.DSN{}, err
	}
	if _, err := Config(d); err != nil {
		return dsn.DSN{}, err
	}
	return d, nil
}

// Config turns a loanq DSN into go-sql-driver/mysql's configuration. The
// query parameters are read the way that driver reads its own DSN: its options
// (tls, timeout, readTimeout, writeTimeout, charset, collation,
// allowCleartextPasswords, …; docs/mysql.md lists them) configure the client,
// and any other parameter is a session variable set on every connection
// (?innodb_lock_wait_timeout=5). The user and password are set on the parsed
// configuration, never put in the string the driver parses, so its errors
// cannot quote them.
//
// loanq needs three settings whatever the DSN says: times parsed into
// time.Time, in UTC, and a session time zone of UTC so DATETIME values mean UTC.
//
// Binds are sent inside the statement (interpolateParams) unless the DSN says
// otherwise: without it, every statement with binds is a prepare, then an
// execute — two round trips where one does (an engine loop of work get +
// complete sent 18 instead of 10; BENCHMARKS.md). The driver escapes the
// values for the connection's character set and refuses the multibyte sets
// where that is unsafe (GBK, Big5, SJIS, …), so a DSN naming a charset or a
// collation keeps the driver's default (prepared statements).
func Config(target dsn.DSN) (*gomysql.Config, error) {
	q := target.Query
	native := "tcp(" + target.Host + ")/" + target.Database
	if len(q) > 0 {
		native += "?" + q.Encode()
	}
	cfg, err := gomysql.ParseDSN(native)
	if err != nil {
		return nil, problem.Usagef("malformed MySQL DSN %s: %s", target.Redacted(), target.Scrub(err.Error()))
	}
	// Two of the driver's options are refused: loanq needs neither, and each
	// hands an attacker more than loanq ever would. Read from the driver's
	// own configuration, so every spelling it accepts (=true, =1, =True, the
	// last of a repeated option) is caught.
	if cfg.MultiStatements {
		return nil, problem.Usagef("MySQL DSN %s: multiStatements is refused: it lets one statement string carry several statements, so text that reaches a statement could run statements of its own; loanq sends one at a time: remove the option", target.Redacted())
	}
	if cfg.AllowAllFiles {
		return nil, problem.Usagef("MySQL DSN %s: allowAllFiles is refused: it lets the server (or whoever answers as it) read any local file this process can read, through LOAD DATA LOCAL INFILE; loanq loads no files: remove the option", target.Redacted())
	}
	cfg.User = target.User
	cfg.Passwd = target.Password
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	if !q.Has("interpolateParams") && !q.Has("charset") && !q.Has("collation") {
		cfg.InterpolateParams = true
	}
	if !q.Has("timeout") {
		cfg.Timeout = 10 * time.Second
	}
	// The driver would also log lost connections on stderr ("[mysql] … packets.go:58
	// unexpected EOF") next to the error loanq returns: one line per error.
	cfg.Logger = &gomysql.NopLogger{}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	return cfg, nil
}
