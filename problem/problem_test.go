package problem

import (
	"fmt"
	"testing"
)

// One rule, two surfaces: the command line's text names the flag, the
// API's the field; a hint or a wrapper that adds words keeps the command
// line's text, so nothing is lost.
func TestParamfAndAPIText(t *testing.T) {
	err := Paramf("--count", "count", "invalid %s %d: ask for between 1 and %d loans", 0, 1000)
	if got := err.Error(); got != "invalid --count 0: ask for between 1 and 1000 loans" {
		t.Errorf("command line: %q", got)
	}
	if got := APIText(err); got != "invalid count 0: ask for between 1 and 1000 loans" {
		t.Errorf("API: %q", got)
	}
	if KindOf(err) != Usage || ExitCode(err) != ExitUsage {
		t.Errorf("kind %v, exit %d", KindOf(err), ExitCode(err))
	}
	u := UsageAPI("unknown request id 7: give the request_id that `loanq work get` printed", "unknown request id 7: give the request_id a POST answered")
	if APIText(u) != "unknown request id 7: give the request_id a POST answered" || u.Error() == APIText(u) {
		t.Errorf("UsageAPI: %q / %q", u.Error(), APIText(u))
	}
	wrapped := fmt.Errorf("disposing: %w", err)
	if APIText(wrapped) != wrapped.Error() {
		t.Errorf("a wrapped error lost its words: %q", APIText(wrapped))
	}
	if plain := Usagef("x"); APIText(plain) != "x" {
		t.Errorf("no API text: %q", APIText(plain))
	}
}
