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
		fmt.Fprintf(w, "%s on %s (%s, %s): %d workers%s × %d items × %gms of work, batch %d\n",
			r.Strategy, r.Dialect, r.Server, r.Database, r.Workers, procs, r.Rows, r.WorkMS, r.Batch)
		ratio, perSecond := "n/a (no work time)", fmt.Sprintf("%.0f items/s", r.PerSecond)
		if r.IdealMS > 0 {
			ratio = fmt.Sprintf("%.3f", r.Ratio)
			// The work time caps the rate whatever the database: say so, so
			// that the default run's ~97 items/s is not read as its speed.
			perSecond += fmt.Sprintf(" (at most %.0f: %d workers × 1 item per %gms of work)",
				float64(r.Workers)*1000/r.WorkMS, r.Workers, r.WorkMS)
		}
		fmt.Fprintf(w, "  elapsed %d ms, ideal %d ms, ratio %s, %s, %s\n", r.ElapsedMS, r.IdealMS, ratio, perSecond, r.lockedText())
		fmt.Fprintf(w, "  duplicates %d, missed %d, lock errors %d and deadlocks %d (all retried), empty claims retried %d, leases lost %d\n",
			r.Duplicates, r.Missed, r.LockErrors, r.Deadlocks, r.Retries, r.LeaseLost)
		if r.PrioritySkew != nil {
			fmt.Fprintf(w, "  priority skew: %s\n", r.PrioritySkew.text("items"))
		}
		if r.RawBatchPerS > 0 {
			fmt.Fprintf(w, "  raw limit, one statement claiming and finishing %d items, same workers: %.0f items/s; ratio %.3f\n", r.Batch, r.RawBatchPerS, r.RawBatchRatio)
		}
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

// WriteEngineText prints an engine run for people.
func WriteEngineText(w io.Writer, r *EngineResult) {
	procs := ""
	if r.Processes > 1 {
		procs = fmt.Sprintf(" in %d processes", r.Processes)
	}
	complete := "complete each loan"
	if r.Dispose == DisposeBatch {
		complete = "complete its loans in one call"
	}
	fmt.Fprintf(w, "engine, %s on %s (%s, %s): %d callers%s looping work get --count %d + %s, %d loans\n",
		r.Strategy, r.Dialect, r.Server, r.Database, r.Workers, procs, r.Count, complete, r.Rows)
	fmt.Fprintf(w, "  %d loans in %d ms: %.0f loans/s; work get p50 %d ms, p99 %d ms, max %d ms\n",
		r.Loans, r.ElapsedMS, r.LoansPerS, r.GetP50MS, r.GetP99MS, r.GetMaxMS)
	fmt.Fprintf(w, "  %d requests, %d criteria runs (%.3f per request), %d waits past the timeout, %d left pending\n",
		r.Requests, r.CriteriaRuns, r.RunsPerRequest, r.Busy, r.Pending)
	fmt.Fprintf(w, "  duplicates %d, items worked twice %d, loans counted by the callers %d\n", r.Duplicates, r.ItemsTwice, r.LoansCounted)
	if r.RawStrategy != "" {
		fmt.Fprintf(w, "  raw %s claim of the item table, same callers: %d items in %d ms, %.0f items/s; engine/raw ratio %.3f\n",
			r.RawStrategy, r.RawItems, r.RawElapsedMS, r.RawItemsPerS, r.Ratio)
	}
	fmt.Fprintf(w, "  loans assigned after a lower-priority one (work rows in insertion order): %d\n", r.AssignedOutOfOrder)
	if r.PrioritySkew != nil {
		fmt.Fprintf(w, "  priority skew: %s\n", r.PrioritySkew.text("loans"))
	}
	if r.RawPrioritySkew != nil {
		fmt.Fprintf(w, "  priority skew of the raw claim: %s\n", r.RawPrioritySkew.text("items"))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  caller\tloans\trequests\ttimed out\telapsed ms\t")
	for _, p := range r.PerWorker {
		fmt.Fprintf(tw, "  %d\t%d\t%d\t%d\t%d\t\n", p.Worker, p.Loans, p.Requests, p.Busy, p.ElapsedMS)
	}
	tw.Flush()
}

// lockedText says how many rows one claim locks, beside what it returns.
func (r *Result) lockedText() string {
	if r.LockedPerClaim < 0 {
		return "rows locked per claim: n/a (no row locks: one writer at a time)"
	}
	return fmt.Sprintf("rows locked per claim of %d: %d", r.Batch, r.LockedPerClaim)
}

// text says the skew in one line: what share of the items were got before a
// higher-priority one, by how many ranks, and how long before.
func (s *PrioritySkew) text(items string) string {
	if s.OutOfOrder == 0 {
		return fmt.Sprintf("none: the %d %s were got in priority order", s.Items, items)
	}
	return fmt.Sprintf("%d of %d %s (%.1f %%) were got before a higher-priority one; higher-priority %s got after one: p50 %d, p99 %d, max %d; the last of them came p99 %.1f ms, max %.1f ms later",
		s.OutOfOrder, s.Items, items, 100*s.OutOfOrderShare, items, s.DisplacementP50, s.DisplacementP99, s.DisplacementMax, s.LagP99MS, s.LagMaxMS)
}
