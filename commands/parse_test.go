package commands

import (
	"slices"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/flagvalue"
)

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
				got, err := flagvalue.Backoff(sf.Value)
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
