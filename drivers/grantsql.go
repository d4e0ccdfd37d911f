package drivers

import (
	"github.com/loanq/loanq/problem"
	"github.com/loanq/loanq/roles"
)

// GrantWriter is implemented by the drivers of databases with accounts: it
// renders a Plan as the statements an admin runs (GRANTs, the
// loanq_account row, and what the dialect needs besides).
type GrantWriter interface {
	GrantSQL(p *roles.Plan) []string
}

// GrantSQL renders p for d, or says why d has no accounts.
func GrantSQL(d Driver, p *roles.Plan) ([]string, error) {
	w, ok := d.(GrantWriter)
	if !ok {
		return nil, problem.Usagef("%s has no database accounts: whoever can write the file can do anything loanq does; protect it with the file's permissions (docs/security.md)", d.Name())
	}
	return w.GrantSQL(p), nil
}
