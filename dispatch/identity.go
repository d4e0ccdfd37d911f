package dispatch

import (
	"context"
	"fmt"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/problem"
)

// ActingUser decides whom a command acts as. requested is the --user or
// LOANQ_USER name ("" when none was given), fallback the OS user name.
//
// On a database with accounts the database decides (loanq_may_act_as,
// migration 00008; docs/security.md): an account acts as its own name, as
// the name an admin mapped to it, or as anyone when trusted. A name it may
// not act as is refused (bad input) when the caller gave it; when the caller
// gave none, the account's mapped name, else its own name, is used instead
// of the OS user's. The check here is for a clear message before anything is
// written: the database's policies or triggers refuse the same writes sent
// by hand. SQLite has no accounts, and any name is used as given.
func (st *store) ActingUser(ctx context.Context, requested, fallback string) (string, error) {
	name := requested
	if name == "" {
		name = fallback
	}
	if err := validateUser(name); err != nil && (requested != "" || st.caps().Accounts == drivers.AccountsNone) {
		return "", err // the name given is bad input whatever the database says
	} else if err != nil {
		name = "" // a bad OS user name: the account's own name may stand in for it
	}
	id, err := st.Identity(ctx, name)
	if err == drivers.ErrNoAccounts {
		return name, nil
	}
	if err != nil {
		return "", err
	}
	if id.MayActAs {
		return name, nil
	}
	own := id.Account
	if id.Mapped != "" {
		own = id.Mapped
	}
	if requested == "" {
		return own, nil
	}
	return "", problem.WithHint(problem.Usagef("database account %s may not act as user %q: it acts only as %s",
		id.Account, requested, actsAs(id)),
		"drop --user (and LOANQ_USER) to act as "+own+", or have an admin map or trust this account: see `loanq grants --help` and docs/security.md")
}

func actsAs(id drivers.Identity) string {
	if id.Mapped != "" && id.Mapped != id.Account {
		return fmt.Sprintf("%q or %q", id.Mapped, id.Account)
	}
	return fmt.Sprintf("%q", id.Account)
}

// Identity reads what the database says about the connection's account and
// user (drivers.ErrNoAccounts on SQLite).
func (st *store) Identity(ctx context.Context, user string) (drivers.Identity, error) {
	q := &st.sql().Identity
	if st.caps().Accounts == drivers.AccountsNone {
		return drivers.Identity{}, drivers.ErrNoAccounts
	}
	r, err := q.One(ctx, st.db, engineio.UserParams{User: user})
	if err != nil {
		return drivers.Identity{}, fmt.Errorf("reading which users this database account may act as: %w", err)
	}
	return drivers.Identity{Account: r.Account, MayActAs: r.MayAct == 1, Mapped: r.Mapped.String}, nil
}
