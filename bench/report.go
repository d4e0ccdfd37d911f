package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteText prints results for people: one block per strategy.
func WriteText(w io.Writer, rs []*Result) {
	for i, r := range rs {
		if i > 0 {
			fmt.Fprintln(w)
		}
		procs := ""
		if r.Processes > 1 {
			procs = fmt.Sprintf(" in %d processes", r.Processes)
		}
		fmt.Fprintf(w, "%s on %s (%s): %d workers%s × %d items × %gms of work, batch %d\n",
			r.Strategy, r.Dialect, r.Database, r.Workers, procs, r.Rows, r.WorkMS, r.Batch)
		ratio := "n/a (no work time)"
		if r.IdealMS > 0 {
			ratio = fmt.Sprintf("%.3f", r.Ratio)
		}
		fmt.Fprintf(w, "  elapsed %d ms, ideal %d ms, ratio %s, %.0f items/s\n", r.ElapsedMS, r.IdealMS, ratio, r.PerSecond)
		fmt.Fprintf(w, "  duplicates %d, missed %d, lock errors %d and deadlocks %d (all retried), empty claims retried %d, leases lost %d\n",
			r.Duplicates, r.Missed, r.LockErrors, r.Deadlocks, r.Retries, r.LeaseLost)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "  worker\tprocessed\telapsed ms\tlock errors\tdeadlocks\t")
		var sum int64
		for _, p := range r.PerWorker {
			fmt.Fprintf(tw, "  %d\t%d\t%d\t%d\t%d\t\n", p.Worker, p.Processed, p.ElapsedMS, p.LockErrors, p.Deadlocks)
			sum += p.Processed
		}
		fmt.Fprintf(tw, "  total\t%d\t\t\t\t\n", sum)
		tw.Flush()
	}
}
