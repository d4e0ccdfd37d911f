package commands

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/flagvalue"
	"github.com/loanq/loanq/internal/textsafe"
	"github.com/loanq/loanq/jsondoc"
	"github.com/loanq/loanq/problem"
)

func historyCommand() *cli.Command {
	return &cli.Command{
		Name:      "history",
		Usage:     "export assignments and dispositions as a stream, one record per line, in id order; resumable with --after-id",
		ArgsUsage: " ",
		Description: `Writes the events of loanq's history, an assignment ("assigned") or a
disposition ("disposed") each, in the order of their ids: one readable line
per event (text), one JSON object per line (--output json), or CSV with a
header line (--output csv). Each record has the event's id, when it was
written, the task, loan, assignee, request and work row, and for a
disposition what it was, when, by whom, its reason, note and return time.
Times are UTC, RFC 3339 with milliseconds.

Resuming: the id of the last record written is the cursor; the next export
starts after it with --after-id ID and writes every later event exactly once
(text output also says "last id N" on stderr). The stream ends at the first
event written less than --settle before it started (default 10s): a
transaction commits after it wrote its events, so a younger event may still
be joined by an uncommitted one with a lower id. The export reads in batches
and holds one at a time, whatever the history's size. --since keeps the events
written at or after a time (RFC 3339) or within an age (24h, 7d).

Reads loanq_history, which the database's triggers write: the admin,
supervisor and dashboard roles of ` + "`loanq grants`" + ` may read it, a processor
may not. Nightly export, then prune: docs/retention.md.

Exit codes: 0 done (also when there was nothing to write), 2 bad input or no
right to read the history, 1 other failure.

Examples:
   loanq history --since 24h
   loanq history --output json --after-id 0
   loanq history --output csv --task verify-bank --user oliver
   loanq history --output json --after-id 1041 >> history.jsonl
   loanq history --since 2024-05-01T00:00:00Z --settle 30s`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "task", Usage: "only this task's events"},
			&cli.StringFlag{Name: "user", Usage: "only the events of this assignee's work"},
			&cli.StringFlag{Name: "since", Usage: "only events written at or after `TIME` (RFC 3339, e.g. 2024-05-01T00:00:00Z) or within an age (24h, 7d)"},
			&cli.Int64Flag{Name: "after-id", Usage: "only events after this `ID` (the last id an export wrote)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "text, json (one object per line) or csv (default: the global --output)"},
			&cli.StringFlag{Name: "settle", Value: dispatch.DefaultHistorySettle.String(), Usage: "end before the events written less than this before the export started"},
			&cli.IntFlag{Name: "batch", Value: dispatch.DefaultHistoryBatch, Usage: fmt.Sprintf("events per statement, 1-%d", dispatch.MaxHistoryBatch)},
		},
		Action: history,
	}
}

func history(c *cli.Context) error {
	if _, err := args(c); err != nil {
		return err
	}
	format, err := historyFormat(c)
	if err != nil {
		return err
	}
	o := dispatch.HistoryOptions{Task: c.String("task"), User: c.String("user"), AfterID: c.Int64("after-id"), Batch: c.Int("batch")}
	if c.IsSet("user") && o.User == "" {
		return problem.Usagef("empty --user: give an assignee's name, or leave --user out for everyone")
	}
	if c.IsSet("task") && o.Task == "" {
		return problem.Usagef("empty --task: give a task's name, or leave --task out for every task")
	}
	if s := c.String("since"); s != "" || c.IsSet("since") {
		if o.SinceTime, o.SinceAge, err = parseSince(s); err != nil {
			return err
		}
	}
	if o.Settle, err = flagvalue.Duration("settle", c.String("settle")); err != nil {
		return err
	}
	if err := dispatch.ValidateHistory(o); err != nil {
		return err
	}
	e, err := open(c)
	if err != nil {
		return err
	}
	defer e.Close()
	bw := bufio.NewWriterSize(c.App.Writer, 64<<10)
	write, flush := historyWriter(format, bw)
	res, err := e.admin.ExportHistory(c.Context, o, write)
	if ferr := flush(); err == nil && ferr != nil {
		err = fmt.Errorf("writing the history: %w", ferr)
	}
	if err != nil {
		if drivers.IsPermissionDenied(err) {
			return problem.WithHint(problem.AsUsage(err, "this database account may not read the history (loanq_history)"),
				"the history is read by admin, supervisor and dashboard accounts (`loanq grants --help`); a processor sees its own work with `loanq pipeline`")
		}
		return err
	}
	if format == "text" {
		w := c.App.ErrWriter
		if res.Events > 0 {
			fmt.Fprintf(w, "loanq: %d event(s); last id %d (resume with --after-id %d)", res.Events, res.LastID, res.LastID)
		} else {
			fmt.Fprintf(w, "loanq: no events after id %d (resume with --after-id %d)", res.LastID, res.LastID)
		}
		if res.Settling {
			fmt.Fprintf(w, "; events of the last %s follow in a later export (--settle)", o.Settle)
		}
		fmt.Fprintln(w)
	}
	return nil
}

// historyFormat is the command's --output, else the global one (text or
// json): `loanq -o json history` and `loanq history -o json` agree.
func historyFormat(c *cli.Context) (string, error) {
	f := strings.ToLower(strings.TrimSpace(c.String("output")))
	for _, up := range c.Lineage()[1:] {
		if f != "" {
			break
		}
		if up.Command != nil && up.Command.Name == "history" {
			continue // the command's own context again
		}
		f = strings.ToLower(strings.TrimSpace(up.String("output")))
	}
	switch f {
	case "", "text":
		return "text", nil
	case "json", "csv":
		return f, nil
	}
	return "", problem.Usagef("invalid --output %q: loanq history writes text, json (one object per line) or csv", c.String("output"))
}

// parseSince reads --since: an RFC 3339 time, or an age (a duration, or
// whole days such as 7d) meaning the database's clock minus it.
func parseSince(s string) (time.Time, time.Duration, error) {
	t := strings.TrimSpace(s)
	if at, err := time.Parse(time.RFC3339Nano, t); err == nil {
		return at, 0, nil
	}
	bad := problem.Usagef("invalid --since %q: give a time such as 2024-05-01T00:00:00Z (RFC 3339), or an age such as 24h or 7d", s)
	if days, ok := strings.CutSuffix(t, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 || n > 100*365 {
			return time.Time{}, 0, bad
		}
		return time.Time{}, time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(t)
	if err != nil || d <= 0 {
		return time.Time{}, 0, bad
	}
	return time.Time{}, d, nil
}

// historyCSVHeader is the CSV header: the JSON keys, in their order.
var historyCSVHeader = []string{"id", "event", "at", "task", "loan", "user", "request_id", "work_id", "assigned_at",
	"disposition", "disposed_at", "disposed_by", "reason", "note", "return_at"}

// historyWriter returns how each event is written in format, and the flush
// that ends the output.
func historyWriter(format string, w *bufio.Writer) (func(*dispatch.HistoryEvent) error, func() error) {
	switch format {
	case "json":
		lw := jsondoc.NewLineWriter(w)
		return func(ev *dispatch.HistoryEvent) error { return lw.Write(jsondoc.History(ev)) }, w.Flush
	case "csv":
		cw := csv.NewWriter(w)
		header := false
		rec := make([]string, len(historyCSVHeader))
		write := func(ev *dispatch.HistoryEvent) error {
			if !header {
				header = true
				if err := cw.Write(historyCSVHeader); err != nil {
					return err
				}
			}
			r := jsondoc.History(ev)
			rec = append(rec[:0], strconv.FormatInt(r.ID, 10), r.Event, r.At, r.Task, r.Loan.Text, r.User,
				strconv.FormatInt(r.RequestID, 10), strconv.FormatInt(r.WorkID, 10), r.AssignedAt,
				deref(r.Disposition), deref(r.DisposedAt), deref(r.DisposedBy), deref(r.Reason), deref(r.Note), deref(r.ReturnAt))
			return cw.Write(rec)
		}
		flush := func() error {
			if !header { // a header even when no event follows: the file names its columns
				if err := cw.Write(historyCSVHeader); err != nil {
					return err
				}
			}
			cw.Flush()
			if err := cw.Error(); err != nil {
				return err
			}
			return w.Flush()
		}
		return write, flush
	}
	return func(ev *dispatch.HistoryEvent) error {
		fmt.Fprintf(w, "%d  %s  %-8s  %s  loan %s  %s", ev.ID, jsondoc.Timestamp(ev.At), ev.Event,
			textsafe.Escape(ev.Task), textsafe.Escape(ev.Loan.Text), textsafe.Escape(ev.User))
		if ev.Event == "disposed" {
			fmt.Fprintf(w, "  %s", ev.Disposition)
			if ev.DisposedBy != "" {
				fmt.Fprintf(w, " by %s", textsafe.Escape(ev.DisposedBy))
			}
			if !ev.ReturnAt.IsZero() {
				fmt.Fprintf(w, " until %s", jsondoc.Timestamp(ev.ReturnAt))
			}
			if ev.Reason != "" {
				fmt.Fprintf(w, "  reason %s", textsafe.Escape(ev.Reason))
			}
			if ev.Note != "" {
				fmt.Fprintf(w, "  note %q", ev.Note)
			}
		}
		_, err := w.WriteString("\n")
		return err
	}, w.Flush
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
