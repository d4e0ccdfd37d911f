package dsn_test

import (
	"strings"
	"testing"

	"github.com/loanq/loanq/drivers"
	_ "github.com/loanq/loanq/drivers/all"
	"github.com/loanq/loanq/problem"
)

// The DSN forms of README.md ("Connecting") and what each selects.
func TestParseDSNForms(t *testing.T) {
	cases := []struct{ raw, driver, host, database, redacted string }{
		{"", "sqlite", "", "loanq.db", "sqlite:loanq.db"}, // the zero-set-up default
		{"sqlite:data/q.db", "sqlite", "", "data/q.db", "sqlite:data/q.db"},
		{"file:data/q.db", "sqlite", "", "data/q.db", "sqlite:data/q.db"},
		{"work.db", "sqlite", "", "work.db", "sqlite:work.db"}, // a plain *.db path
		{"postgres://app:pw@db:5432/loans?sslmode=disable", "postgres", "db:5432", "loans", "postgres://app:***@db:5432/loans?sslmode=disable"},
		{"postgresql://app@db/loans", "postgres", "db", "loans", "postgresql://app@db/loans"},
		{"postgres:///loans?host=/var/run/postgresql", "postgres", "", "loans", "postgres:///loans?host=%2Fvar%2Frun%2Fpostgresql"},
		{"mysql://root:pw@127.0.0.1:3306/test", "mysql", "127.0.0.1:3306", "test", "mysql://root:***@127.0.0.1:3306/test"},
		{"mariadb://root:pw@127.0.0.1:3306/test", "mysql", "127.0.0.1:3306", "test", "mariadb://root:***@127.0.0.1:3306/test"},
		{"oracle://scott:tiger@db:1521/XEPDB1", "oracle", "db:1521", "XEPDB1", "oracle://scott:***@db:1521/XEPDB1"},
	}
	for _, c := range cases {
		drv, d, err := drivers.ParseDSN(c.raw)
		if err != nil {
			t.Errorf("%q: %v", c.raw, err)
			continue
		}
		if drv.Name() != c.driver || d.Host != c.host || d.Database != c.database || d.Redacted() != c.redacted {
			t.Errorf("%q: driver %q host %q database %q redacted %q; want %q %q %q %q",
				c.raw, drv.Name(), d.Host, d.Database, d.Redacted(), c.driver, c.host, c.database, c.redacted)
		}
	}
}

// Passwords typed as they are: the last '@' ends the user information, so
// the password holds '/', '#', '?', '@', ':', '&' and spaces; a
// percent-encoded password is decoded.
func TestParseDSNPasswordAsTyped(t *testing.T) {
	cases := []struct{ raw, user, password, host, database string }{
		{"postgres://app:Sup3r/S3cret#Long@127.0.0.1:5432/loans", "app", "Sup3r/S3cret#Long", "127.0.0.1:5432", "loans"},
		{"postgres://app:Sup3rS3cret@TAIL@127.0.0.1:5432/loans", "app", "Sup3rS3cret@TAIL", "127.0.0.1:5432", "loans"},
		{"mysql://root:pa?ss@127.0.0.1:3306/x", "root", "pa?ss", "127.0.0.1:3306", "x"},
		{"mariadb://root:a b:c&d@127.0.0.1:3306/x?tls=false", "root", "a b:c&d", "127.0.0.1:3306", "x"},
		{"oracle://scott:ti%40ger%2F1@db:1521/XE", "scott", "ti@ger/1", "db:1521", "XE"},
		{"postgres://app@db/loans?password=pw%26x", "app", "pw&x", "db", "loans"},
	}
	for _, c := range cases {
		_, d, err := drivers.ParseDSN(c.raw)
		if err != nil {
			t.Errorf("%q: %v", c.raw, err)
			continue
		}
		if d.User != c.user || d.Password != c.password || d.Host != c.host || d.Database != c.database {
			t.Errorf("%q: user %q password %q host %q database %q; want %q %q %q %q", c.raw, d.User, d.Password, d.Host, d.Database, c.user, c.password, c.host, c.database)
		}
		if strings.Contains(d.Redacted(), c.password) {
			t.Errorf("%q: Redacted() %q shows the password", c.raw, d.Redacted())
		}
	}
}

// Each driver checks its own forms and aliases: mariadb:// exactly as mysql://.
func TestDSNAliasesCheckedAlike(t *testing.T) {
	for _, pair := range [][2]string{
		{"mysql://u:p@/", "mariadb://u:p@/"},
		{"mysql://u:p@h:3306", "mariadb://u:p@h:3306"},
		{"mysql://u:p@h:3306/a/b", "mariadb://u:p@h:3306/a/b"},
		{"mysql://u:p@h:3306/db?tls=bogus", "mariadb://u:p@h:3306/db?tls=bogus"},
		{"postgres://u:p@/db", "postgresql://u:p@/db"},
		{"postgres://u:p@h/db?connect_timeout=x", "postgresql://u:p@h/db?connect_timeout=x"},
	} {
		for _, raw := range pair {
			_, _, err := drivers.ParseDSN(raw)
			if err == nil || problem.KindOf(err) != problem.Usage {
				t.Errorf("%q: want bad input, got %v", raw, err)
			}
		}
	}
}

// Forms that cannot be read one way are refused, saying to percent-encode,
// without any part of the password.
func TestParseDSNRefusesAmbiguous(t *testing.T) {
	for _, c := range []struct{ raw, password string }{
		{"postgres://u:pw@h/db?application_name=a@b", "pw@h/db?application_name=a"},
		{"mysql://u:50%off!@h:3306/db", "50%off!"},
		{"sqlite://u:s3cretPW@h/x.db", "s3cretPW"},
	} {
		_, _, err := drivers.ParseDSN(c.raw)
		if err == nil {
			t.Errorf("%q: accepted", c.raw)
			continue
		}
		if leaked := leak(err.Error(), c.password, "u h db x.db"); leaked != "" {
			t.Errorf("%q: message %q shows %q", c.raw, err, leaked)
		}
		if !strings.Contains(err.Error(), "percent-encode") && !strings.Contains(err.Error(), "SQLite") {
			t.Errorf("%q: message %q does not say to percent-encode", c.raw, err)
		}
	}
}

// leak returns a 4-character piece of password found in out that is not
// also in public (the parts of the DSN that are not secret), or "".
func leak(out, password, public string) string {
	for i := 0; i+4 <= len(password); i++ {
		w := password[i : i+4]
		if strings.Contains(out, w) && !strings.Contains(public, w) {
			return w
		}
	}
	return ""
}
