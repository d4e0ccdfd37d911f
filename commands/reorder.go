package commands

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// reorderArgs lets flags follow positional arguments, as README.md writes them
// (`loanq work get TASK --count 3`). urfave/cli v2 stops parsing flags at the
// first positional argument, so for the command being run the flags are moved
// in front of its positional arguments. Global flags (--db, --user, --output)
// may also come anywhere, as people type them last (`loanq task list --db …`):
// they are moved to the front. Everything after "--" stays as is.
func reorderArgs(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	var globals []string
	// global takes a flag token of a level that does not define it, but the
	// app does, and returns how many words it consumed.
	global := func(levelFlags []cli.Flag, i int) int {
		a := args[i]
		if defines(levelFlags, a) || !defines(app.Flags, a) {
			return 0
		}
		globals = append(globals, a)
		if takesValue(app.Flags, a) && i+1 < len(args) {
			globals = append(globals, args[i+1])
			return 2
		}
		return 1
	}
	out := []string{args[0]}
	i := 1
	flags := app.Flags
	cmds := app.Commands
	// Walk down the command path: global/parent flags, then command names.
	for i < len(args) {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if strings.HasPrefix(a, "-") && a != "-" {
			if n := global(flags, i); n > 0 {
				i += n
				continue
			}
			out = append(out, a)
			i++
			if takesValue(flags, a) && i < len(args) {
				out = append(out, args[i])
				i++
			}
			continue
		}
		cmd := findCommand(cmds, a)
		if cmd == nil {
			break // a positional argument of the current command
		}
		out = append(out, a)
		i++
		flags, cmds = cmd.Flags, cmd.Subcommands
		if len(cmds) == 0 {
			break
		}
	}
	// The leaf command's remaining words: flags first, positionals after.
	var fl, pos []string
	for i < len(args) {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if strings.HasPrefix(a, "-") && len(a) > 1 && !isNumber(a) {
			if n := global(flags, i); n > 0 {
				i += n
				continue
			}
			fl = append(fl, a)
			i++
			if takesValue(flags, a) && i < len(args) {
				fl = append(fl, args[i])
				i++
			}
			continue
		}
		pos = append(pos, a)
		i++
	}
	out = append(out, fl...)
	if len(globals) > 0 {
		out = append(append([]string{out[0]}, globals...), out[1:]...)
	}
	if len(pos) > 0 {
		out = append(out, "--")
		out = append(out, pos...)
	}
	return out
}

func isNumber(s string) bool {
	s = strings.TrimPrefix(s, "-")
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.Name == name {
			return c
		}
		for _, a := range c.Aliases {
			if a == name {
				return c
			}
		}
	}
	return nil
}

// defines reports whether flag token a (like "--db" or "--db=x") is one of flags.
func defines(flags []cli.Flag, a string) bool {
	name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}

// takesValue reports whether flag token a (like "--count" or "-o") needs the
// next word as its value: it is not a boolean flag and has no "=value".
func takesValue(flags []cli.Flag, a string) bool {
	if strings.Contains(a, "=") {
		return false
	}
	name := strings.TrimLeft(a, "-")
	if name == "help" || name == "h" || name == "version" || name == "v" {
		return false
	}
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				_, isBool := f.(*cli.BoolFlag)
				return !isBool
			}
		}
	}
	return false
}
