package e2e

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/commands"
)

// docs/commands.md's "Command reference" table names every command of `loanq
// --help` and its subcommands (`loanq task show`, `loanq token revoke`, …),
// and, in the rows that name a command, each of its flags: a command or a
// flag added without a row is found here rather than by a reader.
func TestCommandTable(t *testing.T) {
	t.Parallel()
	text, err := os.ReadFile("../docs/commands.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(text)
	start := strings.Index(s, "## Command reference")
	if start < 0 {
		t.Fatal(`docs/commands.md has no "## Command reference"`)
	}
	s = s[start:]
	if end := strings.Index(s[3:], "\n## "); end >= 0 {
		s = s[:end+3]
	}
	// The rows of the table whose first cell names a command: the commands
	// each row names (`loanq migrate up\|down\|status` names three) and the
	// whole row.
	named := map[string][]string{}
	mention := regexp.MustCompile("`loanq ([a-z][a-z-]*)((?: [a-z][a-z-]*(?:\\|[a-z][a-z-]*)*)?)")
	rows := 0
	for _, row := range strings.Split(s, "\n") {
		if !strings.HasPrefix(row, "| `loanq ") {
			continue
		}
		rows++
		row = strings.ReplaceAll(row, `\|`, "|")
		first := row[:strings.Index(row[1:], " | ")+1]
		for _, m := range mention.FindAllStringSubmatch(first, -1) {
			named[m[1]] = append(named[m[1]], row)
			for _, sub := range strings.Split(strings.TrimSpace(m[2]), "|") {
				if sub != "" {
					named[m[1]+" "+sub] = append(named[m[1]+" "+sub], row)
				}
			}
		}
	}
	if rows < 20 {
		t.Fatalf("found %d command rows in docs/commands.md's command reference", rows)
	}

	app := commands.NewApp(os.Stdout, os.Stderr, new(bool))
	var missing []string
	var walk func(path string, cmds []*cli.Command)
	walk = func(path string, cmds []*cli.Command) {
		for _, c := range cmds {
			if c.Name == "help" || c.Hidden {
				continue // bench's worker commands are run by bench, not by people
			}
			p := strings.TrimSpace(path + " " + c.Name)
			if len(c.Subcommands) > 0 && c.Action == nil {
				walk(p, c.Subcommands) // a group: its subcommands have the rows
				continue
			}
			if len(c.Subcommands) > 0 {
				walk(p, c.Subcommands)
			}
			rows, ok := named[p]
			if !ok {
				missing = append(missing, "no row names `loanq "+p+"`")
				continue
			}
			all := strings.Join(rows, "\n")
			if strings.Contains(all, "the options of task create") {
				all += "\n" + strings.Join(named["task create"], "\n")
			}
			for _, f := range c.Flags {
				name := f.Names()[0]
				if name == "help" || isHidden(f) {
					continue
				}
				if !regexp.MustCompile(`--` + regexp.QuoteMeta(name) + `\b`).MatchString(all) {
					missing = append(missing, "the rows of `loanq "+p+"` do not name --"+name)
				}
			}
		}
	}
	walk("", app.Commands)
	sort.Strings(missing)
	for _, m := range missing {
		t.Error("docs/commands.md, Command reference: " + m)
	}
}

func isHidden(f cli.Flag) bool {
	h, ok := f.(interface{ IsVisible() bool })
	return ok && !h.IsVisible()
}
