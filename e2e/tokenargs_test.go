package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// tokenArg is `--token VALUE` or `--token=VALUE` (not --token-file).
var tokenArg = regexp.MustCompile("--token(?:=|[ \t]+)[^ \t\n`|)]+")

// No example passes the serve token on the command line, where every user of
// the machine sees it in ps, and where serve refuses it: README.md, docs/*.md
// and `loanq serve --help` use --token-file or LOANQ_SERVE_TOKEN. A shell
// variable (--token "$TOKEN") is no better: the shell expands it before loanq
// starts, so ps shows the value.
func TestNoTokenOnTheCommandLine(t *testing.T) {
	t.Parallel()
	texts := map[string]string{}
	files, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(files, "../README.md") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		texts[strings.TrimPrefix(f, "../")] = string(b)
	}
	texts["loanq serve --help"] = run(t, t.TempDir(), nil, "serve", "--help").stdout
	if !strings.Contains(texts["loanq serve --help"], "--token-file") {
		t.Fatalf("serve --help does not mention --token-file:\n%s", texts["loanq serve --help"])
	}
	for name, text := range texts {
		for i, line := range commandLines(text) {
			if m := literalToken(line); m != "" {
				t.Errorf("%s:%d passes the token on the command line (%s), where ps shows it: use --token-file PATH or LOANQ_SERVE_TOKEN\n%s", name, i+1, m, line)
			}
		}
	}
}

// commandLines is text's lines, a line ending in a backslash joined to the
// next (a command continued), each at the index of its first line.
func commandLines(text string) []string {
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		for strings.HasSuffix(strings.TrimSpace(lines[i]), "\\") && i+1 < len(lines) {
			lines[i] = strings.TrimSuffix(strings.TrimSpace(lines[i]), "\\") + " " + strings.TrimSpace(lines[i+1])
			lines[i+1] = ""
			i++
		}
	}
	return lines
}

// literalToken returns the first `--token VALUE` of a line that runs loanq,
// or "". A line that names neither loanq nor serve is prose about the flag
// ("the dashboard's --token does not apply").
func literalToken(line string) string {
	if !strings.Contains(line, "loanq") && !strings.Contains(line, "serve") {
		return ""
	}
	return tokenArg.FindString(line)
}

// The check itself: what it must catch and what it must let pass.
func TestNoTokenOnTheCommandLineCatches(t *testing.T) {
	t.Parallel()
	for line, bad := range map[string]bool{
		"loanq serve --listen 0.0.0.0:8080 --token s3cret":         true,
		"loanq serve --token=s3cret":                               true,
		"`loanq serve --token 'abc def'`":                          true,
		"loanq serve --token \"hunter2\" --no-auth":                true,
		"loanq serve --token-file /etc/loanq/serve-token":          false,
		"LOANQ_SERVE_TOKEN=\"$(cat f)\" loanq serve --listen :0":   false,
		"loanq serve --token \"$TOKEN\"":                           true,
		"an empty token (`--token \"\"`, `LOANQ_SERVE_TOKEN=`)":    false,
		"| `LOANQ_SERVE_TOKEN` / `--token T` | none | the same… |": false,
		"loanq serve --listen 0.0.0.0:8080 \\\n   --token s3cret":  true,
		"the dashboard's --token does not apply to /api/v1/":       false,
	} {
		if caught := literalToken(commandLines(line)[0]) != ""; caught != bad {
			t.Errorf("%q: caught %v, want %v", line, caught, bad)
		}
	}
}
