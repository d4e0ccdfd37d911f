// Command loanq hands work to human processors through a relational database,
// so that people asking for work at the same moment never get the same item.
package main

import (
	"os"

	"github.com/loanq/loanq/commands"

	// Database drivers register themselves by DSN scheme.
	_ "github.com/loanq/loanq/drivers/mysql"
	// _ "github.com/loanq/loanq/drivers/oracle" // TEMP
	_ "github.com/loanq/loanq/drivers/postgres"
	_ "github.com/loanq/loanq/drivers/sqlite"
)

func main() {
	os.Exit(commands.Main(os.Args, os.Stdout, os.Stderr))
}
