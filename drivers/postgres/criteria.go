package postgres

import "github.com/loanq/loanq/internal/sqllex"

var _ sqllex.Syntaxer = (*Driver)(nil)

// CriteriaSyntax: how PostgreSQL tokenizes a task's --where and --order
// (dollar quotes, E'…' strings, :: casts), with standard_conforming_strings
// either way.
func (*Driver) CriteriaSyntax() sqllex.Syntax { return sqllex.PostgreSQL }
