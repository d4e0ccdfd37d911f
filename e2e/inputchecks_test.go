package e2e

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loanq/loanq/internal/testkit/testdb"
)

// Criteria written into loanq_task by hand are checked again before they
// run: a --where that leaves its parentheses would return loans that are
// active already, and every `work get` of the task would fail on the
// one-active-row index (a duplicate-key error, exit 1, for everyone). The
// task fails with exit 2 naming it and the problem, stores no request, and
// `task update` repairs it.
func TestStoredCriteriaAreRechecked(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, e := prepare(t, dsn, 10)
		mustOK(t, dsn, "admin", "task", "create", "t", "--where", "eligible = 1", "--order", "priority")
		mustOK(t, dsn, "ana", "work", "get", "t", "--count", "2")
		testdb.Exec(t, d, e.DB, "UPDATE loanq_task SET criteria = ? WHERE name = ?", "1=1) OR (1=1", "t")
		before := snapshot(t, e.DB)
		for _, args := range [][]string{{"work", "get", "t"}, {"work", "get", "t", "--no-wait"}} {
			r := loanq(t, dsn, "bob", args...)
			check(t, badInput{name: "work get of a task with broken stored criteria", code: 2,
				says: `task t cannot be served: its stored --where "1=1) OR (1=1" is not one self-contained SQL expression: ')' closes a parenthesis the text did not open at character 4`}, r)
			if !strings.Contains(r.stderr, "loanq task update t --where") {
				t.Errorf("the message does not say how to repair the task: %s", r.stderr)
			}
		}
		if after := snapshot(t, e.DB); after != before {
			t.Errorf("work get of a broken task changed the loanq tables\nbefore:\n%s\nafter:\n%s", before, after)
		}
		// The task can still be listed, shown and repaired.
		if r := mustOK(t, dsn, "admin", "task", "list"); !strings.Contains(r.stdout, "1=1) OR (1=1") {
			t.Errorf("task list does not show the stored criteria:\n%s", r.stdout)
		}
		mustOK(t, dsn, "admin", "task", "show", "t")
		mustOK(t, dsn, "admin", "task", "update", "t", "--where", "eligible = 1")
		got := decode(t, mustOK(t, dsn, "bob", "--output", "json", "work", "get", "t", "--count", "2"))
		if got.Assigned != 2 || got.Loans[0] != 3 || got.Loans[1] != 4 {
			t.Errorf("work get after the repair: %+v", got)
		}
		audit(t, e)
	})
}

// The key's kind comes from its column's type, on every database: a VARCHAR
// key whose values look like numbers is a text task (its keys stay text, and
// a later "A-17" works like the others), while a key column of a type loanq
// does not take (floating point) is refused when the task is created or
// updated onto it, naming the supported types. Nothing is stored then.
func TestKeyKindFromColumnType(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, dsn string) {
		d, e := prepare(t, dsn, 5)
		for _, ddl := range []string{"CREATE TABLE textloan (id VARCHAR(40) PRIMARY KEY, eligible INTEGER NOT NULL)",
			"CREATE TABLE floatloan (id FLOAT NOT NULL, eligible INTEGER NOT NULL)"} {
			testdb.Exec(t, d, e.DB, ddl)
		}
		for _, id := range []string{"1", "2", "3"} {
			testdb.Exec(t, d, e.DB, "INSERT INTO textloan VALUES (?, 1)", id)
		}
		testdb.Exec(t, d, e.DB, "INSERT INTO floatloan VALUES (1.5, 1)")
		mustOK(t, dsn, "admin", "task", "create", "t", "--where", "eligible = 1")
		before := snapshot(t, e.DB)
		cases := []badInput{
			{"create on a FLOAT key", "admin", []string{"task", "create", "x", "--source", "floatloan", "--where", "eligible = 1"}, 2,
				"a loan key must be an integer, text (CHAR/VARCHAR/TEXT, keys of up to 200 characters) or UUID column"},
			{"update onto a FLOAT key", "admin", []string{"task", "update", "t", "--source", "floatloan"}, 2,
				"a loan key must be an integer, text"},
		}
		for _, c := range cases {
			check(t, c, loanq(t, dsn, c.user, c.args...))
		}
		if after := snapshot(t, e.DB); after != before {
			t.Errorf("a refused key changed the loanq tables\nbefore:\n%s\nafter:\n%s", before, after)
		}
		r := mustOK(t, dsn, "admin", "--output", "json", "task", "create", "x", "--source", "textloan", "--where", "eligible = 1")
		if !strings.Contains(r.stdout, `"key_kind": "text"`) {
			t.Fatalf("a VARCHAR key: %s; want key_kind text", r.stdout)
		}
		testdb.Exec(t, d, e.DB, "INSERT INTO textloan VALUES ('A-17', 1)")
		r = mustOK(t, dsn, "ana", "--output", "json", "work", "get", "x", "--count", "4")
		var got struct {
			Loans []any `json:"loans"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || fmt.Sprintf("%q", got.Loans) != `["1" "2" "3" "A-17"]` {
			t.Fatalf("work get on the text task: %s (%v); want the keys as strings", r.stdout, err)
		}
		// A text task takes any key text; an integer task still refuses one.
		mustOK(t, dsn, "ana", "disposition", "x", "A-17", "complete")
		check(t, badInput{"an integer task's key abc", "ana", []string{"disposition", "t", "abc", "complete"}, 2,
			`invalid loan id "abc" for task t`}, loanq(t, dsn, "ana", "disposition", "t", "abc", "complete"))
		audit(t, e)
	})
}

// Names and criteria come back from the database as stored, whoever wrote
// them: every text output escapes the characters that would drive the
// terminal (ESC, BEL) or hide (a zero-width space), and JSON carries them
// exactly, as valid JSON.
func TestTextOutputEscapesStoredText(t *testing.T) {
	t.Parallel()
	dsn := testdb.Fresh(t, "sqlite")
	d, e := prepare(t, dsn, 10)
	mustOK(t, dsn, "admin", "task", "create", "t", "--where", "eligible = 1")
	mustOK(t, dsn, "admin", "task", "create", "u", "--where", "eligible = 1")
	mustOK(t, dsn, "ana", "work", "get", "u")
	mustOK(t, dsn, "bob", "work", "get", "t")
	evilWhere := "eligible = 1 OR 'x\x1b]0;pwned\x07' = 'y'"
	evilTask := "u\x1b[2J"
	evilUser := "bob\u200b\x1b[31m"
	testdb.Exec(t, d, e.DB, "UPDATE loanq_task SET criteria = ?, created_by = ? WHERE name = 't'", evilWhere, "adm\x1b[2J")
	testdb.Exec(t, d, e.DB, "UPDATE loanq_task SET name = ? WHERE name = 'u'", evilTask)
	testdb.Exec(t, d, e.DB, "UPDATE loanq_work SET user_name = ? WHERE user_name = 'bob'", evilUser)
	for _, args := range [][]string{{"task", "list"}, {"task", "show", "t"}, {"task", "stats"}, {"work", "list"}, {"pipeline"}} {
		r := mustOK(t, dsn, "ana", args...)
		if strings.ContainsAny(r.stdout, "\x1b\x07\u200b") {
			t.Errorf("%v prints stored control characters raw:\n%q", args, r.stdout)
		}
		if !strings.Contains(r.stdout, `\x1b`) {
			t.Errorf("%v does not show the stored ESC as \\x1b:\n%s", args, r.stdout)
		}
	}
	if r := mustOK(t, dsn, "ana", "work", "list"); !strings.Contains(r.stdout, `bob\u200b\x1b[31m`) {
		t.Errorf("work list does not show the zero-width space of the stored user:\n%s", r.stdout)
	}
	r := mustOK(t, dsn, "ana", "--output", "json", "task", "list")
	var doc struct {
		Tasks []struct {
			Name  string `json:"name"`
			Where string `json:"where"`
		} `json:"tasks"`
	}
	if !json.Valid([]byte(r.stdout)) || bytes.ContainsAny([]byte(r.stdout), "\x1b\x07") {
		t.Fatalf("task list JSON is not valid, escaped JSON:\n%q", r.stdout)
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	for _, tk := range doc.Tasks {
		found[tk.Name] = tk.Where
	}
	if found["t"] != evilWhere || found[evilTask] != "eligible = 1" {
		t.Errorf("JSON does not carry the stored text exactly: %q", found)
	}
}

// A read-only command given an SQLite file that is not loanq's, named or at
// the default path, refuses it (exit 2) and leaves it byte for byte as it
// was: no loanq table, no WAL switch. `migrate up` is how loanq's tables are
// added to it. An empty database (the zero-set-up default, an empty file)
// still sets itself up. A folder or a text file given as the database is bad
// input too.
func TestForeignSQLiteFileIsLeftAlone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	other := filepath.Join(dir, "other.db")
	db, err := sql.Open("sqlite", other)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"CREATE TABLE invoices (id INTEGER PRIMARY KEY, amount INTEGER)", "INSERT INTO invoices VALUES (1, 100)"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	original, err := os.ReadFile(other)
	if err != nil {
		t.Fatal(err)
	}
	unchanged := func(what, path string) {
		t.Helper()
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, original) {
			t.Errorf("%s: the file changed", what)
		}
		for _, suffix := range []string{"-wal", "-shm", "-journal"} {
			if _, err := os.Stat(path + suffix); err == nil {
				t.Errorf("%s: %s%s was left beside it", what, filepath.Base(path), suffix)
			}
		}
	}
	for _, args := range [][]string{{"task", "list"}, {"pipeline"}, {"work", "get", "t"}, {"task", "create", "t", "--where", "1=1", "--source", "invoices"}} {
		r := run(t, dir, []string{"LOANQ_USER=ana"}, append([]string{"--db", "sqlite:" + other}, args...)...)
		check(t, badInput{name: "named foreign file: " + strings.Join(args, " "), code: 2,
			says: "is not a loanq database: it holds other tables (invoices) and no loanq schema"}, r)
		if !strings.Contains(r.stderr, "run `loanq migrate up` first") {
			t.Errorf("%v: no hint to migrate up: %s", args, r.stderr)
		}
		unchanged("named foreign file: "+strings.Join(args, " "), other)
	}

	// The default path holding someone else's tables.
	home := t.TempDir()
	def := filepath.Join(home, "loanq.db")
	if err := os.WriteFile(def, original, 0o644); err != nil {
		t.Fatal(err)
	}
	check(t, badInput{name: "foreign file at the default path", code: 2, says: "sqlite:loanq.db is not a loanq database"},
		run(t, home, []string{"LOANQ_USER=ana"}, "task", "list"))
	unchanged("foreign file at the default path", def)

	// Zero set-up: no file at the default path, or an empty file named.
	fresh := t.TempDir()
	if r := run(t, fresh, []string{"LOANQ_USER=ana"}, "task", "list"); r.code != 0 {
		t.Fatalf("zero set-up: exit %d %s", r.code, r.stderr)
	}
	walMode(t, filepath.Join(fresh, "loanq.db"))
	empty := filepath.Join(fresh, "empty.db")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := run(t, fresh, []string{"LOANQ_USER=ana"}, "--db", "sqlite:"+empty, "task", "list"); r.code != 0 {
		t.Fatalf("an empty file: exit %d %s", r.code, r.stderr)
	}
	walMode(t, empty)

	// migrate up is the explicit way; afterwards the file is loanq's.
	if r := run(t, dir, nil, "--db", "sqlite:"+other, "migrate", "up"); r.code != 0 {
		t.Fatalf("migrate up on the foreign file: exit %d %s", r.code, r.stderr)
	}
	if r := run(t, dir, []string{"LOANQ_USER=ana"}, "--db", "sqlite:"+other, "task", "create", "inv", "--source", "invoices", "--where", "amount > 0"); r.code != 0 {
		t.Fatalf("task create after migrate up: exit %d %s", r.code, r.stderr)
	}
	walMode(t, other)

	// A folder, a text file.
	folder := filepath.Join(dir, "folder.db")
	if err := os.Mkdir(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	check(t, badInput{name: "a folder", code: 2, says: "it is a folder"},
		run(t, dir, []string{"LOANQ_USER=ana"}, "--db", "sqlite:"+folder, "task", "list"))
	notes := filepath.Join(dir, "notes.db")
	text := []byte("shopping list: milk, eggs\n")
	if err := os.WriteFile(notes, text, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"task", "list"}, {"migrate", "up"}} {
		check(t, badInput{name: "a text file: " + strings.Join(args, " "), code: 2, says: "the file is not an SQLite database"},
			run(t, dir, []string{"LOANQ_USER=ana"}, append([]string{"--db", "sqlite:" + notes}, args...)...))
		if got, _ := os.ReadFile(notes); !bytes.Equal(got, text) {
			t.Errorf("a text file: %v changed it to %q", args, got)
		}
	}
}

// walMode checks that loanq put its database in WAL mode (readers never
// wait for the writer), now that the driver switches only loanq's or empty
// databases.
func walMode(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Errorf("%s is in journal mode %q, want wal", filepath.Base(path), mode)
	}
}
