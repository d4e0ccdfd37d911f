package flagvalue

import (
	"strings"
	"testing"
	"time"

	"github.com/loanq/loanq/problem"
)

// maxReturn is dispatch.MaxReturnWait, written here so that this package's
// fuzzing binary stays small (package doc); commands' TestReturnAfterLimit
// checks that --after is read with dispatch's.
const maxReturn = 72 * time.Hour

// Every rejected --after is bad input naming the flag; every accepted one is
// within 0s..72h.
func FuzzReturnAfter(f *testing.F) {
	for _, s := range []string{"0s", "90m", "4h", "72h", "73h", "-1h", "abc", "", "1h30m", "72h0m0.000000001s", "9223372036854775807ns", " 5m "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ReturnAfter(s, maxReturn)
		if err != nil {
			if problem.KindOf(err) != problem.Usage {
				t.Fatalf("%q: error is not bad input: %v", s, err)
			}
			if !strings.Contains(err.Error(), "--after") {
				t.Fatalf("%q: message does not name --after: %v", s, err)
			}
			return
		}
		if d < 0 || d > maxReturn {
			t.Fatalf("%q accepted as %s, outside 0s..72h", s, d)
		}
	})
}

// Every accepted --backoff has at least one delay, each within 10ms..1h.
func FuzzBackoff(f *testing.F) {
	for _, s := range []string{"5s,10s,20s", "50ms", "0s", "1h,1h1s", ",", "1s,,2s", "x", "-1s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ds, err := Backoff(s)
		if err != nil {
			if problem.KindOf(err) != problem.Usage {
				t.Fatalf("%q: error is not bad input: %v", s, err)
			}
			return
		}
		if len(ds) == 0 {
			t.Fatalf("%q accepted with no delay", s)
		}
		for _, d := range ds {
			if d < 10*time.Millisecond || d > time.Hour {
				t.Fatalf("%q accepted a delay of %s", s, d)
			}
		}
	})
}

func TestReturnAfterBounds(t *testing.T) {
	for s, ok := range map[string]bool{"0s": true, "90m": true, "4h": true, "72h": true, "73h": false, "-1h": false, "abc": false, "": false, "72h1ns": false} {
		if _, err := ReturnAfter(s, maxReturn); (err == nil) != ok {
			t.Errorf("--after %q: accepted=%v, want %v (%v)", s, err == nil, ok, err)
		}
	}
	if _, err := ReturnAfter("73h", maxReturn); err == nil || !strings.Contains(err.Error(), "from 0s to 72h (") {
		t.Errorf("--after 73h: %v, want the bound named as 72h", err)
	}
}
