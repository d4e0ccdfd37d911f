package commands

import (
	"fmt"
	"github.com/loanq/loanq/roles"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/drivers"
)

func grantsCommand() *cli.Command {
	return &cli.Command{
		Name:      "grants",
		Usage:     "print the SQL that gives a database account one of loanq's roles (no database needed)",
		ArgsUsage: " ",
		Description: `Prints the GRANT (and REVOKE) statements, and the row of loanq_account, that
make a database account an admin, processor, supervisor, dashboard, refresher
or serve account of loanq. Run them as the owner of loanq's tables (the
account that ran "loanq migrate up"). Nothing is sent to the database.

Roles:
   admin       defines tasks (task create, update, delete); may act as anyone
   processor   work get, status, cancel, run; disposition; pipeline; lock run;
               acts only as itself (its account name, or the --as name)
   supervisor  a processor that may act for others (work reclaim)
   dashboard   reads loanq's tables (serve, task list/show/stats, work list), and
               the --source tables for serve's backlog counts (none: run serve
               with --backlog-every 0s)
   refresher   runs criteria queries under the task lock for nobody in particular
   serve       loanq serve answering processors without database accounts:
               a supervisor's rights, trusted to act as the users it serves

The database enforces what a role may not do, also for SQL sent by hand:
privileges, plus row-level security policies (PostgreSQL) or triggers
(MySQL/MariaDB, Oracle) that refuse rows written for another user
(docs/security.md). SQLite has no accounts.

Pipe the output to psql, mysql or sqlplus connected as the owner, e.g.
"loanq grants … | psql \"$OWNER_DSN\"".

Examples:
   loanq grants --role processor --to proc_ana --as ana --source loan --dialect postgres
   loanq grants --role processor --to proc_ana --source acc_loan:loan_no --dialect mysql
   loanq grants --role supervisor --to team_lead --dialect mysql
   loanq grants --role dashboard --to loanq_dash --dialect oracle`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "role", Required: true, Usage: "admin, processor, supervisor, dashboard, refresher or serve"},
			&cli.StringFlag{Name: "to", Required: true, Usage: "the database `ACCOUNT` (MySQL: user or user@host)"},
			&cli.StringFlag{Name: "as", Usage: "the loanq user `NAME` this account acts as, when not its own name (processor, refresher)"},
			&cli.StringSliceFlag{Name: "source", Usage: "a loan `TABLE` or TABLE:KEY_COLUMN its tasks read (repeat; key default id)"},
			&cli.StringFlag{Name: "dialect", Usage: "postgres, mysql or oracle (default: the --db's dialect)"},
		},
		Action: printGrants,
	}
}

func printGrants(c *cli.Context) error {
	if _, err := args(c); err != nil {
		return err
	}
	var d drivers.Driver
	var err error
	if name := c.String("dialect"); name != "" {
		d, err = drivers.ByName(name)
	} else {
		d, _, err = drivers.ParseDSN(c.String("db"))
	}
	if err != nil {
		return err
	}
	role, err := roles.Parse(c.String("role"))
	if err != nil {
		return err
	}
	req := roles.Request{Role: role, Account: strings.TrimSpace(c.String("to")), ActsAs: strings.TrimSpace(c.String("as"))}
	for _, raw := range c.StringSlice("source") {
		for _, part := range strings.Split(raw, ",") {
			s, err := roles.ParseSource(part)
			if err != nil {
				return err
			}
			req.Sources = append(req.Sources, s)
		}
	}
	plan, err := roles.PlanGrants(req)
	if err != nil {
		return err
	}
	stmts, err := drivers.GrantSQL(d, plan)
	if err != nil {
		return err
	}
	return emit(c, map[string]any{"dialect": d.Name(), "role": role, "account": req.Account, "acts_as": req.ActsAs,
		"trusted": role.Trusted(), "statements": stmts}, func(w io.Writer) {
		for _, s := range stmts {
			fmt.Fprintln(w, s)
		}
	})
}
