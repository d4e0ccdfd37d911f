package commands

import (
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/problem"
)

// helpAndCommands runs before urfave/cli sees the arguments: `loanq help
// task` becomes `loanq task --help` (as git, gh and kubectl read it), and a
// word that is not a command where a command is expected is refused with
// "did you mean …" instead of urfave/cli's later, misleading flag error
// (`task craete x --where …` once said "flag provided but not defined: -where").
func helpAndCommands(app *cli.App, args []string) ([]string, error) {
	flags, cmds := app.Flags, app.Commands
	path := "loanq"
	hasAction := app.Action != nil
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return args, nil
		}
		if strings.HasPrefix(a, "-") && a != "-" {
			if takesValue(flags, a) || (takesValue(app.Flags, a) && !defines(flags, a)) {
				i++
			}
			continue
		}
		if a == "help" && len(cmds) > 0 && findCommand(cmds, a) == nil {
			rest := append(append([]string{}, args[:i]...), args[i+1:]...)
			return append(rest, "--help"), nil
		}
		cmd := findCommand(cmds, a)
		if cmd == nil {
			if len(cmds) == 0 || hasAction {
				return args, nil // a positional argument
			}
			return nil, unknownCommand(path, a, cmds)
		}
		path += " " + cmd.Name
		flags, cmds, hasAction = cmd.Flags, cmd.Subcommands, cmd.Action != nil
	}
	return args, nil
}

func unknownCommand(path, word string, cmds []*cli.Command) error {
	var names, close []string
	for _, c := range cmds {
		if c.Hidden || c.Name == "help" {
			continue
		}
		names = append(names, c.Name)
		for _, n := range append([]string{c.Name}, c.Aliases...) {
			if d := distance(strings.ToLower(word), n); d <= 2 || (len(word) >= 2 && strings.HasPrefix(n, strings.ToLower(word))) {
				close = append(close, c.Name)
				break
			}
		}
	}
	sort.Strings(names)
	msg := problem.Usagef("unknown command %q for `%s`", word, path)
	if len(close) > 0 {
		return problem.WithHint(msg, "did you mean `"+path+" "+strings.Join(close, "` or `"+path+" ")+"`?")
	}
	return problem.WithHint(msg, "the commands are: "+strings.Join(names, ", ")+"; see `"+path+" --help`")
}

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
