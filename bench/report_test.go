package bench

import (
	"strings"
	"testing"
)

// With a work time the rate is capped by it, whatever the database: the
// text says the cap beside the figure, so that the default run's ~97 items/s
// (10 workers × 100ms) is not read as the database's speed. Without a work
// time there is no cap to state.
func TestWriteTextStatesTheWorkTimeCap(t *testing.T) {
	r := &Result{Strategy: "skip", Dialect: "postgres", Workers: 10, Rows: 200, WorkMS: 100, Batch: 1,
		ElapsedMS: 2070, IdealMS: 2000, Ratio: 1.035, PerSecond: 96.6, LockedPerClaim: 1}
	var b strings.Builder
	WriteText(&b, []*Result{r})
	if want := "97 items/s (at most 100: 10 workers × 1 item per 100ms of work)"; !strings.Contains(b.String(), want) {
		t.Errorf("the default run's text does not state its cap %q:\n%s", want, b.String())
	}

	r = &Result{Strategy: "skip", Dialect: "postgres", Workers: 32, Rows: 20000, WorkMS: 0, Batch: 5,
		ElapsedMS: 1363, PerSecond: 14670, LockedPerClaim: 5}
	b.Reset()
	WriteText(&b, []*Result{r})
	if out := b.String(); strings.Contains(out, "at most") || !strings.Contains(out, "ratio n/a (no work time), 14670 items/s,") {
		t.Errorf("a run with no work time has no cap to state:\n%s", out)
	}
}
