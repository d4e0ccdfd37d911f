package drivers

import (
	"net/url"
	"strings"
	"testing"

	"github.com/loanq/loanq/problem"
)

// Any string: ParseDSN never panics, rejects with bad input, and what it
// accepts prints without its password and parses back to the same target.
func FuzzParseDSN(f *testing.F) {
	for _, s := range []string{
		"postgres://u:pw@127.0.0.1:5432/db?sslmode=disable", "postgresql://u@h/db", "mysql://root:@127.0.0.1:3306/test",
		"oracle://scott:tiger@db:1521/XEPDB1", "sqlite:loanq.db", "sqlite://tmp/x.db?_txlock=immediate", "loanq.db", "",
		"ftp://u:pw@h/x", "postgres://u:pw@[::1/x", "mysql://u:pw@h:port/db", "sqlite:", "://", "postgres://h/db?password=pw",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		d, err := ParseDSN(raw)
		if err != nil {
			if problem.KindOf(err) != problem.Usage {
				t.Fatalf("%q: error is not bad input: %v", raw, err)
			}
			return
		}
		red := d.Redacted()
		if u, err := url.Parse(red); d.Password != "" && err == nil && u.User != nil {
			if pw, _ := u.User.Password(); pw != "***" {
				t.Fatalf("%q: Redacted() %q shows password %q", raw, red, pw)
			}
		}
		if u, err := url.Parse(red); err == nil {
			for k, v := range u.Query() {
				if strings.Contains(strings.ToLower(k), "pass") && len(v) > 0 && v[0] != "" {
					t.Fatalf("%q: Redacted() %q shows the %s query parameter", raw, red, k)
				}
			}
		}
		back, err := ParseDSN(red)
		if err != nil {
			t.Fatalf("%q: Redacted() %q does not parse: %v", raw, red, err)
		}
		if back.Scheme != d.Scheme || back.Database != d.Database {
			t.Fatalf("%q: Redacted() %q names another database (%s %s)", raw, red, back.Scheme, back.Database)
		}
	})
}

// A DSN built around a password: no error message and no redacted form may
// contain it, however malformed the rest is.
func FuzzDSNPassword(f *testing.F) {
	f.Add("postgres", "u", "s3cretPW", "127.0.0.1:5432", "db")
	f.Add("mysql", "root", "p@ss:w/rd", "127.0.0.1:port", "")
	f.Add("oracle", "scott", "tiger99", "[::1", "svc/x")
	f.Fuzz(func(t *testing.T, scheme, user, pass, host, path string) {
		if len(pass) < 4 || strings.ContainsAny(pass, "@/?#") {
			return // the password must be recognisable as one
		}
		raw := scheme + "://" + user + ":" + pass + "@" + host + "/" + path
		if strings.Contains(scheme+user+host+path, pass) {
			return // the "password" also appears elsewhere: not a leak test
		}
		d, err := ParseDSN(raw)
		var shown string
		if err != nil {
			shown = err.Error()
		} else {
			shown = d.Redacted()
			if d.Password != "" {
				shown += " " + d.Scrub("connecting with "+d.Password+" failed")
			}
		}
		if strings.Contains(shown, ":"+pass+"@") || strings.Contains(shown, " "+pass+" ") || (d.Password != "" && strings.Contains(shown, " "+d.Password+" ")) {
			t.Fatalf("%q: password shown in %q", raw, shown)
		}
	})
}
