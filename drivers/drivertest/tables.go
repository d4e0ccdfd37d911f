package drivertest

import (
	"io/fs"
	"regexp"
	"sort"
	"strings"
	"testing"

	schemafiles "github.com/loanq/loanq/migrations"
)

var tableDDL = regexp.MustCompile(`(?i)\b(CREATE\s+(?:GLOBAL\s+TEMPORARY\s+)?TABLE|DROP\s+TABLE(?:\s+IF\s+EXISTS)?)\s+(loanq_\w+)`)

// MigratedTables lists the loanq_ tables a dialect's migrations leave after
// `migrate up`, read from their Up sections in order (a table created and
// later dropped is not listed), plus goose's version table. Sorted.
func MigratedTables(t *testing.T, dialect string) []string {
	t.Helper()
	fsys := schemafiles.For(dialect)
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("no migrations for %s: %v", dialect, err)
	}
	sort.Strings(names)
	have := map[string]bool{strings.ToLower(schemafiles.VersionTable): true}
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			t.Fatal(err)
		}
		up := string(b)
		if i := strings.Index(up, "-- +goose Up"); i >= 0 {
			up = up[i:]
		}
		if i := strings.Index(up, "-- +goose Down"); i >= 0 {
			up = up[:i]
		}
		for _, m := range tableDDL.FindAllStringSubmatch(up, -1) {
			name := strings.ToLower(m[2])
			if strings.HasPrefix(strings.ToUpper(m[1]), "CREATE") {
				have[name] = true
			} else {
				delete(have, name)
			}
		}
	}
	var out []string
	for n := range have {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// SameTables fails t unless got names exactly the tables want does (any order).
func SameTables(t *testing.T, what string, got, want []string) {
	t.Helper()
	g := append([]string(nil), got...)
	sort.Strings(g)
	if strings.Join(g, " ") != strings.Join(want, " ") {
		t.Errorf("%s: %v\nthe migrations create: %v", what, g, want)
	}
}
