package sqlite

import (
	"context"
	"database/sql"
	"github.com/loanq/loanq/loankey"
	"strings"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/dsn"
	"github.com/loanq/loanq/internal/sqllex"
	"github.com/loanq/loanq/migrations"
)

var (
	_ sqllex.Syntaxer  = (*Driver)(nil)
	_ drivers.KeyTyper = (*Driver)(nil)
)

// CriteriaSyntax: how SQLite tokenizes a task's --where and --order.
func (*Driver) CriteriaSyntax() sqllex.Syntax { return sqllex.SQLite }

// KeyKind reads the declared type of the key column by SQLite's affinity
// rules (https://sqlite.org/datatype3.html, 3.1): the modernc driver reports
// the declared type and no scan type. A column declared INTEGER may still
// hold text in some row; the criteria check's rows catch that, as they do
// for a column without a declared type (a computed view column). SQLite has
// no UUID type: a column declared UUID (NUMERIC affinity) holds UUIDs as
// text, and is taken as a UUID key.
func (*Driver) KeyKind(ct *sql.ColumnType) loankey.Kind {
	t := strings.ToUpper(ct.DatabaseTypeName())
	switch {
	case t == "":
		return loankey.Unknown
	case strings.Contains(t, "INT"):
		return loankey.Integer
	case strings.Contains(t, "UUID"):
		return loankey.UUID
	case strings.Contains(t, "CHAR"), strings.Contains(t, "CLOB"), strings.Contains(t, "TEXT"):
		return loankey.Text
	case strings.Contains(t, "BLOB"), strings.Contains(t, "DATE"), strings.Contains(t, "TIME"),
		strings.Contains(t, "REAL"), strings.Contains(t, "FLOA"), strings.Contains(t, "DOUB"):
		return loankey.Other
	}
	return loankey.Unknown // NUMERIC affinity: integers stay integers
}

// SomeTables names up to n tables and views of the database, loanq's or
// not (schema.TableLister: the embedded default migrates itself only when
// it is empty or loanq's).
func (*Driver) SomeTables(ctx context.Context, db *sql.DB, n int) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT name FROM sqlite_master
WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\_%' ESCAPE '\'
ORDER BY name LIMIT ?`, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		out = append(out, name)
	}
	return out, rows.Err()
}

// walMode puts the database in WAL mode (readers never wait for the
// writer), which SQLite records in the file: the connections opened later
// find it there. Another application's database (tables, none of them
// loanq's version table) is left as it is, since the command will refuse it
// (schema.Open) unless it is `migrate up`, after which the next open switches
// it.
func walMode(ctx context.Context, db *sql.DB, target dsn.DSN) error {
	if target.Database == ":memory:" {
		return nil
	}
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return err
	}
	if strings.EqualFold(mode, "wal") {
		return nil
	}
	var tables, ours int
	if err := db.QueryRowContext(ctx, `SELECT count(*), count(CASE WHEN name = ? THEN 1 END) FROM sqlite_master
WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\'`, migrations.VersionTable).Scan(&tables, &ours); err != nil {
		return err
	}
	if tables > 0 && ours == 0 {
		return nil
	}
	return db.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode)
}
