package problem

import "errors"

// ExitRepeats is `loanq work run` stopping because a loan its command
// completed kept coming back (--max-repeats): the command completes loans
// without changing what the task's criteria read.
const ExitRepeats = 3

// Exit is an error that carries its own exit code: commands that run another
// program (`loanq lock run`) pass that program's exit status on. Msg may be
// empty: the program has already said what it had to say.
type Exit struct {
	Code int
	Msg  string
}

func (e *Exit) Error() string { return e.Msg }

// exitOf returns the code of an *Exit in err's chain.
func exitOf(err error) (int, bool) {
	var e *Exit
	if errors.As(err, &e) {
		return e.Code, true
	}
	return 0, false
}
