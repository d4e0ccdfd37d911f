package dispatch

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/loanq/loanq/problem"
)

// A return's time is read with the engine's limit (flagvalue's fuzz target
// checks the reading with the same 72h written out).
func TestReturnAfterLimit(t *testing.T) {
	if MaxReturnWait != 72*time.Hour {
		t.Errorf("MaxReturnWait = %s; flagvalue's FuzzReturnAfter and the messages say 72h", MaxReturnWait)
	}
	if _, err := ParseReturnAfter("72h"); err != nil {
		t.Errorf("--after 72h: %v", err)
	}
	if _, err := ParseReturnAfter("72h1ns"); err == nil || !strings.Contains(err.Error(), "from 0s to 72h (") {
		t.Errorf("--after 72h1ns: %v, want refused naming 72h", err)
	}
}

// A return without a time is bad input, in the words of the surface that
// asks; anything else passes.
func TestCheckReturnTime(t *testing.T) {
	for param, want := range map[string]string{
		"--after": "return needs --after: how long until the loan is back in the queue (0s to 72h)",
		`"after"`: `return needs "after": how long until the loan is back in the queue (0s to 72h)`,
	} {
		err := CheckReturnTime(Return, false, param)
		if err == nil || err.Error() != want || problem.KindOf(err) != problem.Usage {
			t.Errorf("return without %s: %v, want bad input %q", param, err, want)
		}
	}
	for _, c := range []struct {
		action string
		given  bool
	}{{Return, true}, {Complete, false}, {Never, false}} {
		if err := CheckReturnTime(c.action, c.given, "--after"); err != nil {
			t.Errorf("%s (time given %v): %v", c.action, c.given, err)
		}
	}
}

// Another user's loan is bad input (exit 2) naming the assignee, and a
// surface can tell it from other refusals.
func TestNotAssigneeError(t *testing.T) {
	err := notAssignee("t", "7", "ana", "bob")
	var na *NotAssigneeError
	if !errors.As(err, &na) || na.Task != "t" || na.Loan != "7" || na.Assignee != "ana" || na.User != "bob" {
		t.Fatalf("errors.As: %+v", na)
	}
	if problem.ExitCode(err) != problem.ExitUsage || err.Error() != "loan 7 in task t is assigned to ana, not to bob: only the assignee can disposition it" {
		t.Fatalf("%v (exit %d)", err, problem.ExitCode(err))
	}
}
