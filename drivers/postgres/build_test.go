package postgres

import (
	"testing"

	"github.com/loanq/loanq/drivers"
)

// BenchmarkBuild is what a loanq process pays, in CPU, for the engine's
// statements at its first database call (drivers.BuildOnce): every command
// is a process of its own (BENCHMARKS.md, "Start-up").
func BenchmarkBuild(b *testing.B) {
	for b.Loop() {
		drivers.Build(dialect{}, capabilities, overrides)
	}
}
