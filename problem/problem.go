// Package problem classifies the errors loanq reports to its callers and maps
// them to the exit codes of the command line (README.md, "Exit codes"):
//
//	0  done
//	1  any other failure
//	2  bad input or usage; nothing was changed in the database
//	3  `work run`: a completed loan kept coming back (--max-repeats; ExitRepeats)
//	75 still pending or busy (EX_TEMPFAIL): ask again later
//	130 interrupted by SIGINT, 143 by SIGTERM (128 + the signal's number)
package problem

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Kind says which exit code an error maps to.
type Kind int

const (
	// Failure is anything unexpected: a lost connection, a database error.
	Failure Kind = iota
	// Usage is bad input: the caller must change the command. Nothing changed.
	Usage
	// Busy means the work is not done yet: the task lock is held elsewhere or the
	// request is still pending. Retrying later is the right reaction.
	Busy
	// Interrupted means a signal stopped the command; the exit code is
	// 128 + the signal's number (130 for SIGINT, 143 for SIGTERM) when the
	// error carries a Signal, 130 otherwise.
	Interrupted
)

// Exit codes of the command-line contract.
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
	ExitBusy    = 75
	ExitSIGINT  = 130
	ExitSIGTERM = 143
)

// Signal is the cause of a context cancelled by a signal (commands.Main): its
// exit code is the shell's, 128 + the signal number.
type Signal struct {
	Name string // "interrupt" or "terminated"
	Code int    // 130 or 143
}

func (s *Signal) Error() string { return "interrupted by " + s.Name }

// Is makes a signal's cancellation a context.Canceled for errors.Is, as the
// context it cancelled reports.
func (s *Signal) Is(target error) bool { return target == context.Canceled }

// Error is an error with a kind and an optional hint that tells the user what to do.
type Error struct {
	Kind Kind
	Msg  string
	Hint string
	Err  error // the cause, if any; its text is not shown when Msg is set
	// API, when set, is the whole error as the HTTP API says it (web/):
	// Msg names what the command line has (--count, `loanq work get`),
	// API the request's fields and the endpoints. The business rule that
	// refuses the input is written once, in dispatch, with both texts.
	API string
}

func (e *Error) Error() string {
	msg := e.Msg
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	} else if e.Err != nil {
		msg = msg + ": " + e.Err.Error()
	}
	if e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	if strings.ContainsAny(msg, "\r\n") {
		// A database's message can quote multi-line SQL; loanq's errors are
		// one line, so scripts can log and grep them.
		msg = strings.Join(strings.Fields(msg), " ")
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Usagef returns a bad-input error.
func Usagef(format string, args ...any) error {
	return &Error{Kind: Usage, Msg: fmt.Sprintf(format, args...)}
}

// Paramf is bad input in one parameter, which the command line names flag
// (--count) and the API field (count): format's first verb is the name, and
// args follow it.
func Paramf(flag, field, format string, args ...any) error {
	return &Error{Kind: Usage,
		Msg: fmt.Sprintf(format, append([]any{flag}, args...)...),
		API: fmt.Sprintf(format, append([]any{field}, args...)...)}
}

// UsageAPI is bad input whose advice differs on the command line (msg) and
// in the API (api): a command to run there, an endpoint to call here.
func UsageAPI(msg, api string) error {
	return &Error{Kind: Usage, Msg: msg, API: api}
}

// APIText is err as the HTTP API says it: the API text of the error when
// err is a problem.Error that carries one (and nothing wraps it with more
// words), else err's own text.
func APIText(err error) string {
	var pe *Error
	if errors.As(err, &pe) && pe.API != "" && pe.Error() == err.Error() {
		return pe.API
	}
	return err.Error()
}

// WithHint adds advice to an error, keeping its kind.
func WithHint(err error, hint string) error {
	var pe *Error
	if errors.As(err, &pe) {
		cp := *pe
		if cp.Hint == "" {
			cp.Hint = hint
		} else {
			cp.Hint += "; " + hint
		}
		return &cp
	}
	return &Error{Kind: Failure, Err: err, Hint: hint}
}

// AsUsage marks err as bad input, keeping its message.
func AsUsage(err error, msg string) error {
	return &Error{Kind: Usage, Msg: msg, Err: err}
}

// KindOf returns the kind of err; errors that carry no kind are failures.
func KindOf(err error) Kind {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Kind
	}
	return Failure
}

// ExitCode maps err to the contract's exit code.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	if code, ok := exitOf(err); ok {
		return code
	}
	switch KindOf(err) {
	case Usage:
		return ExitUsage
	case Busy:
		return ExitBusy
	case Interrupted:
		var sig *Signal
		if errors.As(err, &sig) {
			return sig.Code
		}
		return ExitSIGINT
	default:
		return ExitFailure
	}
}
