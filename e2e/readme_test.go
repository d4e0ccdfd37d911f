package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// README.md's ```console blocks are one recorded story: this test runs every
// command in them, in order, in one bash shell (so `cd` and `export` carry
// on) started in an empty directory, with the binary built from this source
// first on the PATH, and compares each command's output (stdout and stderr
// together) with the lines shown under it.
//
// Conventions, in the README's expected output:
//   - `<n>` is an integer, `<time>` an RFC 3339 timestamp (with or without
//     fractional seconds, `Z`), `<dur>` a Go duration (`11ms`, `9s`, `1m2s`),
//     `<word>` any run of non-space characters (a host name, a user);
//   - a line holding only `…` stands for any number of lines (none too);
//   - runs of spaces compare as one space, trailing spaces are ignored (the
//     tables' columns move with the width of the values).
//
// A command is a line starting with `$ `. One that ends with
// `# not run: REASON` is skipped, with the reason in the README itself (a
// long-running command such as `loanq serve`, the whole test suite, the
// install step this test replaces with its own build). `go run . ARGS` runs
// as `loanq ARGS` (the same source, built once by TestMain).
//
// Every command that runs must exit 0. A command whose failure the README
// shows on purpose ends with `; echo "exit $?"` (the shown output then holds
// `exit N`, which the comparison checks), so that the line as a whole exits 0.
//
// Any other block, fenced (```sh, ``` …) or indented by four spaces, shows no
// command: a line in it that is one (`$ …`, or starting with loanq, curl, go,
// make, …) fails the test unless it says `# not run: REASON`; put commands in
// a ```console block.
func TestREADMERuns(t *testing.T) {
	t.Parallel()
	text, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	type step struct {
		line int
		cmd  string
		want []string
	}
	var steps []step
	in, other, indented := false, false, false
	prev := ""
	outside := func(i int, l string) {
		// Every command shown outside a console block says why it is not run.
		if commandLine.MatchString(l) && !notRun.MatchString(l) {
			t.Errorf("README.md:%d: a command outside a ```console block, neither run nor marked `# not run: REASON`: %s", i+1, strings.TrimSpace(l))
		}
	}
	for i, l := range strings.Split(string(text), "\n") {
		indented = !in && !other && (strings.HasPrefix(l, "    ") || strings.HasPrefix(l, "\t")) && (indented || strings.TrimSpace(prev) == "")
		prev = l
		switch {
		case indented:
			outside(i, l)
		case other && l == "```":
			other = false
		case other:
			outside(i, l)
		case !in && !other && l == "```console":
			in = true
		case !in && !other && strings.HasPrefix(l, "```"):
			other = true
		case in && l == "```":
			in = false
		case in && strings.HasPrefix(l, "$ "):
			steps = append(steps, step{line: i + 1, cmd: strings.TrimPrefix(l, "$ ")})
		case in:
			if len(steps) == 0 {
				t.Fatalf("README.md:%d: output before any command in a console block", i+1)
			}
			steps[len(steps)-1].want = append(steps[len(steps)-1].want, l)
		}
	}
	if len(steps) < 20 {
		t.Fatalf("README.md has %d console commands; the walkthrough is missing", len(steps))
	}

	// One script: a marker line before each command, its output after it;
	// each command's exit status is appended to a file outside the
	// directories the commands work in.
	dir := t.TempDir()
	exits := filepath.Join(t.TempDir(), "exits")
	var script strings.Builder
	script.WriteString("set +e\n")
	var run []step
	for _, s := range steps {
		if i := strings.Index(s.cmd, "# not run: "); i >= 0 {
			if strings.TrimSpace(s.cmd[i+len("# not run: "):]) == "" {
				t.Errorf("README.md:%d: `# not run:` without a reason", s.line)
			}
			t.Logf("README.md:%d: not run: %s", s.line, s.cmd)
			continue
		}
		cmd := s.cmd
		if strings.HasPrefix(cmd, "go run . ") {
			cmd = "loanq " + strings.TrimPrefix(cmd, "go run . ")
		}
		fmt.Fprintf(&script, "echo '@@step %d'\n%s\necho $? >>\"$README_EXITS\"\n", len(run), cmd)
		run = append(run, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LOANQ_") && !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "DATABASE_URL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "PATH="+filepath.Dir(binary)+string(os.PathListSeparator)+os.Getenv("PATH"), "README_EXITS="+exits)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("the README's commands: %v\n%s", err, out.String())
	}
	got := map[int][]string{}
	cur := -1
	for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		var n int
		if _, err := fmt.Sscanf(l, "@@step %d", &n); err == nil && strings.HasPrefix(l, "@@step ") {
			cur = n
			got[cur] = nil
			continue
		}
		got[cur] = append(got[cur], l)
	}
	codes, err := os.ReadFile(exits)
	if err != nil {
		t.Fatal(err)
	}
	status := strings.Fields(string(codes))
	if len(status) != len(run) {
		t.Fatalf("%d exit statuses for %d commands (a command ended the shell?): %q", len(status), len(run), status)
	}
	for i, s := range run {
		if !matches(s.want, got[i]) {
			t.Errorf("README.md:%d: $ %s\n--- shown:\n%s\n--- got:\n%s", s.line, s.cmd, strings.Join(s.want, "\n"), strings.Join(got[i], "\n"))
		}
		if status[i] != "0" {
			t.Errorf("README.md:%d: $ %s\nexit %s (a failure shown on purpose ends with `; echo \"exit $?\"`)\n%s", s.line, s.cmd, status[i], strings.Join(got[i], "\n"))
		}
	}
}

// commandLine is a shell command shown in a README block: a `$ ` prompt, or a
// line that starts with a command a reader would type.
var commandLine = regexp.MustCompile(`^\s*(\$ |(sudo |[A-Z_]+=\S+ )*(\./)?(loanq|curl|go|make|psql|mysql|sqlplus|createuser|tar|unzip|sha256sum|shasum|export|cd|mkdir|docker|podman|install|source)( |$))`)

// notRun marks a command the README shows but this test does not run.
var notRun = regexp.MustCompile(`# not run: \S`)

var (
	spaces       = regexp.MustCompile(`\s+`)
	placeholders = strings.NewReplacer(
		regexp.QuoteMeta("<n>"), `-?\d+`,
		regexp.QuoteMeta("<time>"), `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z`,
		regexp.QuoteMeta("<dur>"), `(?:\d+h)?(?:\d+m)?(?:\d+(?:\.\d+)?(?:s|ms|µs|us|ns))|0s`,
		regexp.QuoteMeta("<word>"), `\S+`,
	)
)

func normal(l string) string { return strings.TrimRight(spaces.ReplaceAllString(l, " "), " ") }

// matches compares output lines with the README's, under the conventions of
// TestREADMERuns.
func matches(want, got []string) bool {
	var re strings.Builder
	re.WriteString(`\A`)
	for _, w := range want {
		if strings.TrimSpace(w) == "…" {
			re.WriteString(`(?:[^\n]*\n)*?`)
			continue
		}
		re.WriteString(placeholders.Replace(regexp.QuoteMeta(normal(w))) + `\n`)
	}
	re.WriteString(`\z`)
	var b strings.Builder
	for _, g := range got {
		b.WriteString(normal(g) + "\n")
	}
	return regexp.MustCompile(re.String()).MatchString(b.String())
}

// The Go version README.md and docs/install.md ask for is go.mod's `go`
// line: a newcomer with an older Go would fail at the first `go run`.
func TestREADMEGoVersion(t *testing.T) {
	t.Parallel()
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	said := regexp.MustCompile(`Go \(?(\d+\.\d+(?:\.\d+)?) or later`)
	for _, f := range []string{"../README.md", "../docs/install.md"} {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all := said.FindAllStringSubmatch(string(text), -1)
		if len(all) == 0 {
			t.Errorf("%s names no Go version (go.mod: %s)", f, m[1])
		}
		for _, s := range all {
			if s[1] != string(m[1]) {
				t.Errorf("%s says %q; go.mod's go line is %s", f, s[0], m[1])
			}
		}
	}
}
