package e2e

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/loanq/loanq/internal/testkit/testdb"
)

// Passwords as people type them, built from / # ? @ : % & and spaces. The
// '%' ones are either a valid escape (decoded) or a stray '%' (refused).
var leakPasswords = []string{
	"Sup3r/S3cret#Long",
	"Sup3rS3cret@TAIL",
	"pa55?w0rd&Kx7",
	"Wx9: y7&z k2%25",
	"Qz8 #?@/:&%x4Lm",
	"@@Rr7//##??Tt9",
}

// Every command, run with each DSN: at best it connects, at worst it fails
// on parse, resolve, connect, authenticate or a server error; never does any
// output hold a 4-character piece of the password.
var leakCommands = [][]string{
	{"task", "list"},
	{"--output", "json", "task", "list"},
	{"task", "create", "t", "--where", "1=1"},
	{"task", "show", "t"},
	{"work", "get", "t", "--timeout", "1s"},
	{"work", "status", "1"},
	{"disposition", "t", "1", "complete"},
	{"pipeline"},
	{"migrate", "status"},
	{"--output", "json", "migrate", "status"},
	{"migrate", "up"},
	{"sql"},
	{"bench", "--rows", "1", "--workers", "1", "--work", "1ms", "--strategy", "nowait"},
}

// TestDSNPasswordNeverShown runs the loanq binary with passwords typed as
// they are on SQLite, PostgreSQL and MariaDB DSNs: unreachable and
// unresolvable hosts, missing databases, bad options, a wrong password, and
// (MariaDB) a user created with that very password, which must connect: the
// password reached the server as typed.
func TestDSNPasswordNeverShown(t *testing.T) {
	t.Parallel()
	pg, err := url.Parse(testdb.Fresh(t, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	my, err := url.Parse(testdb.Fresh(t, "mysql"))
	if err != nil {
		t.Fatal(err)
	}
	myDB := strings.TrimPrefix(my.Path, "/")
	_, admin := testdb.Open(t, testdb.BaseDSN("mysql"))
	ctx := context.Background()

	for i, pw := range leakPasswords {
		decoded, decErr := url.PathUnescape(pw)
		type dsnCase struct {
			name, dsn string
			connects  bool // the DSN must work: exit 0 on task list
			// actAs is the user the commands act as (--user): an account
			// of its own acts only as itself (docs/security.md), and
			// task list refuses another name as work get does.
			actAs string
		}
		cases := []dsnCase{
			{"sqlite with a user", "sqlite://u:" + pw + "@h/x.db", false, ""},
			{"postgres unreachable", "postgres://postgres:" + pw + "@127.0.0.1:1/x?connect_timeout=5", false, ""},
			{"postgres unresolvable", "postgres://postgres:" + pw + "@loanq-no-such-host.invalid:5432/x?connect_timeout=5", false, ""},
			{"postgres no database", "postgres://postgres:" + pw + "@" + pg.Host + "/loanq_no_such_db?sslmode=disable", false, ""},
			{"postgres bad parameter", "postgres://postgres:" + pw + "@" + pg.Host + pg.Path + "?sslmode=disable&lock_timeout=abc", false, ""},
			{"postgresql bad port", "postgresql://postgres:" + pw + "@" + pg.Hostname() + ":port/x", false, ""},
			{"mysql unreachable", "mysql://root:" + pw + "@127.0.0.1:1/x", false, ""},
			{"mariadb wrong password", "mariadb://root:" + pw + "@" + my.Host + my.Path, false, ""},
			{"mysql bad option", "mysql://root:" + pw + "@" + my.Host + my.Path + "?tls=bogus", false, ""},
			{"mysql no database", "mysql://root:" + pw + "@" + my.Host + "/", false, ""},
		}
		if decErr == nil {
			// A MariaDB account whose password is exactly this one, allowed
			// only into this test's database, dropped at the end.
			user := "loanq_pw_" + strings.TrimPrefix(myDB, "loanq_t_") + string(rune('a'+i))
			if _, err := admin.ExecContext(ctx, "CREATE USER '"+user+"'@'%' IDENTIFIED BY '"+strings.ReplaceAll(decoded, "'", "''")+"'"); err != nil {
				t.Fatalf("CREATE USER: %v", err)
			}
			t.Cleanup(func() { admin.ExecContext(context.Background(), "DROP USER '"+user+"'@'%'") })
			if _, err := admin.ExecContext(ctx, "GRANT ALL ON "+myDB+".* TO '"+user+"'@'%'"); err != nil {
				t.Fatalf("GRANT: %v", err)
			}
			// A password with an '@' followed by '/', '?' or '#' cannot be
			// told from a DSN with an '@' after the host: refused, and
			// accepted once percent-encoded as the message says.
			typed := pw
			if at := strings.Index(pw, "@"); at >= 0 && strings.ContainsAny(pw[at:], "/?#") {
				r := loanq(t, "mysql://"+user+":"+pw+"@"+my.Host+my.Path, "ana", "task", "list")
				if r.code != 2 || !strings.Contains(r.stderr, "percent-encode") {
					t.Errorf("ambiguous password %q: exit %d, want 2 saying to percent-encode: %s", pw, r.code, r.stderr)
				}
				typed = url.PathEscape(decoded)
				typed = strings.NewReplacer("@", "%40", "?", "%3F", "#", "%23").Replace(typed)
			}
			cases = append(cases,
				dsnCase{"mariadb own user", "mariadb://" + user + ":" + typed + "@" + my.Host + my.Path, true, user},
				dsnCase{"mysql own user", "mysql://" + user + ":" + typed + "@" + my.Host + my.Path, true, user},
				dsnCase{"postgres trusted", "postgres://postgres:" + typed + "@" + pg.Host + pg.Path + "?sslmode=disable", true, ""})
		}
		for _, c := range cases {
			if c.connects {
				// A password that decodes and is accepted: the first run
				// creates the schema, so every later command reaches the
				// database and its own error paths.
				if r := loanq(t, c.dsn, "ana", "migrate", "up"); r.code != 0 {
					t.Errorf("%s %q: migrate up exit %d: %s%s", c.name, pw, r.code, r.stdout, r.stderr)
				}
			}
			commands := leakCommands
			if i >= 2 {
				// Every command shares the connect path: the first two
				// passwords go through all of them, the others through a few.
				commands = [][]string{{"task", "list"}, {"--output", "json", "migrate", "status"}, {"work", "get", "t", "--timeout", "1s"}}
			}
			for _, args := range commands {
				actAs := c.actAs
				if actAs == "" {
					actAs = "ana"
				}
				r := loanq(t, c.dsn, actAs, args...)
				out := r.stdout + r.stderr
				for _, secret := range []string{pw, decoded} {
					if w := piece(out, secret, c.dsn[:strings.Index(c.dsn, "://")+3]+"@"+my.Host+pg.Host+my.Path+pg.Path); w != "" {
						t.Errorf("%s, password %q, loanq %v: output holds %q:\n%s", c.name, pw, args, w, out)
					}
				}
				if !c.connects && args[0] == "task" && r.code == 0 {
					t.Errorf("%s %q: task list succeeded", c.name, pw)
				}
				if c.connects && len(args) == 2 && args[1] == "list" && r.code != 0 {
					t.Errorf("%s %q: loanq %v exit %d: %s", c.name, pw, args, r.code, out)
				}
				if r.code != 0 && strings.Count(strings.TrimSpace(r.stderr), "cannot connect") > 1 {
					t.Errorf("%s %q: the error is printed twice: %s", c.name, pw, r.stderr)
				}
			}
		}
	}
}

// piece returns a 4-character piece of secret (holding a letter or digit)
// found in out and not in public, or "".
func piece(out, secret, public string) string {
	for i := 0; i+4 <= len(secret); i++ {
		w := secret[i : i+4]
		if strings.ContainsAny(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") &&
			strings.Contains(out, w) && !strings.Contains(public, w) {
			return w
		}
	}
	return ""
}

// TestDSNPrintedPartsWhole: a password that shares pieces with the user and
// the database name (docs/security.md: Pw_sec_proc with the user sec_proc and
// the database sec_pg printed as %2A%2A%2A%2A%2A%2A:***@…/%2A%2A%2Apg). The
// user and the database print as they are, the password as ***, and the
// "Try:" lines of demo seed are commands that work once the password is
// typed in place of the ***. (The test PostgreSQL trusts its local
// connections: any password connects.)
func TestDSNPrintedPartsWhole(t *testing.T) {
	t.Parallel()
	pg, err := url.Parse(testdb.Fresh(t, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	db := strings.TrimPrefix(pg.Path, "/")
	password := "Pw_" + pg.User.Username() + "_" + db
	raw := "postgres://" + pg.User.Username() + ":" + password + "@" + pg.Host + "/" + db + "?sslmode=disable"
	want := "postgres://" + pg.User.Username() + ":***@" + pg.Host + "/" + db + "?sslmode=disable"

	r := loanq(t, raw, "ana", "demo", "seed", "--loans", "20")
	if r.code != 0 {
		t.Fatalf("demo seed: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	out := r.stdout + r.stderr
	if strings.Contains(out, password) {
		t.Fatalf("demo seed printed the password:\n%s", out)
	}
	try := "--db '" + want + "' task list"
	if !strings.Contains(r.stdout, try) {
		t.Fatalf("demo seed's Try lines do not hold %q:\n%s", try, r.stdout)
	}
	// The Try line's DSN with the password typed again connects.
	if r := loanq(t, strings.Replace(want, "***", password, 1), "ana", "task", "list"); r.code != 0 || !strings.Contains(r.stdout, "verify-bank") {
		t.Errorf("task list with the printed DSN: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
}
