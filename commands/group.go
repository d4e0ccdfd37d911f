package commands

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/textsafe"
	"github.com/loanq/loanq/problem"
)

// `loanq group`: who is in which group, for tasks' allow lists (task
// create|update --allow @GROUP; docs/governance.md).
func groupCommand() *cli.Command {
	return &cli.Command{
		Name:  "group",
		Usage: "manage the groups of users that tasks' allow lists name (--allow @GROUP)",
		Description: `A task created or updated with --allow USER or --allow @GROUP may be worked
only by the users it names and the members of the groups it names; a task
without --allow by everyone. Membership changes take effect at the next
work get. With loanq serve --auth proxy --proxy-groups-header, a trusted
proxy may name a user's groups too (group list shows them as source proxy).

Examples:
   loanq group add senior-review ana oliver
   loanq group remove senior-review oliver
   loanq group list
   loanq --output json group list`,
		Subcommands: []*cli.Command{
			{Name: "add", Usage: "add users to a group (created with its first member)", ArgsUsage: "GROUP USER…", Action: groupAdd,
				Description: "Examples:\n   loanq group add senior-review ana oliver\n   loanq task update big-loans --allow @senior-review"},
			{Name: "remove", Usage: "remove users from a group (gone with its last member)", ArgsUsage: "GROUP USER…", Action: groupRemove,
				Description: "Work already assigned stays in the user's pipeline; the next work get of a task\nthat allows the group only is refused.\n\nExamples:\n   loanq group remove senior-review oliver"},
			{Name: "list", Usage: "list groups and their members", ArgsUsage: " ", Action: groupList,
				Description: "Examples:\n   loanq group list\n   loanq --output json group list"},
		},
	}
}

// groupArgs reads GROUP USER… and checks them before connecting.
func groupArgs(c *cli.Context) (string, []string, error) {
	if c.NArg() < 2 {
		return "", nil, problem.Usagef("`%s` takes a group and at least one user: GROUP USER… (got %d argument(s)); see `%s --help`",
			c.Command.HelpName, c.NArg(), c.Command.HelpName)
	}
	group, users := c.Args().First(), c.Args().Tail()
	return group, users, dispatch.CheckGroupArgs(group, users)
}

func groupAdd(c *cli.Context) error {
	group, users, err := groupArgs(c)
	if err != nil {
		return err
	}
	e, err := openActing(c)
	if err != nil {
		return err
	}
	defer e.Close()
	n, err := e.admin.GroupAdd(c.Context, group, users, e.user)
	if err != nil {
		return err
	}
	return emit(c, map[string]any{"group": group, "users": users, "added": n}, func(w io.Writer) {
		fmt.Fprintf(w, "group %s: %d user(s) added, %d already members\n", textsafe.Escape(group), n, len(users)-n)
	})
}

func groupRemove(c *cli.Context) error {
	group, users, err := groupArgs(c)
	if err != nil {
		return err
	}
	e, err := openActing(c)
	if err != nil {
		return err
	}
	defer e.Close()
	n, err := e.admin.GroupRemove(c.Context, group, users)
	if err != nil {
		return err
	}
	return emit(c, map[string]any{"group": group, "users": users, "removed": n}, func(w io.Writer) {
		fmt.Fprintf(w, "group %s: %d user(s) removed, %d were not members\n", textsafe.Escape(group), n, len(users)-n)
	})
}

func groupList(c *cli.Context) error {
	if _, err := args(c); err != nil {
		return err
	}
	e, err := open(c)
	if err != nil {
		return err
	}
	defer e.Close()
	ms, err := e.admin.Groups(c.Context)
	if err != nil {
		return err
	}
	list := []map[string]any{}
	for _, m := range ms {
		list = append(list, map[string]any{"group": m.Group, "user": m.User, "source": m.Source, "added_by": m.AddedBy})
	}
	return emit(c, map[string]any{"groups": list}, func(w io.Writer) {
		if len(ms) == 0 {
			fmt.Fprintln(w, "no groups yet: add users with `loanq group add GROUP USER…`")
			return
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "GROUP\tUSER\tSOURCE\tADDED BY")
		for _, m := range ms {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", textsafe.Escape(m.Group), textsafe.Escape(m.User), m.Source, textsafe.Escape(m.AddedBy))
		}
		tw.Flush()
	})
}
