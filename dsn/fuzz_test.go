package dsn_test

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/problem"
)

// Any string: ParseDSN never panics, rejects with bad input, and what it
// accepts prints without its password and parses back to the same target.
func FuzzParseDSN(f *testing.F) {
	for _, s := range []string{
		"postgres://u:pw@127.0.0.1:5432/db?sslmode=disable", "postgresql://u@h/db", "mysql://root:@127.0.0.1:3306/test",
		"oracle://scott:tiger@db:1521/XEPDB1", "sqlite:loanq.db", "sqlite://tmp/x.db?_txlock=immediate", "loanq.db", "",
		"ftp://u:pw@h/x", "postgres://u:pw@[::1/x", "mysql://u:pw@h:port/db", "sqlite:", "://", "postgres://h/db?password=pw",
		"mariadb://u:p@/", "postgres://app:Sup3r/S3cret#Long@127.0.0.1:5432/loans",
		// Found by fuzzing: a user whose escape (%20) runs into the password's piece.
		"postgres:// 00:000:0@0", "postgres:// 000:0000@0",
		// Found by fuzzing: a password made of the user and the separator.
		"postgres://000:000:@0",
		// Found by fuzzing: a password made of the user, the separator and
		// the host.
		"postgres://00:00@0@0",
		// Found by fuzzing: a password made of the host and the path's
		// separator, with no user.
		"postgres://:432/@432",
		// Found by fuzzing: a password that is the host with the separator
		// before it.
		"postgres://:/000@000",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		drv, d, err := drivers.ParseDSN(raw)
		if err != nil {
			if problem.KindOf(err) != problem.Usage {
				t.Fatalf("%q: error is not bad input: %v", raw, err)
			}
			return
		}
		red := d.Redacted()
		// The password never shows, whatever its length. The text on each
		// side of the hidden password is checked on its own: "000:***@"
		// shows the user 000, not a password "000:" (found by fuzzing:
		// postgres://000:000:@0). A password made only of the mask's and the
		// separators' characters is fixed text wherever it prints (found by
		// fuzzing: postgres://0:/@0, the password "/").
		if strings.Trim(d.Password, "*:@/") != "" {
			for _, shown := range strings.SplitN(strings.TrimPrefix(red, d.Scheme+"://"), ":***@", 2) {
				for _, form := range []string{d.Password, url.QueryEscape(d.Password), url.PathEscape(d.Password)} {
					if strings.Contains(shown, form) {
						t.Fatalf("%q: Redacted() %q shows the password", raw, red)
					}
				}
			}
		}
		// Each public part prints as it is or hidden whole, never in
		// pieces: the printed form parses back to the same driver, host,
		// database and user, or *** in their place.
		backDrv, back, err := drivers.ParseDSN(red)
		if err != nil {
			t.Fatalf("%q: Redacted() %q does not parse: %v", raw, red, err)
		}
		same := func(back, orig string) bool { return back == orig || back == "***" }
		if backDrv != drv || !same(back.Database, d.Database) || !same(back.Host, d.Host) || !same(back.User, d.User) {
			t.Fatalf("%q: Redacted() %q names another database (%s %q %q %q)", raw, red, backDrv.Name(), back.User, back.Host, back.Database)
		}
	})
}

var plainName = regexp.MustCompile(`^[A-Za-z0-9_.-]*$`)

// A DSN built around a password. The property: no 4-character piece of the
// password appears in anything loanq may print about the DSN — the parse
// error, the redacted form, a connect error, or a server error that quotes
// the host, database or user as parsed — unless that piece is also public
// (in the scheme, user, host or path) or is fixed message text. Fixed text is
// told apart by a twin run: the same DSN with every letter and digit of the
// password replaced by another of its kind (same symbols at the same places,
// so the same parse path); a piece printed in both runs is message text, a
// piece printed only with the real password is a leak.
//
// And a DSN that parses, with plain user, host and path, carries the password
// exactly as typed (or percent-decoded): the last '@' ends it.
func FuzzDSNPassword(f *testing.F) {
	f.Add("postgres", "u", "s3cretPW", "127.0.0.1:5432", "db")
	f.Add("mysql", "root", "p@ss:w/rd", "127.0.0.1:3306", "x")
	f.Add("mysql", "root", "pa55?word", "127.0.0.1:3306", "x") // printed ":pa55" once
	f.Add("oracle", "scott", "tiger99", "[::1", "svc/x")
	f.Add("postgres", "app", "Sup3r/S3cret#Long", "127.0.0.1:5432", "loans")
	f.Add("postgres", "app", "Sup3rS3cret@TAIL", "127.0.0.1:5432", "loans")
	f.Add("mariadb", "u", "a b&c:d%41", "", "")
	f.Add("sqlite", "u", "s3cretPW", "h", "x.db")
	f.Fuzz(func(t *testing.T, scheme, user, pass, host, path string) {
		if len(pass) < 4 {
			return
		}
		public := scheme + "://" + user + host + "/" + path
		shown := printed(scheme, user, pass, host, path)
		twin := printed(scheme, user, twinOf(pass), host, path)
		for i := 0; i+4 <= len(pass); i++ {
			w := pass[i : i+4]
			if !strings.ContainsAny(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") {
				continue // only symbols: nothing of the password is recognisable
			}
			if strings.Contains(shown, w) && !strings.Contains(twin, w) && !strings.Contains(public, w) {
				t.Fatalf("%q: piece %q of the password shown in %q", scheme+"://"+user+":"+pass+"@"+host+"/"+path, w, shown)
			}
		}

		_, d, err := drivers.ParseDSN(scheme + "://" + user + ":" + pass + "@" + host + "/" + path)
		if err != nil || d.File || !plainName.MatchString(user) || strings.ContainsAny(host+path, "@") {
			return
		}
		want, uerr := url.PathUnescape(pass)
		if uerr != nil {
			t.Fatalf("%q: a password with a stray %% was accepted", pass)
		}
		if d.Password != want {
			t.Fatalf("%s://%s:%s@%s/%s: password %q, want %q (the last '@' ends the password)", scheme, user, pass, host, path, d.Password, want)
		}
	})
}

// printed is everything loanq may print about the DSN: the parse error, or
// the redacted form, a connect error quoting the parsed parts, and the
// parsed parts themselves as a server error would quote them.
func printed(scheme, user, pass, host, path string) string {
	raw := scheme + "://" + user + ":" + pass + "@" + host + "/" + path
	_, d, err := drivers.ParseDSN(raw)
	if err != nil {
		return err.Error()
	}
	quoting := errors.New(fmt.Sprintf("dial tcp: lookup %s: no such host; database %q; user %q; %s", d.Host, d.Database, d.User, d.Password))
	return d.Redacted() + "\n" + drivers.ConnectError(problem.Failure, d, quoting, "hint").Error() + "\n" +
		d.Host + " " + d.Database + " " + d.User + " " + d.Query.Encode()
}

// twinOf replaces each letter and digit by another of its kind, keeping
// hexadecimal digits hexadecimal so percent-escapes stay escapes.
func twinOf(s string) string {
	rot := func(r rune, set string) rune {
		i := strings.IndexRune(set, r)
		return rune(set[(i+1)%len(set)])
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= '0' && r <= '9':
			r = rot(r, "0123456789")
		case r >= 'a' && r <= 'f':
			r = rot(r, "abcdef")
		case r >= 'A' && r <= 'F':
			r = rot(r, "ABCDEF")
		case r >= 'g' && r <= 'z':
			r = rot(r, "ghijklmnopqrstuvwxyz")
		case r >= 'G' && r <= 'Z':
			r = rot(r, "GHIJKLMNOPQRSTUVWXYZ")
		}
		b.WriteRune(r)
	}
	return b.String()
}
