package commands

import (
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/internal/suggest"
	"github.com/loanq/loanq/internal/textsafe"
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
			if !defines(flags, a) && !defines(app.Flags, a) && !builtinFlag(a) && !isNumber(a) {
				return nil, unknownFlag(path, a, flags, app.Flags)
			}
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

// builtinFlag reports whether a is one of the flags urfave/cli defines
// itself: help, version and the shell completion's.
func builtinFlag(a string) bool {
	name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
	switch name {
	case "help", "h", "version", "v", "generate-bash-completion":
		return true
	}
	return false
}

// unknownFlag refuses a flag that neither the command nor loanq defines,
// before urfave/cli would: it reads `loanq --usr ana pipeline` as the flag
// --usr and the command "ana" ("unknown command"), hiding the typo.
func unknownFlag(path, a string, levels ...[]cli.Flag) error {
	name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
	spelled := map[string]string{} // name -> --name or -n
	var names []string
	for _, flags := range levels {
		for _, f := range flags {
			for _, n := range f.Names() {
				if _, dup := spelled[n]; dup || len(n) < 2 {
					continue // one-letter aliases are not worth suggesting
				}
				spelled[n] = "--" + n
				names = append(names, n)
			}
		}
	}
	msg := problem.Usagef("unknown flag %s for `%s`", textsafe.Escape(strings.SplitN(a, "=", 2)[0]), path)
	if close := suggest.Close(name, names); len(close) > 0 {
		for i, n := range close {
			close[i] = spelled[n]
		}
		return problem.WithHint(msg, "did you mean "+strings.Join(close, " or ")+"? see `"+path+" --help`")
	}
	return problem.WithHint(msg, "see `"+path+" --help` for its flags")
}

func unknownCommand(path, word string, cmds []*cli.Command) error {
	var names, close []string
	for _, c := range cmds {
		if c.Hidden || c.Name == "help" {
			continue
		}
		names = append(names, c.Name)
		if len(suggest.Close(word, append([]string{c.Name}, c.Aliases...))) > 0 {
			close = append(close, c.Name)
		}
	}
	sort.Strings(names)
	msg := problem.Usagef("unknown command %q for `%s`", word, path)
	if len(close) > 0 {
		return problem.WithHint(msg, "did you mean `"+path+" "+strings.Join(close, "` or `"+path+" ")+"`?")
	}
	return problem.WithHint(msg, "the commands are: "+strings.Join(names, ", ")+"; see `"+path+" --help`")
}
