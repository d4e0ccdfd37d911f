package drivers

import "testing"

// The DSN forms of SPEC §5 and what each selects.
func TestParseDSNForms(t *testing.T) {
	cases := []struct{ raw, scheme, host, database, redacted string }{
		{"", "sqlite", "", "loanq.db", "sqlite:loanq.db"}, // the zero-set-up default
		{"sqlite:data/q.db", "sqlite", "", "data/q.db", "sqlite:data/q.db"},
		{"work.db", "sqlite", "", "work.db", "sqlite:work.db"}, // a plain *.db path
		{"postgres://app:pw@db:5432/loans?sslmode=disable", "postgres", "db:5432", "loans", "postgres://app:***@db:5432/loans?sslmode=disable"},
		{"postgresql://app@db/loans", "postgres", "db", "loans", "postgres://app@db/loans"},
		{"mysql://root:pw@127.0.0.1:3306/test", "mysql", "127.0.0.1:3306", "test", "mysql://root:***@127.0.0.1:3306/test"},
		{"oracle://scott:tiger@db:1521/XEPDB1", "oracle", "db:1521", "XEPDB1", "oracle://scott:***@db:1521/XEPDB1"},
	}
	for _, c := range cases {
		d, err := ParseDSN(c.raw)
		if err != nil {
			t.Errorf("%q: %v", c.raw, err)
			continue
		}
		if d.Scheme != c.scheme || d.Host != c.host || d.Database != c.database || d.Redacted() != c.redacted {
			t.Errorf("%q: scheme %q host %q database %q redacted %q; want %q %q %q %q",
				c.raw, d.Scheme, d.Host, d.Database, d.Redacted(), c.scheme, c.host, c.database, c.redacted)
		}
	}
}
