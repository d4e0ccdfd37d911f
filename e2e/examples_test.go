package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/commands"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// heavy examples (a whole demo or bench run) take seconds each: on SQLite
// always, on the servers with LOANQ_TEST_EXAMPLES=all.
var heavyExample = regexp.MustCompile(`^loanq( --\S+ \S+)* (demo|bench)( |$)`)

// helpExamples walks the command tree and returns every example line of
// every --help: indented, starting with "loanq " and followed by a flag or a
// command name.
func helpExamples(t *testing.T) []string {
	t.Helper()
	app := commands.NewApp(os.Stdout, os.Stderr, new(bool))
	top := map[string]bool{}
	for _, c := range app.Commands {
		top[c.Name] = true
	}
	seen := map[string]bool{}
	var out []string
	var walk func(path []string, cmds []*cli.Command)
	walk = func(path []string, cmds []*cli.Command) {
		r := run(t, t.TempDir(), nil, append(path, "--help")...)
		for _, line := range strings.Split(r.stdout, "\n") {
			l := strings.TrimSpace(line)
			if i := strings.Index(l, "  #"); i > 0 {
				l = strings.TrimSpace(l[:i]) // a comment after the example
			}
			f := strings.Fields(l)
			if line == l || len(f) == 0 || f[0] != "loanq" || seen[l] {
				continue
			}
			if len(f) > 1 && (strings.HasPrefix(f[1], "-") || top[f[1]]) && !strings.Contains(l, "[command options]") && !strings.Contains(" "+l+" ", " - ") {
				seen[l] = true
				out = append(out, l)
			}
		}
		for _, c := range cmds {
			if c.Name != "help" {
				walk(append(append([]string{}, path...), c.Name), c.Subcommands)
			}
		}
	}
	walk(nil, app.Commands)
	return out
}

// hintExamples are the complete command lines that loanq's messages and
// hints suggest (`loanq …` in back-quotes in the source), without the ones
// that hold a placeholder (NAME, TASK, …, %d is filled in by the test).
func hintExamples(t *testing.T) []string {
	t.Helper()
	var out []string
	seen := map[string]bool{}
	re := regexp.MustCompile("`(loanq [^`\"\n]*)`( printed)?")
	for _, dir := range []string{"../commands", "../dispatch", "../drivers", "../demo", "../bench", "../schema"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var code []string // comments name commands too; only messages count
			for _, line := range strings.Split(string(b), "\n") {
				if !strings.HasPrefix(strings.TrimSpace(line), "//") {
					code = append(code, line)
				}
			}
			for _, m := range re.FindAllStringSubmatch(strings.Join(code, "\n"), -1) {
				l := strings.TrimSpace(m[1])
				if m[2] != "" { // "the request_id that `loanq work get` printed" names a command
					continue
				}
				if seen[l] || regexp.MustCompile(`[A-Z]{3,}|…|%[^d]|--help|worker`).MatchString(l) || strings.HasSuffix(l, "--dialect") || strings.HasSuffix(l, "--processes") {
					continue
				}
				seen[l] = true
				out = append(out, l)
			}
			// A hint that shows only a --where condition ("e.g. --where
			// \"…\"") is checked as the task create it stands for.
			for _, m := range whereHint.FindAllStringSubmatch(strings.Join(code, "\n"), -1) {
				l := `loanq task create hinted --where "` + m[1] + `"`
				if !seen[l] {
					seen[l] = true
					out = append(out, l)
				}
			}
		}
	}
	return out
}

// whereHint finds `--where \"CONDITION\"` in a Go string literal.
var whereHint = regexp.MustCompile(`--where \\"([^"\\]+)\\"`)

// taskCreate is an example that creates a task; the test gives the task a
// name of its own, so that the criteria are checked on every database and
// not stopped by "already exists" (the demo has created verify-bank).
var taskCreate = regexp.MustCompile(`^(loanq(?: --\S+ \S+)* task create )(\S+)( |$)`)

// A command line problem (the example is wrong), as opposed to an answer
// about the data (loan 123 is not assigned to oliver).
var commandLineProblem = regexp.MustCompile(`(?i)flag provided but not defined|unknown command|takes \d+ argument|invalid --|malformed|no such (table|column)|syntax|does not exist|unknown (lock|dialect|shell)|doesn't exist|undefined|cannot be applied|do not run`)

// Every example in --help and every command line a hint suggests runs as
// written (the --db of an example replaced by the test's database) on
// SQLite, PostgreSQL and MariaDB against the demo's schema: exit 0, 75
// (busy), or a bad-input answer about the data, never a command-line or SQL
// error.
//
// The light examples run one after the other on one database per dialect,
// in the order found (a later one may use what an earlier one made). The
// heavy ones (a whole demo or bench run, seconds each: the sum is about a
// minute) each get a database of their own, set up the same way, and run
// side by side: each resets or creates its own data (demo its loan table
// and tasks, bench its item table and task), so none depends on another,
// and on the servers, where they are not run by default, the light ones
// never ran after them either.
func TestExamplesRun(t *testing.T) {
	t.Parallel()
	examples := append(helpExamples(t), hintExamples(t)...)
	if len(examples) < 20 {
		t.Fatalf("found only %d examples: %q", len(examples), examples)
	}
	var light, heavy []string
	for _, ex := range examples {
		switch {
		case regexp.MustCompile(`^loanq( --\S+ \S+)* serve( |$)`).MatchString(ex):
			// serves until stopped; e2e's serve tests run it
		case strings.Contains(ex, "task refill") && strings.Contains(ex, " --every "):
			// refills until stopped; TestPoolAcrossProcesses runs it
		case regexp.MustCompile(`^loanq( --\S+ \S+)* (work|lock) run `).MatchString(ex):
			// They run the user's command (not on this machine) and pass
			// on its exit status, and a processor loop runs until stopped:
			// e2e/workrun_test.go and e2e/lock_test.go run them.
		case heavyExample.MatchString(ex):
			heavy = append(heavy, ex)
		default:
			light = append(light, ex)
		}
	}
	testdb.Each(t, func(t *testing.T, dsn string) {
		dir, req := examplesDatabase(t, dsn)
		created := 0
		for _, ex := range light {
			line := exampleLine(ex, req)
			if taskCreate.MatchString(line) {
				created++
				line = taskCreate.ReplaceAllString(line, "${1}ex"+strconv.Itoa(created)+"-${2}${3}")
			}
			if strings.Contains(line, "migrate down") {
				defer func(line string) { runExample(t, dir, dsn, line) }(line) // last: it drops tables
				continue
			}
			runExample(t, dir, dsn, line)
		}
	})
	// The heavy ones run first (the subtests of Each wait for this function
	// to end), all at once, each a subtest started from a
	// goroutine of its own: they wait mostly (demo's --duration, bench's
	// --work), and run this way in the test's own slot of -parallel instead
	// of queuing behind every other test's subtests and ending the run last.
	var heavyRuns sync.WaitGroup
	for _, dialect := range testdb.Dialects {
		if dialect != "sqlite" && os.Getenv("LOANQ_TEST_EXAMPLES") != "all" {
			continue
		}
		for i, ex := range heavy {
			heavyRuns.Add(1)
			go func() {
				defer heavyRuns.Done()
				t.Run("heavy-"+dialect+"-"+strconv.Itoa(i+1), func(t *testing.T) {
					dsn := testdb.Fresh(t, dialect)
					dir, req := examplesDatabase(t, dsn)
					runExample(t, dir, dsn, exampleLine(ex, req))
				})
			}()
		}
	}
	heavyRuns.Wait()
}

// examplesDatabase sets up the database the examples run on: the schema,
// the demo's sample loans and tasks, one request (its id is the %d of an
// example) and the view an example's --source names (`task create
// big-loans --source loan_view --key loan_id`). It returns the directory
// the examples run in and the request.
func examplesDatabase(t *testing.T, dsn string) (string, request) {
	t.Helper()
	dir := t.TempDir()
	mustOK(t, dsn, "admin", "migrate", "up")
	mustOK(t, dsn, "admin", "demo", "seed", "--loans", "300")
	req := decode(t, mustOK(t, dsn, "tracy", "--output", "json", "work", "get", "verify-bank", "--count", "1"))
	d, db := testdb.Open(t, dsn)
	testdb.Exec(t, d, db, "CREATE VIEW loan_view AS SELECT id AS loan_id, amount, priority, submitted_at, statements_submitted, statements_verified, senior_reviewed, borrower_contacted FROM loan")
	return dir, req
}

// exampleLine is an example as run: the request's id for its %d, its --db
// removed (runExample gives the test's).
func exampleLine(ex string, req request) string {
	line := strings.Replace(ex, "%d", strconv.FormatInt(req.RequestID, 10), 1)
	return exampleDBFlag.ReplaceAllString(line, "")
}

var exampleDBFlag = regexp.MustCompile(`--db \S+ ?`)

func runExample(t *testing.T, dir, dsn, line string) {
	t.Helper()
	// bash reads the quotes of the example as a user's shell would.
	sh := `loanq() { "$LOANQ_BIN" --db "$TEST_DSN" "$@"; }; ` + line
	cmd := exec.Command("bash", "-c", sh)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LOANQ_") && !strings.HasPrefix(kv, "DATABASE_URL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "LOANQ_BIN="+binary, "TEST_DSN="+dsn, "HOME="+dir)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != 0 && code != 75 && (code != 2 || commandLineProblem.Match(out)) {
		t.Errorf("example %q: exit %d\n%s", line, code, out)
	}
}
