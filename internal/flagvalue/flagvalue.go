// Package flagvalue reads the values of loanq's duration flags. It imports
// nothing of loanq's but package problem, on purpose: its fuzz targets run
// in `make test`, and a fuzzing binary pays, at every input, for the
// coverage counters of every package it contains — the commands package's
// test binary holds all four database drivers (SQLite's translated C
// among them), which made the same targets about 50 times slower there.
package flagvalue

import (
	"fmt"
	"strings"
	"time"

	"github.com/loanq/loanq/problem"
)

// Duration reads a duration flag (--flag), spaces around it allowed.
func Duration(flag, s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, problem.Paramf("--"+flag, strings.ReplaceAll(flag, "-", "_"), "invalid %s %q: give a duration such as 0s, 90m, 4h or 1h30m", s)
	}
	return d, nil
}

// Backoff reads --backoff: comma-separated recheck delays, each between
// 10ms and 1h (shorter would hammer the task lock, longer looks like a hang).
func Backoff(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, part := range strings.Split(s, ",") {
		d, err := Duration("backoff", part)
		if err != nil {
			return nil, err
		}
		if d < 10*time.Millisecond || d > time.Hour {
			return nil, problem.Usagef("invalid --backoff %s: each delay must be between 10ms and 1h", part)
		}
		out = append(out, d)
	}
	return out, nil
}

// ReturnAfter reads --after of a returned loan: a duration from 0s to max
// (dispatch.MaxReturnWait, 72h), given in whole hours.
func ReturnAfter(s string, max time.Duration) (time.Duration, error) {
	d, err := Duration("after", s)
	if err != nil {
		return 0, err
	}
	if d < 0 || d > max {
		return 0, problem.Paramf("--after", "after", "invalid %s %s: give a duration from 0s to %s (e.g. 0s, 90m, 4h)", s, hours(max))
	}
	return d, nil
}

// hours prints a whole number of hours as 72h, not 72h0m0s.
func hours(d time.Duration) string {
	if d%time.Hour == 0 {
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return d.String()
}
