package commands_test

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/commands"
)

// TestEveryCommandHasPurposeAndExample walks the whole command tree and checks
// that `loanq … COMMAND --help` gives a one-line purpose and at least one
// example command line (issue 5: a newcomer learns each command from --help).
func TestEveryCommandHasPurposeAndExample(t *testing.T) {
	var ran bool
	app := commands.NewApp(io.Discard, io.Discard, &ran)
	var walk func(path []string, cmds []*cli.Command)
	seen := 0
	walk = func(path []string, cmds []*cli.Command) {
		for _, c := range cmds {
			if c.Name == "help" || c.Hidden {
				continue
			}
			p := append(append([]string{}, path...), c.Name)
			name := strings.Join(p, " ")
			seen++
			t.Run(name, func(t *testing.T) {
				if strings.TrimSpace(c.Usage) == "" {
					t.Errorf("loanq %s: empty Usage (the one-line purpose shown in `loanq --help`)", name)
				}
				if strings.Contains(c.Usage, "\n") {
					t.Errorf("loanq %s: Usage spans several lines; keep the purpose to one line", name)
				}
				var out, errb bytes.Buffer
				code := commands.Main(append(append([]string{"loanq"}, p...), "--help"), &out, &errb)
				help := out.String()
				if code != 0 {
					t.Fatalf("loanq %s --help: exit %d\n%s%s", name, code, help, errb.String())
				}
				if !strings.Contains(help, c.Usage) {
					t.Errorf("loanq %s --help does not show its purpose %q:\n%s", name, c.Usage, help)
				}
				if !hasExample(help, p[0]) {
					t.Errorf("loanq %s --help has no example (an indented line starting with `loanq ` that uses %s):\n%s", name, p[0], help)
				}
			})
			walk(p, c.Subcommands)
		}
	}
	walk(nil, app.Commands)
	if seen < 15 {
		t.Errorf("walked only %d commands; the tree has at least 15 (migrate up/down/status, task create/list/show, work get/status, …)", seen)
	}
}

// hasExample reports whether help text holds an example line: indented, starting
// with "loanq " and naming the top-level command it documents.
func hasExample(help, top string) bool {
	for _, line := range strings.Split(help, "\n") {
		l := strings.TrimSpace(line)
		if line != l && strings.HasPrefix(l, "loanq ") && strings.Contains(" "+l+" ", " "+top+" ") {
			return true
		}
	}
	return false
}
