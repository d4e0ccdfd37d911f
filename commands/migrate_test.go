package commands

import (
	"strings"
	"testing"
)

func versions(from, to int64, skip ...int64) []int64 {
	var vs []int64
	for v := from; v <= to; v++ {
		if !containsInt(skip, v) {
			vs = append(vs, v)
		}
	}
	return vs
}

func containsInt(vs []int64, v int64) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

// A gap in the versions migrate up applied is explained by the migration
// files of the other dialects: 00007 exists for PostgreSQL only (an index of
// the bench's item table), so MySQL/MariaDB, SQLite and Oracle apply one
// migration fewer than the schema version. Where nothing is missing, nothing
// is said.
func TestMigrateUpSkippedNote(t *testing.T) {
	const want = " (no migration 7 here: 00007_bench_ready_index is for PostgreSQL only)"
	for _, c := range []struct {
		dialect string
		applied []int64
		want    string
	}{
		{"mysql", versions(1, 17, 7), want},
		{"sqlite", versions(1, 17, 7), want},
		{"oracle", versions(1, 17, 7), want},
		{"mysql", versions(5, 9, 7), want},
		{"postgres", versions(1, 17), ""},
		{"mysql", versions(8, 17), ""}, // 7 was before this run's first
		{"mysql", []int64{17}, ""},
		{"mysql", nil, ""},
	} {
		if got := skippedNote(c.dialect, c.applied); got != c.want {
			t.Errorf("%s, applied %v: note %q, want %q", c.dialect, c.applied, got, c.want)
		}
	}
	if got := skippedNote("mysql", versions(1, 17, 7)); strings.Contains(got, "MySQL") {
		t.Errorf("the note names the dialect being migrated among those that have it: %q", got)
	}
}
