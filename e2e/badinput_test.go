package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/loanq/loanq/internal/testkit/testdb"
)

// secret is the password of every DSN in the matrix that has one: it must
// never appear in any output.
const secret = "s3cretPW"

type badInput struct {
	name string
	user string
	args []string
	code int    // exit code (docs/commands.md, "Exit codes")
	says string // a piece of the message that names the problem
}

// TestBadInputChangesNothing runs every command with bad input on every
// database: each answer has the exit code docs/commands.md gives, one line naming the
// problem, no stack trace and no password, and the loanq tables are exactly as
// they were before.
func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, e := prepare(t, dsn, 20)
		mustOK(t, dsn, "admin", "task", "create", "t", "--where", "eligible = 1", "--order", "priority", "--max-active", "5")
		ana := decode(t, mustOK(t, dsn, "ana", "--output", "json", "work", "get", "t", "--count", "2"))
		held := strconv.FormatInt(ana.Loans[0], 10)
		closed := strconv.FormatInt(ana.Loans[1], 10)
		mustOK(t, dsn, "ana", "disposition", "t", closed, "never")
		request := strconv.FormatInt(ana.RequestID, 10)

		cases := []badInput{
			// work get
			{"count zero", "ana", []string{"work", "get", "t", "--count", "0"}, 2, "--count"},
			{"count negative", "ana", []string{"work", "get", "t", "--count", "-1"}, 2, "--count"},
			{"count huge", "ana", []string{"work", "get", "t", "--count", "1000000"}, 2, "--count"},
			{"count overflow", "ana", []string{"work", "get", "t", "--count", "99999999999999999999"}, 2, "count"},
			{"count not a number", "ana", []string{"work", "get", "t", "--count", "three"}, 2, "count"},
			{"unknown task", "ana", []string{"work", "get", "nosuch"}, 2, "unknown task"},
			{"task misspelled", "ana", []string{"work", "get", "tt"}, 2, "unknown task \"tt\" (did you mean `t`?"},
			{"global flag misspelled", "ana", []string{"--usr", "ana", "pipeline"}, 2, "unknown flag --usr for `loanq` (did you mean --user?"},
			{"task as SQL", "ana", []string{"work", "get", "t'; DROP TABLE loanq_work--"}, 2, "task"},
			{"task as tautology", "ana", []string{"work", "get", "' OR '1'='1"}, 2, "task"},
			{"no task", "ana", []string{"work", "get"}, 2, "argument"},
			{"two tasks", "ana", []string{"work", "get", "t", "t"}, 2, "argument"},
			{"timeout negative", "ana", []string{"work", "get", "t", "--timeout", "-5s"}, 2, "--timeout"},
			{"timeout malformed", "ana", []string{"work", "get", "t", "--timeout", "soon"}, 2, "--timeout"},
			{"lock unknown", "ana", []string{"work", "get", "t", "--lock", "optimistic"}, 2, "lock"},
			{"backoff malformed", "ana", []string{"work", "get", "t", "--backoff", "1s,x"}, 2, "--backoff"},
			{"unknown flag", "ana", []string{"work", "get", "t", "--bogus"}, 2, "bogus"},
			{"user empty", "", []string{"work", "get", "t"}, 2, "user"},
			{"user too long", strings.Repeat("u", 101), []string{"work", "get", "t"}, 2, "user"},
			// explain: it never changes anything, not even on bad input
			{"explain unknown task", "admin", []string{"explain", "nosuch"}, 2, "unknown task"},
			{"explain count zero", "admin", []string{"explain", "t", "--count", "0"}, 2, "--count"},
			{"explain no task", "admin", []string{"explain"}, 2, "argument"},
			// The acting user, wherever it is stored or compared: empty (no
			// --user, LOANQ_USER or USER), blank, with leading or trailing white
			// space (MySQL's PAD SPACE would make "ana " be "ana"), control
			// characters, or more than 100 characters (counted as characters).
			{"user empty at task create", "", []string{"task", "create", "x", "--where", "1=1"}, 2, "no acting user"},
			{"user empty at disposition", "", []string{"disposition", "t", held, "complete"}, 2, "no acting user"},
			{"user empty at pipeline", "", []string{"pipeline"}, 2, "no acting user"},
			{"user blank", "   ", []string{"work", "get", "t"}, 2, "no acting user"},
			{"user trailing space", "ana ", []string{"work", "get", "t"}, 2, "white space"},
			{"user leading space", " ana", []string{"work", "get", "t"}, 2, "white space"},
			{"user trailing space at disposition", "ana ", []string{"disposition", "t", held, "complete"}, 2, "white space"},
			{"user trailing space at pipeline", "ana ", []string{"pipeline"}, 2, "white space"},
			{"user trailing space at task create", "admin ", []string{"task", "create", "x", "--where", "1=1"}, 2, "white space"},
			{"user control character", "an\x01a", []string{"work", "get", "t"}, 2, "control"},
			{"user 101 characters", strings.Repeat("é", 101), []string{"work", "get", "t"}, 2, "101 characters"},
			{"user too long at task create", strings.Repeat("u", 101), []string{"task", "create", "x", "--where", "1=1"}, 2, "at most 100"},
			// work status
			{"unknown request", "ana", []string{"work", "status", "987654321"}, 2, "987654321"},
			{"request not a number", "ana", []string{"work", "status", "seventeen"}, 2, "request"},
			{"request negative", "ana", []string{"work", "status", "-1"}, 2, "request"},
			{"request as SQL", "ana", []string{"work", "status", "1 OR 1=1"}, 2, "request"},
			{"request with injection", "ana", []string{"work", "status", request + "; DROP TABLE loanq_work--"}, 2, "request"},
			// disposition
			{"not the assignee", "bob", []string{"disposition", "t", held, "complete"}, 2, "assignee"},
			{"already dispositioned", "ana", []string{"disposition", "t", closed, "complete"}, 2, "already"},
			{"never assigned", "ana", []string{"disposition", "t", "987654321", "complete"}, 2, "never been assigned"},
			{"loan not a number", "ana", []string{"disposition", "t", "abc", "complete"}, 2, "loan"},
			{"loan as SQL", "ana", []string{"disposition", "t", "1; DROP TABLE loanq_work--", "complete"}, 2, "loan"},
			{"loan as tautology", "ana", []string{"disposition", "t", "' OR '1'='1", "complete"}, 2, "loan"},
			{"after over 72h", "ana", []string{"disposition", "t", held, "return", "--after", "73h"}, 2, "--after"},
			{"after negative", "ana", []string{"disposition", "t", held, "return", "--after", "-1h"}, 2, "--after"},
			{"after malformed", "ana", []string{"disposition", "t", held, "return", "--after", "abc"}, 2, "--after"},
			{"after with complete", "ana", []string{"disposition", "t", held, "complete", "--after", "1h"}, 2, "--after"},
			{"unknown action", "ana", []string{"disposition", "t", held, "finish"}, 2, "finish"},
			{"missing action", "ana", []string{"disposition", "t", held}, 2, "argument"},
			{"disposition unknown task", "ana", []string{"disposition", "nosuch", held, "complete"}, 2, "unknown task"},
			// task create / show
			{"task exists", "admin", []string{"task", "create", "t", "--where", "eligible = 0"}, 2, "exists"},
			{"criteria bad column", "admin", []string{"task", "create", "x", "--where", "no_such_column = 1"}, 2, "no_such_column"},
			{"criteria syntax", "admin", []string{"task", "create", "x", "--where", "eligible = "}, 2, "criteria"},
			{"criteria two statements", "admin", []string{"task", "create", "x", "--where", "1=1; DROP TABLE loanq_work"}, 2, "';'"},
			{"criteria missing", "admin", []string{"task", "create", "x"}, 2, "--where"},
			{"order bad column", "admin", []string{"task", "create", "x", "--where", "eligible = 1", "--order", "no_such_column"}, 2, "no_such_column"},
			{"source missing table", "admin", []string{"task", "create", "x", "--where", "1=1", "--source", "no_such_table"}, 2, "no_such_table"},
			{"source as SQL", "admin", []string{"task", "create", "x", "--where", "1=1", "--source", "loan; DROP TABLE loan"}, 2, "--source"},
			{"key missing column", "admin", []string{"task", "create", "x", "--where", "1=1", "--key", "no_such_key"}, 2, "no_such_key"},
			{"max-active negative", "admin", []string{"task", "create", "x", "--where", "1=1", "--max-active", "-1"}, 2, "--max-active"},
			{"max-active not a number", "admin", []string{"task", "create", "x", "--where", "1=1", "--max-active", "five"}, 2, "max-active"},
			{"lock unknown at create", "admin", []string{"task", "create", "x", "--where", "1=1", "--lock", "optimistic"}, 2, "lock"},
			{"query-delay too long", "admin", []string{"task", "create", "x", "--where", "1=1", "--query-delay", "11m"}, 2, "--query-delay"},
			{"query-delay malformed", "admin", []string{"task", "create", "x", "--where", "1=1", "--query-delay", "slow"}, 2, "--query-delay"},
			{"task name with quote", "admin", []string{"task", "create", "x'; DROP TABLE loanq_task; --", "--where", "1=1"}, 2, "name"},
			{"task name empty", "admin", []string{"task", "create", "", "--where", "1=1"}, 2, "name"},
			{"task name too long", "admin", []string{"task", "create", strings.Repeat("n", 101), "--where", "1=1"}, 2, "name"},
			{"task name trailing space", "admin", []string{"task", "create", "x ", "--where", "1=1"}, 2, "name"},
			{"task name leading space", "admin", []string{"task", "create", " x", "--where", "1=1"}, 2, "name"},
			{"task lookup with trailing space", "ana", []string{"work", "get", "t "}, 2, "task name"},
			{"where over 4000 bytes", "admin", []string{"task", "create", "x", "--where", longCriteria(4001)}, 2, "--where is 4001 bytes"},
			{"where over 4000 bytes in characters", "admin", []string{"task", "create", "x", "--where", "eligible = 1 OR 'é' = '" + strings.Repeat("é", 2000) + "'"}, 2, "--where is"},
			{"order over 4000 bytes", "admin", []string{"task", "create", "x", "--where", "1=1", "--order", longOrder(4001)}, 2, "--order is 4001 bytes"},
			// Criteria that would leave their parentheses in the criteria
			// query (sqllex), on create and on update.
			{"where escapes its parentheses", "admin", []string{"task", "create", "x", "--where", "1=1) OR (1=1"}, 2, "')' closes a parenthesis the text did not open at character 4"},
			{"where with a comment", "admin", []string{"task", "create", "x", "--where", "eligible = 1 -- c"}, 2, "comment marker '--' at character 14"},
			{"where with a block comment", "admin", []string{"task", "create", "x", "--where", "eligible = 1 /* c */"}, 2, "comment marker '/*'"},
			{"where never closes a parenthesis", "admin", []string{"task", "create", "x", "--where", "eligible = 1 AND (priority > 5"}, 2, "'(' is never closed at character 18"},
			{"where never closes a quote", "admin", []string{"task", "create", "x", "--where", "eligible = 1 OR 'x = 1"}, 2, "never closed"},
			{"where with a bind marker", "admin", []string{"task", "create", "x", "--where", "eligible = $1 OR eligible = ? OR eligible = :x"}, 2, "bind marker"},
			{"order escapes its place", "admin", []string{"task", "create", "x", "--where", "eligible = 1", "--order", "priority) x (id"}, 2, "--order"},
			{"order with a comment", "admin", []string{"task", "create", "x", "--where", "eligible = 1", "--order", "priority -- c"}, 2, "comment marker '--'"},
			{"update where escapes its parentheses", "admin", []string{"task", "update", "t", "--where", "1=1) OR (1=1"}, 2, "')' closes a parenthesis"},
			{"update where with a comment", "admin", []string{"task", "update", "t", "--where", "x = 1 -- c"}, 2, "comment marker '--'"},
			{"update order unbalanced", "admin", []string{"task", "update", "t", "--order", "(priority"}, 2, "'(' is never closed"},
			// Names that would not print as themselves.
			{"user with a zero-width space", "ana​", []string{"work", "get", "t"}, 2, "character 4 is U+200B"},
			{"user with ESC", "an[2Ja", []string{"pipeline"}, 2, "character 3 is U+001B"},
			{"user with a bidi override", "‮ana", []string{"task", "create", "x", "--where", "1=1"}, 2, "character 1 is U+202E"},
			{"user with DEL", "ana", []string{"disposition", "t", held, "complete"}, 2, "U+007F"},
			{"task name with ESC", "admin", []string{"task", "create", "x[2J", "--where", "1=1"}, 2, "character 2 is U+001B"},
			{"task name with a zero-width joiner", "ana", []string{"work", "get", "t‍"}, 2, "character 2 is U+200D"},
			{"show unknown task", "admin", []string{"task", "show", "nosuch"}, 2, "unknown task"},
			{"delete task with active work", "admin", []string{"task", "delete", "t"}, 2, "--force"},
			{"delete unknown task", "admin", []string{"task", "delete", "nosuch", "--force"}, 2, "unknown task"},
			// pipeline, migrate, globals
			{"pipeline unknown task", "ana", []string{"pipeline", "--task", "nosuch"}, 2, "unknown task"},
			{"migrate unknown direction", "admin", []string{"migrate", "sideways"}, 2, "sideways"},
			{"output unknown", "ana", []string{"--output", "yaml", "pipeline"}, 2, "--output"},
			{"unknown command", "ana", []string{"frobnicate"}, 2, "frobnicate"},
		}
		if d.Name() == "sqlite" {
			cases = append(cases, badInput{"row lock on sqlite", "admin",
				[]string{"task", "create", "x", "--where", "1=1", "--lock", "skip"}, 2, "lease"})
		}
		before := snapshot(t, e.DB)
		if !strings.Contains(before, "loanq_work ") || !strings.Contains(before, "loanq_task ") {
			t.Fatalf("the snapshot does not see the rows it should compare:\n%s", before)
		}
		for _, c := range cases {
			r := loanq(t, dsn, c.user, c.args...)
			check(t, c, r)
			if after := snapshot(t, e.DB); after != before {
				t.Errorf("%s: the loanq tables changed\nbefore:\n%s\nafter:\n%s", c.name, before, after)
				before = after
			}
		}
	})
}

// longCriteria is a valid --where of exactly n bytes (n ≥ 30): white space
// inside an expression is kept as given.
func longCriteria(n int) string {
	const head, tail = "eligible = 1", " AND 1 = 1"
	return head + strings.Repeat(" ", n-len(head)-len(tail)) + tail
}

// longOrder is a valid --order of exactly n bytes (n ≥ 30).
func longOrder(n int) string {
	const head, tail = "priority", ", eligible"
	return head + strings.Repeat(" ", n-len(head)-len(tail)) + tail
}

// Bad or unreachable databases: the DSN's password never shows.
func TestBadDSN(t *testing.T) {
	t.Parallel()
	cases := []badInput{
		{"unknown scheme", "ana", []string{"--db", "ftp://u:" + secret + "@h/x", "task", "list"}, 2, "postgres"},
		{"malformed URL", "ana", []string{"--db", "postgres://u:" + secret + "@[::1/x", "task", "list"}, 2, "DSN"},
		{"mysql without database", "ana", []string{"--db", "mysql://u:" + secret + "@127.0.0.1:3306", "task", "list"}, 2, "database"},
		{"sqlite without path", "ana", []string{"--db", "sqlite:", "task", "list"}, 2, "sqlite"},
		{"postgres unreachable", "ana", []string{"--db", "postgres://u:" + secret + "@127.0.0.1:1/x?connect_timeout=5", "task", "list"}, 1, "127.0.0.1:1"},
		{"mysql unreachable", "ana", []string{"--db", "mysql://u:" + secret + "@127.0.0.1:1/x", "task", "list"}, 1, "127.0.0.1:1"},
		{"mariadb without host", "ana", []string{"--db", "mariadb://u:" + secret + "@/", "task", "list"}, 2, "no host"},
		{"mysql without host", "ana", []string{"--db", "mysql://u:" + secret + "@/", "task", "list"}, 2, "no host"},
	}
	// A bad run-time parameter is bad input, not an unreachable server.
	pg := testdb.Fresh(t, "postgres")
	cases = append(cases, badInput{"postgres bad parameter", "ana", []string{"--db", pg + "&lock_timeout=abc", "task", "list"}, 2, "lock_timeout"})
	// The test server's password is not secret: any other one is wrong.
	for _, dialect := range []string{"postgres", "mysql"} {
		u, err := url.Parse(testdb.Fresh(t, dialect))
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword("loanq_no_such_user", secret)
		cases = append(cases, badInput{dialect + " wrong login", "ana", []string{"--db", u.String(), "task", "list"}, 2, "loanq_no_such_user"})
	}
	// Two driver options are refused before connecting, with the reason:
	// multiStatements (one string, several statements) and allowAllFiles
	// (the server reads any local file through LOAD DATA LOCAL INFILE).
	my, err := url.Parse(testdb.Fresh(t, "mysql"))
	if err != nil {
		t.Fatal(err)
	}
	my.User = url.UserPassword(my.User.Username(), secret)
	mariadb := *my
	mariadb.Scheme = "mariadb"
	cases = append(cases,
		badInput{"mysql multiStatements", "ana", []string{"--db", my.String() + "?multiStatements=true", "task", "list"}, 2, "multiStatements is refused: it lets one statement string carry several statements"},
		badInput{"mariadb allowAllFiles", "ana", []string{"--db", mariadb.String() + "?allowAllFiles=1", "task", "list"}, 2, "allowAllFiles is refused: it lets the server (or whoever answers as it) read any local file"})
	for _, c := range cases {
		r := loanq(t, "", c.user, c.args...)
		check(t, c, r)
	}
}

func check(t *testing.T, c badInput, r result) {
	t.Helper()
	msg := r.stdout + r.stderr
	if r.code != c.code {
		t.Errorf("%s: exit %d, want %d\n%s", c.name, r.code, c.code, msg)
	}
	if !strings.Contains(strings.ToLower(r.stderr), strings.ToLower(c.says)) {
		t.Errorf("%s: message does not name the problem (%q):\n%s", c.name, c.says, msg)
	}
	if !strings.HasPrefix(r.stderr, "loanq: ") {
		t.Errorf("%s: error is not loanq's one-line message:\n%s", c.name, msg)
	}
	if strings.Contains(msg, secret) {
		t.Errorf("%s: output contains the password:\n%s", c.name, msg)
	}
	if strings.Count(strings.TrimSpace(r.stderr), "\n") > 2 {
		t.Errorf("%s: more than a short message on stderr:\n%s", c.name, r.stderr)
	}
}

// snapshot renders every row of loanq's tables, in id order: two equal
// snapshots mean the command changed nothing.
func snapshot(t *testing.T, db *sql.DB) string {
	t.Helper()
	var b strings.Builder
	for _, table := range []string{"loanq_task", "loanq_work_request", "loanq_work", "loanq_query_run", "loanq_schema_version"} {
		rows, err := db.QueryContext(context.Background(), "SELECT * FROM "+table+" ORDER BY id")
		if err != nil {
			t.Fatalf("snapshot of %s: %v", table, err)
		}
		cols, _ := rows.Columns()
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%s", table)
			for _, v := range vals {
				if bs, ok := v.([]byte); ok {
					v = string(bs)
				}
				fmt.Fprintf(&b, " %v", v)
			}
			b.WriteByte('\n')
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// Bad input is refused before loanq connects: the same exit code and message
// with a database nobody listens for, instead of a connection error that
// hides the mistake (and, on a reachable server, a session opened for
// nothing). What depends on the database (an unknown task, criteria in the
// dialect's syntax, the acting account) is checked by
// TestBadInputChangesNothing.
func TestBadInputRefusedBeforeConnecting(t *testing.T) {
	t.Parallel()
	down := "postgres://nobody:" + secret + "@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"
	cases := []badInput{
		{"count zero", "ana", []string{"work", "get", "t", "--count", "0"}, 2, "--count"},
		{"timeout malformed", "ana", []string{"work", "get", "t", "--timeout", "soon"}, 2, "--timeout"},
		{"lock unknown", "ana", []string{"work", "get", "t", "--lock", "optimistic"}, 2, "lock"},
		{"backoff malformed", "ana", []string{"work", "get", "t", "--backoff", "1s,x"}, 2, "--backoff"},
		{"request not a number", "ana", []string{"work", "status", "seventeen"}, 2, "request"},
		{"request zero", "ana", []string{"work", "cancel", "0"}, 2, "request"},
		{"after over 72h", "ana", []string{"disposition", "t", "1", "return", "--after", "73h"}, 2, "--after"},
		{"after with complete", "ana", []string{"disposition", "t", "1", "complete", "--after", "1h"}, 2, "--after"},
		{"unknown action", "ana", []string{"disposition", "t", "1", "finish"}, 2, "finish"},
		{"disposition loan twice", "ana", []string{"disposition", "t", "1", "2", "1", "complete"}, 2, "named twice"},
		{"disposition too many loans", "ana", append(append([]string{"disposition", "t"}, manyLoans(1001)...), "complete"), 2, "at most 1000"},
		{"disposition stdin beside loans", "ana", []string{"disposition", "t", "1", "-", "complete"}, 2, "goes alone"},
		{"disposition batch after with complete", "ana", []string{"disposition", "t", "1", "2", "complete", "--after", "1h"}, 2, "--after"},
		{"criteria missing", "admin", []string{"task", "create", "x"}, 2, "--where"},
		{"allow group malformed", "admin", []string{"task", "create", "x", "--where", "a = 1", "--allow", "@no such"}, 2, "--allow"},
		{"not-worked-in malformed", "admin", []string{"task", "update", "x", "--not-worked-in", "a b"}, 2, "--not-worked-in"},
		{"group without users", "admin", []string{"group", "add", "seniors"}, 2, "GROUP USER"},
		{"group name malformed", "admin", []string{"group", "remove", "a b", "ana"}, 2, "group name"},
		{"task name with quote", "admin", []string{"task", "create", "x'; DROP TABLE loanq_task; --", "--where", "1=1"}, 2, "name"},
		{"source as SQL", "admin", []string{"task", "create", "x", "--where", "1=1", "--source", "loan; DROP TABLE loan"}, 2, "--source"},
		{"max-active negative", "admin", []string{"task", "create", "x", "--where", "1=1", "--max-active", "-1"}, 2, "--max-active"},
		{"query-delay too long", "admin", []string{"task", "create", "x", "--where", "1=1", "--query-delay", "11m"}, 2, "--query-delay"},
		{"prefetch negative", "admin", []string{"task", "create", "x", "--where", "1=1", "--prefetch", "-1"}, 2, "--prefetch"},
		{"prefetch-low over the size", "admin", []string{"task", "create", "x", "--where", "1=1", "--prefetch", "10", "--prefetch-low", "10"}, 2, "--prefetch-low"},
		{"max-hold too short", "admin", []string{"task", "create", "x", "--where", "1=1", "--max-hold", "1ms"}, 2, "--max-hold"},
		{"update nothing", "admin", []string{"task", "update", "t"}, 2, "nothing to change"},
		{"update prefetch negative", "admin", []string{"task", "update", "t", "--prefetch", "-1"}, 2, "--prefetch"},
		{"update lease-ttl zero", "admin", []string{"task", "update", "t", "--lease-ttl", "0s"}, 2, "--lease-ttl"},
		{"update hold-limit too short", "admin", []string{"task", "update", "t", "--hold-limit", "1ms"}, 2, "--hold-limit"},
		{"update empty where", "admin", []string{"task", "update", "t", "--where", ""}, 2, "--where"},
		{"update source as SQL", "admin", []string{"task", "update", "t", "--source", "loan; DROP TABLE loan"}, 2, "--source"},
		{"show bad name", "admin", []string{"task", "show", "x y"}, 2, "task name"},
		{"delete bad name", "admin", []string{"task", "delete", "x y"}, 2, "task name"},
		{"token role unknown", "admin", []string{"token", "create", "--user", "ana", "--role", "boss"}, 2, "--role"},
		{"token expiry too short", "admin", []string{"token", "create", "--user", "ana", "--role", "processor", "--expires", "10s"}, 2, "--expires"},
		{"explain count zero", "admin", []string{"explain", "t", "--count", "0"}, 2, "--count"},
		{"bench prefetch negative", "admin", []string{"bench", "--target", "engine", "--prefetch", "-1"}, 2, "--prefetch"},
		{"serve refill too often", "admin", []string{"serve", "--listen", "127.0.0.1:0", "--refill", "--refill-every", "100ms"}, 2, "--refill-every"},
		{"history since malformed", "admin", []string{"history", "--since", "yesterday"}, 2, "--since"},
		{"history since negative", "admin", []string{"history", "--since", "-2h"}, 2, "--since"},
		{"history after-id negative", "admin", []string{"history", "--after-id", "-1"}, 2, "--after-id"},
		{"history output unknown", "admin", []string{"history", "--output", "xml"}, 2, "--output"},
		{"history settle malformed", "admin", []string{"history", "--settle", "soon"}, 2, "settle"},
		{"history task malformed", "admin", []string{"history", "--task", "a b"}, 2, "task name"},
		{"history batch zero", "admin", []string{"history", "--batch", "0"}, 2, "--batch"},
	}
	for _, c := range cases {
		r := loanq(t, down, c.user, c.args...)
		check(t, c, r)
		if strings.Contains(r.stderr, "connect") {
			t.Errorf("%s: loanq tried the database before it checked the input:\n%s", c.name, r.stderr)
		}
	}
}

// manyLoans is n distinct loan keys, 1 to n.
func manyLoans(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(i + 1)
	}
	return out
}
