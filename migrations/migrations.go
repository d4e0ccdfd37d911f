// Package migrations embeds loanq's schema, one goose folder per dialect.
//
// loanq's own tables carry the loanq_ prefix so they can live in an existing
// application schema; no migration touches an application table.
package migrations

import (
	"embed"
	"io/fs"
)

//go:embed postgres mysql sqlite oracle
var all embed.FS

// VersionTable is goose's bookkeeping table, prefixed like the others.
const VersionTable = "loanq_schema_version"

// For returns the migration folder of a dialect (postgres, mysql, sqlite, oracle).
func For(dialect string) fs.FS {
	sub, err := fs.Sub(all, dialect)
	if err != nil {
		panic("migrations: no folder for dialect " + dialect)
	}
	return sub
}
