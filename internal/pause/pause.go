// Package pause waits in a way a cancelled context cuts short: the engine's
// recheck backoff and query delay, the bench's simulated work and the demo's
// processors all stop at once on Ctrl-C.
package pause

import (
	"context"
	"time"
)

// For waits d, or less when ctx ends first, and then returns ctx's error.
// A d of zero or less returns at once.
func For(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
