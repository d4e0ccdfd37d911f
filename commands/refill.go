package commands

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/internal/flagvalue"
	"github.com/loanq/loanq/internal/pause"
	"github.com/loanq/loanq/internal/textsafe"
	"github.com/loanq/loanq/jsondoc"
	"github.com/loanq/loanq/problem"
)

func taskRefillCommand() *cli.Command {
	return &cli.Command{
		Name:      "refill",
		Usage:     "run a prefetch task's criteria query now and refill its candidate pool",
		ArgsUsage: "NAME | --all",
		Description: `A task created with --prefetch N serves gets from a pool of candidates that
each criteria run refills. "task refill NAME" runs one refill now, under the
task's lock or lease (skipped when someone holds it: that holder's run
refills the pool). "--all" refills every prefetch task whose fresh pool is at
or below its low mark; "--every D" keeps doing so until interrupted, so that
no processor waits for a query. One refill per task runs at a time, on any
number of nodes; "loanq lock run" can keep a single refresher on a farm.

Examples:
   loanq task refill heavy
   loanq task refill --all
   loanq task refill --all --every 30s
   loanq lock run refresher -- loanq task refill --all --every 30s`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "all", Usage: "every prefetch task at or below its low mark"},
			&cli.StringFlag{Name: "every", Usage: "with --all: repeat at this interval until interrupted"},
			logFormatFlag(),
		},
		Action: taskRefill,
	}
}

func taskRefill(c *cli.Context) error {
	all := c.Bool("all")
	if all == (c.NArg() == 1) || c.NArg() > 1 {
		return problem.Usagef("give one task NAME or --all")
	}
	var every time.Duration
	if c.IsSet("every") {
		if !all {
			return problem.Usagef("--every repeats --all: give --all with it")
		}
		d, err := flagvalue.Duration("every", c.String("every"))
		if err != nil {
			return err
		}
		if d < time.Second {
			return problem.Usagef("invalid --every %s: give at least 1s", c.String("every"))
		}
		every = d
	}
	lg, err := newEventLog(c)
	if err != nil {
		return err
	}
	open := open
	if every > 0 {
		open = openLasting // a loop that refills every interval
	}
	e, err := open(c)
	if err != nil {
		return err
	}
	defer e.Close()
	if !all {
		t, err := e.Task(c.Context, c.Args().First())
		if err != nil {
			return err
		}
		out, err := e.Refill(c.Context, t, true)
		if err != nil {
			return err
		}
		return emit(c, map[string]any{"refills": []dispatch.RefillOutcome{out}}, func(w io.Writer) { printRefills(w, []dispatch.RefillOutcome{out}) })
	}
	for {
		outs, err := e.RefillAll(c.Context)
		if err != nil && every == 0 {
			return err
		}
		if err != nil {
			lg.Event(slog.LevelError, fmt.Sprintf("loanq: refill: %s (trying again in %s)", textsafe.Escape(err.Error()), every),
				"refill failed, trying again", "error", textsafe.Escape(err.Error()), "retry_in_ms", every.Milliseconds())
		} else if every == 0 {
			return emit(c, map[string]any{"refills": outs}, func(w io.Writer) { printRefills(w, outs) })
		} else {
			for _, o := range outs {
				if o.Refused == "" {
					fmt.Fprintf(c.App.Writer, "%s refilled %s: %d -> %d candidates\n", time.Now().UTC().Format(jsondoc.TimestampLayout), textsafe.Escape(o.Task), o.Before, o.After)
					if lg.JSON() {
						lg.j.Info("refilled", "task", o.Task, "before", o.Before, "after", o.After)
					}
				}
			}
		}
		if err := pause.For(c.Context, every); err != nil {
			// SIGINT/SIGTERM end the loop as a shell would report them
			// (130/143), not as a failure (context canceled, exit 1).
			if cause := context.Cause(c.Context); cause != nil {
				return &problem.Error{Kind: problem.Interrupted, Err: cause, Msg: "refill loop stopped"}
			}
			return err
		}
	}
}

func printRefills(w io.Writer, outs []dispatch.RefillOutcome) {
	if len(outs) == 0 {
		fmt.Fprintln(w, "no task has a candidate pool (task create|update … --prefetch N)")
	}
	for _, o := range outs {
		if o.Refused != "" {
			fmt.Fprintf(w, "%s: not refilled, %s (%d candidates)\n", textsafe.Escape(o.Task), o.Refused, o.Before)
		} else {
			fmt.Fprintf(w, "%s: refilled, %d -> %d candidates\n", textsafe.Escape(o.Task), o.Before, o.After)
		}
	}
}
