package commands

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/internal/textsafe"
)

func durationOf(ns int64) time.Duration { return time.Duration(ns) }

func pipelineCommand() *cli.Command {
	return &cli.Command{
		Name:      "pipeline",
		Usage:     "show your active work, oldest first",
		ArgsUsage: " ",
		Description: `Examples:
   loanq --user oliver pipeline
   loanq --user oliver --output json pipeline --task verify-bank`,
		Flags:  []cli.Flag{&cli.StringFlag{Name: "task", Usage: "only this task"}},
		Action: pipeline,
	}
}

func pipeline(c *cli.Context) error {
	if _, err := args(c); err != nil {
		return err
	}
	e, err := openActing(c)
	if err != nil {
		return err
	}
	defer e.Close()
	items, err := e.Pipeline(c.Context, e.user, c.String("task"))
	if err != nil {
		return err
	}
	return emit(c, map[string]any{"user": e.user, "work": items}, func(w io.Writer) {
		if len(items) == 0 {
			fmt.Fprintf(w, "%s has no active work\n", textsafe.Escape(e.user))
			return
		}
		shows := false
		for _, it := range items {
			shows = shows || len(it.Details) > 0 || it.Link != nil
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		head := "TASK\tLOAN\tASSIGNED AT\tFOR"
		if shows {
			head += "\tDETAILS\tLINK"
		}
		fmt.Fprintln(tw, head)
		for _, it := range items {
			line := fmt.Sprintf("%s\t%s\t%s\t%s", textsafe.Escape(it.Task), textsafe.Escape(it.LoanID.String()), it.AssignedAt.Format(time.RFC3339), time.Duration(it.AgeSeconds)*time.Second)
			if shows {
				line += "\t" + detailsText(it.Details) + "\t" + linkText(it.Link) // worknext.go
			}
			fmt.Fprintln(tw, line)
		}
		tw.Flush()
	})
}
