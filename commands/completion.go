package commands

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/problem"
)

// Shell completion asks the binary itself: urfave/cli answers
// `loanq … --generate-bash-completion` with the commands and flags that fit.
const bashCompletion = `# loanq completion for bash: source <(loanq completion bash)
_loanq_complete() {
	local cur="${COMP_WORDS[COMP_CWORD]}"
	local opts
	opts=$("${COMP_WORDS[0]}" "${COMP_WORDS[@]:1:COMP_CWORD-1}" --generate-bash-completion 2>/dev/null)
	COMPREPLY=($(compgen -W "${opts}" -- "${cur}"))
}
complete -o bashdefault -o default -F _loanq_complete loanq
`

const zshCompletion = `#compdef loanq
# loanq completion for zsh: source <(loanq completion zsh)
_loanq_complete() {
	local -a opts
	opts=("${(@f)$(${words[1]} ${words[2,CURRENT-1]} --generate-bash-completion 2>/dev/null)}")
	if [[ "${opts[1]}" != "" ]]; then
		_describe 'values' opts
	else
		_files
	fi
}
compdef _loanq_complete loanq
`

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script: bash, zsh or fish",
		ArgsUsage: "bash|zsh|fish",
		Description: `Examples:
   source <(loanq completion bash)                  # in ~/.bashrc
   source <(loanq completion zsh)                   # in ~/.zshrc, after compinit
   mkdir -p ~/.config/fish/completions && loanq completion fish > ~/.config/fish/completions/loanq.fish`,
		Action: func(c *cli.Context) error {
			a, err := args(c, "SHELL")
			if err != nil {
				return err
			}
			switch a[0] {
			case "bash":
				_, err = fmt.Fprint(c.App.Writer, bashCompletion)
			case "zsh":
				_, err = fmt.Fprint(c.App.Writer, zshCompletion)
			case "fish":
				var s string
				if s, err = c.App.ToFishCompletion(); err == nil {
					_, err = fmt.Fprint(c.App.Writer, s)
				}
			default:
				return problem.Usagef("unknown shell %q: use bash, zsh or fish", a[0])
			}
			return err
		},
	}
}
