package mysql

import "github.com/loanq/loanq/internal/sqllex"

var _ sqllex.Syntaxer = (*Driver)(nil)

// CriteriaSyntax: how MySQL and MariaDB tokenize a task's --where and
// --order, in each sql_mode that changes it.
func (*Driver) CriteriaSyntax() sqllex.Syntax { return sqllex.MySQL }
