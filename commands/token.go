package commands

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/problem"
)

// tokenCommand is `loanq token create|list|revoke`: the API tokens of
// `loanq serve --api --auth token` (docs/api.md). Only their SHA-256 is
// stored; a token is printed once, at creation.
func tokenCommand() *cli.Command {
	return &cli.Command{
		Name:  "token",
		Usage: "issue, list and revoke the API tokens of `loanq serve --api --auth token`",
		Description: `An API token lets a processor without a database account use loanq through
` + "`loanq serve --api --auth token`" + `: the serve process's account does the work, acting
as the token's user. A processor token acts only as its user; a supervisor token
may also reclaim work and see everyone's. Only the token's SHA-256 is stored: the
token is printed once, by token create, and cannot be read back. A revoked or
expired token is refused by every serve process at its next call. See docs/api.md.

Examples:
   loanq token create --user ana --role processor --expires 90d
   loanq token create --user sam --role supervisor
   loanq token list
   loanq token revoke 3`,
		Subcommands: []*cli.Command{
			{
				Name:      "create",
				Usage:     "issue a token for one user (printed once)",
				ArgsUsage: " ",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "user", Usage: "the loanq user `NAME` the token acts as (required)"},
					&cli.StringFlag{Name: "role", Value: "processor", Usage: "processor (acts only as its user) or supervisor (may also reclaim and see everyone's work)"},
					&cli.StringFlag{Name: "expires", Usage: "refuse the token after `D`: days (90d) or a duration (720h); default: never"},
				},
				Action: tokenCreate,
			},
			{Name: "list", Usage: "list tokens: id, user, role, state (never the tokens)", ArgsUsage: " ", Action: tokenList},
			{Name: "revoke", Usage: "refuse a token from now on", ArgsUsage: "ID", Action: tokenRevoke},
		},
	}
}

func tokenCreate(c *cli.Context) error {
	if _, err := args(c); err != nil {
		return err
	}
	// The global --user (and LOANQ_USER) is who acts; a token's user must be
	// named on token create itself, never taken from the environment.
	if !slices.Contains(c.LocalFlagNames(), "user") {
		return problem.Usagef("name the token's user: `loanq token create --user NAME --role processor|supervisor`")
	}
	var expires time.Duration
	if c.String("expires") != "" {
		var err error
		if expires, err = parseAge("expires", c.String("expires")); err != nil {
			return err
		}
	}
	if _, err := dispatch.CheckNewToken(c.String("user"), c.String("role"), expires); err != nil {
		return err // before connecting: bad input is refused with the database down too
	}
	e, err := open(c)
	if err != nil {
		return err
	}
	defer e.Close()
	by, err := e.admin.Issuer(c.Context, actingRequested(c), defaultUser())
	if err != nil {
		return err
	}
	t, err := e.admin.CreateToken(c.Context, c.String("user"), c.String("role"), by, expires)
	if err != nil {
		return err
	}
	return emit(c, t, func(w io.Writer) {
		exp := "never expires"
		if t.ExpiresMs != nil {
			exp = "expires in " + (time.Duration(*t.ExpiresMs) * time.Millisecond).String()
		}
		fmt.Fprintf(w, "token %d for %s (%s, %s):\n%s\n", t.ID, t.User, t.Role, exp, t.Token)
		fmt.Fprintf(w, "It is shown only now: give it to the user (Authorization: Bearer TOKEN); `loanq token revoke %d` ends it.\n", t.ID)
	})
}

func tokenList(c *cli.Context) error {
	if _, err := args(c); err != nil {
		return err
	}
	e, err := open(c)
	if err != nil {
		return err
	}
	defer e.Close()
	list, err := e.admin.ListTokens(c.Context)
	if err != nil {
		return err
	}
	return emit(c, map[string]any{"tokens": list}, func(w io.Writer) {
		if len(list) == 0 {
			fmt.Fprintln(w, "no API tokens: `loanq token create --user NAME` issues one")
			return
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tUSER\tROLE\tSTATE\tCREATED BY\tAGE\tEXPIRES IN")
		for _, t := range list {
			left := "-"
			if t.ExpiresS != nil {
				left = (time.Duration(*t.ExpiresS) * time.Second).String()
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.User, t.Role, t.State, t.CreatedBy,
				(time.Duration(t.AgeS) * time.Second).String(), left)
		}
		tw.Flush()
	})
}

func tokenRevoke(c *cli.Context) error {
	a, err := args(c, "ID")
	if err != nil {
		return err
	}
	id, err := strconv.ParseInt(a[0], 10, 64)
	if err != nil || id <= 0 {
		return problem.Usagef("invalid token id %q: give the id `loanq token list` shows", a[0])
	}
	e, err := open(c)
	if err != nil {
		return err
	}
	defer e.Close()
	by, err := e.admin.Issuer(c.Context, actingRequested(c), defaultUser())
	if err != nil {
		return err
	}
	if err := e.admin.RevokeToken(c.Context, id, by); err != nil {
		return err
	}
	return emit(c, map[string]any{"id": id, "revoked": true}, func(w io.Writer) {
		fmt.Fprintf(w, "token %d revoked: every serve process refuses it from its next call\n", id)
	})
}

// actingRequested is the global --user (or LOANQ_USER), "" when none was
// given. token create has a --user of its own, the token's user, so the
// global one is read through the parent context (`token`, which has no
// --user: a flag is looked up from there up to the global flags).
func actingRequested(c *cli.Context) string {
	if parent := c.Lineage()[1]; parent.IsSet("user") {
		return parent.String("user")
	}
	return ""
}
