package commands

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/problem"
)

// Every rejected --after is bad input naming the flag; every accepted one is
// within 0s..72h (dispatch.MaxReturnWait).
func FuzzReturnAfter(f *testing.F) {
	for _, s := range []string{"0s", "90m", "4h", "72h", "73h", "-1h", "abc", "", "1h30m", "72h0m0.000000001s", "9223372036854775807ns", " 5m "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseReturnAfter(s)
		if err != nil {
			if problem.KindOf(err) != problem.Usage {
				t.Fatalf("%q: error is not bad input: %v", s, err)
			}
			if !strings.Contains(err.Error(), "--after") {
				t.Fatalf("%q: message does not name --after: %v", s, err)
			}
			return
		}
		if d < 0 || d > dispatch.MaxReturnWait {
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
		ds, err := parseBackoff(s)
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
		if _, err := parseReturnAfter(s); (err == nil) != ok {
			t.Errorf("--after %q: accepted=%v, want %v (%v)", s, err == nil, ok, err)
		}
	}
}

// docs/algorithm.md, step 3: busy callers recheck after 5 s, 10 s, 20 s (then
// every 20 s) unless --backoff says otherwise; the flag's default is that
// schedule.
func TestDefaultBackoffIsTheDocumentedSchedule(t *testing.T) {
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second}
	if !slices.Equal(dispatch.DefaultBackoff, want) {
		t.Errorf("dispatch.DefaultBackoff = %v, want %v", dispatch.DefaultBackoff, want)
	}
	for _, sub := range workCommand().Subcommands {
		if sub.Name != "get" && sub.Name != "status" {
			continue // the commands that wait for the task lock; work run uses DefaultBackoff itself
		}
		found := false
		for _, f := range sub.Flags {
			if sf, ok := f.(*cli.StringFlag); ok && sf.Name == "backoff" {
				found = true
				got, err := parseBackoff(sf.Value)
				if err != nil || !slices.Equal(got, want) {
					t.Errorf("work %s --backoff default %q reads as %v, %v; want %v", sub.Name, sf.Value, got, err, want)
				}
			}
		}
		if !found {
			t.Errorf("work %s has no --backoff flag", sub.Name)
		}
	}
}
