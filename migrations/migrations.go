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
// fs.Sub fails only on a malformed path name, which none of these is; a name
// without a folder gives an empty one, and goose then finds no migrations.
func For(dialect string) fs.FS {
	sub, _ := fs.Sub(all, dialect)
	return sub
}
