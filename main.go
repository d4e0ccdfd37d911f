// Command loanq hands work to human processors through a relational database,
// so that people asking for work at the same moment never get the same item.
package main

import (
	"os"

	"github.com/loanq/loanq/commands"

	_ "github.com/loanq/loanq/drivers/all" // registers every database driver
)

func main() {
	os.Exit(commands.Main(os.Args, os.Stdout, os.Stderr))
}
