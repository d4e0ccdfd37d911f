package dsn_test

import (
	"strings"
	"testing"

	"github.com/loanq/loanq/drivers"
	_ "github.com/loanq/loanq/drivers/all"
	"github.com/loanq/loanq/problem"
)

// The DSN forms of README.md ("Connecting to a server") and docs/commands.md
// (passwords) and what each selects.
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

// A public part (user, host, database, option) prints as it is, or hidden
// whole when it holds the whole password; never in pieces. Hiding the
// 4-character pieces a part shares with the password printed the user
// sec_proc of the password Pw_sec_proc as %2A%2A%2A%2A%2A%2A and its database
// sec_pg as %2A%2A%2Apg (docs/security.md): it told which pieces are in the
// password, and demo seed's "Try:" lines named no database.
func TestRedactedHidesPartsWhole(t *testing.T) {
	cases := []struct{ name, raw, redacted string }{
		{"pieces shared with the password", "postgres://sec_proc:Pw_sec_proc@127.0.0.1:5432/sec_pg",
			"postgres://sec_proc:***@127.0.0.1:5432/sec_pg"},
		{"the password is the user", "postgres://sec_proc:sec_proc@127.0.0.1:5432/sec_pg",
			"postgres://***:***@127.0.0.1:5432/sec_pg"},
		{"the password is in the database name", "mysql://app:loans@127.0.0.1:3306/loans_test",
			"mysql://app:***@127.0.0.1:3306/***"},
		{"the password is the port", "postgres://app:5432@127.0.0.1:5432/loans",
			"postgres://app:***@***/loans"},
		{"the password is an option's value", "postgres://app:disable@db/loans?sslmode=disable&connect_timeout=5",
			"postgres://app:***@db/loans?connect_timeout=5"},
		{"no password", "postgres://sec_proc@127.0.0.1:5432/sec_pg?sslmode=disable",
			"postgres://sec_proc@127.0.0.1:5432/sec_pg?sslmode=disable"},
		{"an empty password", "mysql://root:@127.0.0.1:3306/test", "mysql://root@127.0.0.1:3306/test"},
		// Short passwords too: one in a public part is hidden there (a
		// 3-character password equal to the database name would otherwise
		// print as it), one that is not leaves the parts as they are.
		{"a short password in the database name", "oracle://scott:XE@db:1521/XEPDB1", "oracle://scott:***@db:1521/***"},
		{"a short password elsewhere", "oracle://scott:q@db:1521/XEPDB1", "oracle://scott:***@db:1521/XEPDB1"},
		{"a one-character password in the host", "postgres://app:1@127.0.0.1/loans", "postgres://app:***@***/loans"},
		// The password runs across a separator between two parts: every
		// part is hidden.
		{"the password spans parts", "postgres://app:loans?sslm@db/loans?sslmode=disable", "postgres://***:***@***/***"},
	}
	for _, c := range cases {
		_, d, err := drivers.ParseDSN(c.raw)
		if err != nil {
			t.Errorf("%s: %q: %v", c.name, c.raw, err)
			continue
		}
		if got := d.Redacted(); got != c.redacted {
			t.Errorf("%s: %q printed as %q, want %q", c.name, c.raw, got, c.redacted)
		}
	}
}

// Scrub hides the password in a driver's or a server's message, as typed or
// percent-encoded, and only the password: the public parts it quotes stay
// readable.
func TestScrubHidesOnlyThePassword(t *testing.T) {
	_, d, err := drivers.ParseDSN("postgres://sec_proc:Pw_sec%20proc@127.0.0.1:5432/sec_pg")
	if err != nil {
		t.Fatal(err)
	}
	msg := `user "sec_proc", database "sec_pg": Pw_sec proc, Pw_sec+proc, Pw_sec%20proc`
	want := `user "sec_proc", database "sec_pg": ***, ***, ***`
	if got := d.Scrub(msg); got != want {
		t.Errorf("Scrub(%q) = %q, want %q", msg, got, want)
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
