// Package all registers every driver loanq ships. The Oracle driver always
// registers; in a build without cgo it answers with how to rebuild.
package all

import (
	_ "github.com/loanq/loanq/drivers/mysql"
	_ "github.com/loanq/loanq/drivers/oracle"
	_ "github.com/loanq/loanq/drivers/postgres"
	_ "github.com/loanq/loanq/drivers/sqlite"
)
