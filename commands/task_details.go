package commands

import (
	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/dispatch"
)

// displayChange reads task update's --priority, --show and --link (an
// empty --show or --link clears it).
func displayChange(c *cli.Context, ch *dispatch.TaskChange) error {
	if c.IsSet("priority") {
		v := c.Int("priority")
		ch.Priority = &v
	}
	if c.IsSet("show") {
		cols, err := dispatch.ParseShow(c.String("show"))
		if err != nil {
			return err
		}
		ch.Show = &cols
	}
	if c.IsSet("link") {
		v := c.String("link")
		ch.Link = &v
	}
	return nil
}
