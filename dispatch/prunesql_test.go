package dispatch

import (
	"strconv"
	"strings"
	"testing"
)

// PruneRunBounds keeps PruneKeepRuns runs per task: the literal in its text
// is the constant the engine's tests and docs rely on.
func TestPruneKeepsLatestRuns(t *testing.T) {
	want := `{{limit "` + strconv.Itoa(PruneKeepRuns) + `"}}`
	if got := portablePrune().PruneRunBounds.SQL; !strings.Contains(got, want) {
		t.Errorf("PruneRunBounds does not keep %d runs (want %s in):\n%s", PruneKeepRuns, want, got)
	}
}
