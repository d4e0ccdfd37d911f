package commands

import (
	"fmt"
	"github.com/loanq/loanq/loankey"
	"io"
	"io/fs"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/bench"
	"github.com/loanq/loanq/drivers"
)

func sqlCommand() *cli.Command {
	return &cli.Command{
		Name:      "sql",
		Usage:     "print every statement a dialect sends, by purpose (no database needed)",
		ArgsUsage: " ",
		Description: `Prints the dialect's capabilities (how it waits, finishes a round, limits a
lock holder, …: what decides which statements it sends), then the statements
from the same values the driver executes (the engine's, then those of named
locks, the dashboard, prune and the other features), the shape of the criteria
query, the statements and tables of loanq bench (which creates its item table
for a run and drops it after), and the embedded migrations.

Examples:
   loanq sql --dialect postgres
   loanq sql --dialect oracle --output json`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dialect", Usage: "postgres, mysql, oracle or sqlite (default: the --db's dialect)"},
		},
		Action: printSQL,
	}
}

func printSQL(c *cli.Context) error {
	if _, err := args(c); err != nil {
		return err
	}
	name := c.String("dialect")
	var d drivers.Driver
	var err error
	if name == "" {
		if d, _, err = drivers.ParseDSN(c.String("db")); err != nil {
			return err
		}
	} else if d, err = drivers.ByName(name); err != nil {
		return err
	}
	type stmt struct {
		Name    string `json:"name"`
		Purpose string `json:"purpose"`
		SQL     string `json:"sql"`
	}
	var list []stmt
	for _, n := range d.Statements().List() {
		if n.SQL == "" && n.Empty != "" {
			n.SQL = fmt.Sprintf("-- not used on %s: %s", d.Name(), n.Empty)
		} else if n.SQL == "" {
			n.SQL = fmt.Sprintf("-- not used on %s: strategies available are %v", d.Name(), d.Capabilities().Strategies)
		}
		list = append(list, stmt{n.Field, n.Purpose, n.SQL})
	}
	// The catalogues of the features outside the engine (named locks, the
	// dashboard, prune, …: drivers.Catalogue), each beside the code that
	// reads it, by catalogue name.
	for _, c := range drivers.Catalogues() {
		cat, err := c.Compiled(d)
		if err != nil {
			return err
		}
		for _, n := range drivers.ListCatalogue(cat) {
			list = append(list, stmt{n.Field, n.Purpose, n.SQL})
		}
	}
	sample := drivers.CriteriaSource{Source: "loan", Key: "id", Where: "<--where>", Order: "<--order>", Kind: loankey.Integer}
	list = append(list, stmt{"CriteriaQuery", "the heavy criteria query of a task (--where, --order, --source, --key filled in)",
		drivers.CriteriaQuery(d.Dialect(), sample).Text()})
	if rl, ok := d.(drivers.RowLocker); ok {
		list = append(list, stmt{"RowsClaim", "strategy rows: the criteria query locking the source rows it returns (--where, --order, --source, --key filled in)",
			rl.RowsClaimSQL(sample)})
	}
	if pl, ok := d.(drivers.PoolLocker); ok && d.Capabilities().PoolClaim == drivers.PoolClaimProcedure {
		list = append(list, stmt{"PoolClaim", "candidate pool: lock the first fresh candidates nobody else is claiming, through the cursor procedure",
			pl.PoolClaimSQL()})
	}
	// loanq bench's own catalogue: not part of the engine, and its table is
	// no part of the schema (bench/sql.go).
	bc, err := bench.For(d)
	if err != nil {
		return err
	}
	for _, n := range bc.List() {
		if n.SQL == "" {
			n.SQL = fmt.Sprintf("-- not used on %s: %s", d.Name(), n.Empty)
		}
		list = append(list, stmt{"Bench" + n.Field, n.Purpose, n.SQL})
	}
	for i, ddl := range bc.Create {
		list = append(list, stmt{fmt.Sprintf("BenchCreate%d", i+1), "bench: create its own objects before a run", ddl})
	}
	for i, ddl := range bc.Drop {
		list = append(list, stmt{fmt.Sprintf("BenchDrop%d", i+1), "bench: drop its own objects after a run (nothing when they do not exist)", ddl})
	}
	migs, err := fs.Glob(d.Migrations(), "*.sql")
	if err != nil {
		return err
	}
	sort.Strings(migs)
	for _, m := range migs {
		b, err := fs.ReadFile(d.Migrations(), m)
		if err != nil {
			return err
		}
		list = append(list, stmt{"migration " + m, "schema migration", strings.TrimSpace(string(b))})
	}
	caps := d.Capabilities().List()
	return emit(c, map[string]any{"dialect": d.Name(), "strategies": d.Capabilities().Strategies, "capabilities": caps, "statements": list}, func(w io.Writer) {
		fmt.Fprintf(w, "-- loanq statements for %s (lock strategies: %v)\n--\n", d.Name(), d.Capabilities().Strategies)
		for _, x := range caps {
			fmt.Fprintf(w, "-- capability: %s = %s (%s)\n", x.Name, x.Value, x.Meaning)
		}
		for _, s := range list {
			fmt.Fprintf(w, "\n-- %s: %s\n%s\n", s.Name, s.Purpose, s.SQL)
		}
	})
}
