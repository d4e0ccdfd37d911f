// Command loanq hands work to human processors through a relational database,
// so that people asking for work at the same moment never get the same item.
package main

import (
	"os"

	"github.com/loanq/loanq/commands"
	"github.com/loanq/loanq/internal/cpuprofile"

	_ "github.com/loanq/loanq/drivers/all" // registers every database driver
)

func main() {
	stop := cpuprofile.Start()
	code := commands.Main(os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
