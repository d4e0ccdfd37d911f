package commands

import (
	"fmt"
	"io"
	"io/fs"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/migrations"
	"github.com/loanq/loanq/schema"
)

func migrateCommand() *cli.Command {
	return &cli.Command{
		Name:  "migrate",
		Usage: "apply or inspect loanq's own tables (loanq_*) in the database",
		Description: `Applies the migrations embedded in this binary for the DSN's dialect. Only
loanq_* tables are touched; re-running "up" changes nothing.

Examples:
   loanq --db postgres://app@127.0.0.1:5432/loans migrate up
   loanq --db mysql://root:secret@127.0.0.1:3306/loans migrate status`,
		Subcommands: []*cli.Command{
			{Name: "up", Usage: "apply every pending migration", ArgsUsage: " ", Action: migrateUp,
				Description: "Example:\n   loanq --db postgres://app@127.0.0.1:5432/loans migrate up"},
			{Name: "down", Usage: "roll back the most recent migration (drops loanq tables)", ArgsUsage: " ", Action: migrateDown,
				Description: "Example:\n   loanq --db sqlite:loanq.db migrate down"},
			{Name: "status", Usage: "list migrations and whether each is applied", ArgsUsage: " ", Action: migrateStatus,
				Description: "Example:\n   loanq --db sqlite:loanq.db migrate status"},
		},
	}
}

func migrateUp(c *cli.Context) error {
	if _, err := args(c); err != nil {
		return err
	}
	opened, err := openCreating(c)
	if err != nil {
		return err
	}
	defer opened.Close()
	d, db, dsn := opened.Driver, opened.DB, opened.DSN
	applied, err := schema.Up(c.Context, d, db)
	if err != nil {
		return err
	}
	st, err := schema.Read(c.Context, d, db)
	if err != nil {
		return err
	}
	return emit(c, map[string]any{"database": dsn.Redacted(), "dialect": d.Name(), "applied": nonNil(applied), "version": st.Current},
		func(w io.Writer) {
			if len(applied) == 0 {
				fmt.Fprintf(w, "%s: schema is up to date at version %d; nothing to do\n", dsn.Redacted(), st.Current)
				return
			}
			fmt.Fprintf(w, "%s: applied %d migration(s) %v; schema version %d%s\n", dsn.Redacted(), len(applied), applied, st.Current, skippedNote(d.Name(), applied))
		})
}

// dialectFolders are the migration folders (package migrations) and the
// names a user knows them by.
var dialectFolders = []struct{ folder, name string }{
	{"postgres", "PostgreSQL"}, {"mysql", "MySQL/MariaDB"}, {"sqlite", "SQLite"}, {"oracle", "Oracle"},
}

// skippedNote explains a number missing between the migrations just
// applied: some migrations exist for some dialects only (PostgreSQL's
// 00007, an index of the bench's item table), so elsewhere the count is
// short of the schema version and the list has a gap, which reads like a
// migration lost. "" when there is no such gap.
func skippedNote(dialect string, applied []int64) string {
	if len(applied) < 2 {
		return ""
	}
	done := map[int64]bool{}
	for _, v := range applied {
		done[v] = true
	}
	var notes []string
	for v := applied[0] + 1; v < applied[len(applied)-1]; v++ {
		if done[v] {
			continue
		}
		var file string
		var others []string
		for _, d := range dialectFolders {
			if d.folder == dialect {
				continue
			}
			if m, _ := fs.Glob(migrations.For(d.folder), fmt.Sprintf("%05d_*.sql", v)); len(m) > 0 {
				file, others = strings.TrimSuffix(m[0], ".sql"), append(others, d.name)
			}
		}
		if file != "" {
			notes = append(notes, fmt.Sprintf("no migration %d here: %s is for %s only", v, file, strings.Join(others, " and ")))
		}
	}
	if len(notes) == 0 {
		return ""
	}
	return " (" + strings.Join(notes, "; ") + ")"
}

func nonNil(v []int64) []int64 {
	if v == nil {
		return []int64{}
	}
	return v
}

func migrateDown(c *cli.Context) error {
	if _, err := args(c); err != nil {
		return err
	}
	opened, err := openDB(c, schema.Options{})
	if err != nil {
		return err
	}
	defer opened.Close()
	d, db, dsn := opened.Driver, opened.DB, opened.DSN
	v, err := schema.Down(c.Context, d, db)
	if err != nil {
		return err
	}
	return emit(c, map[string]any{"database": dsn.Redacted(), "dialect": d.Name(), "rolled_back": v}, func(w io.Writer) {
		if v == 0 {
			fmt.Fprintf(w, "%s: nothing to roll back\n", dsn.Redacted())
			return
		}
		fmt.Fprintf(w, "%s: rolled back migration %d\n", dsn.Redacted(), v)
	})
}

func migrateStatus(c *cli.Context) error {
	if _, err := args(c); err != nil {
		return err
	}
	opened, err := openDB(c, schema.Options{})
	if err != nil {
		return err
	}
	defer opened.Close()
	d, db, dsn := opened.Driver, opened.DB, opened.DSN
	ms, err := schema.Status(c.Context, d, db)
	if err != nil {
		return err
	}
	st, err := schema.Read(c.Context, d, db)
	if err != nil {
		return err
	}
	return emit(c, map[string]any{"database": dsn.Redacted(), "dialect": d.Name(), "version": st.Current, "target": st.Target, "migrations": ms},
		func(w io.Writer) {
			fmt.Fprintf(w, "database: %s (%s), schema version %d of %d\n", dsn.Redacted(), d.Name(), st.Current, st.Target)
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "VERSION\tNAME\tAPPLIED")
			for _, m := range ms {
				applied := "pending"
				if m.Applied {
					applied = m.AppliedAt
					if applied == "" {
						applied = "yes"
					}
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\n", m.Version, m.Name, applied)
			}
			tw.Flush()
		})
}
