package dispatch

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/problem"
)

// History retention (`loanq prune`, docs/retention.md). Every work get logs
// a request, every serving round a criteria-query run, every loan a work row
// kept after its disposition and its events (loanq_history, the export's
// stream); a prune removes what is older than a cutoff and decides nothing
// any more:
//
//   - a closed request goes together with all its work rows, once it was
//     closed before the cutoff and none of its rows is active, 'never', a
//     return whose time is still ahead, or ended after the cutoff (so the
//     eligibility of every loan is what it was, and a request's assigned
//     count still matches its rows), and the work rows' events with
//     them, in their transaction;
//   - a task's criteria-query runs started before the cutoff go, except its
//     PruneKeepRuns latest (the engine's hold limit and coalescing,
//     the dashboard's chart);
//   - pending requests, active work, and everything of the last
//     MinPruneAge (today's dashboard figures, task stats' 24 hours) stay.
//
// Batches are short: the ids are read without a lock, then deleted by id in
// transactions of their own, committed before the next batch. A prune
// never touches a task row, a lease or a pending request, the only rows a
// processor waits on.

// Retention limits.
const (
	DefaultPruneAge   = 90 * 24 * time.Hour
	MinPruneAge       = 24 * time.Hour // task stats count the last 24 h; today is within them
	DefaultPruneBatch = 500
	MaxPruneBatch     = 10000
)

// PruneOptions says what a prune removes.
type PruneOptions struct {
	OlderThan time.Duration // the cutoff's age, at least MinPruneAge
	Task      string        // "" for every task
	DryRun    bool          // count only
	Batch     int           // requests (with their work rows) or runs per batch
}

// PruneResult is what a prune removed (or, dry, would remove), per table.
type PruneResult struct {
	OlderThanMS int64  `json:"older_than_ms"`
	Task        string `json:"task,omitempty"`
	DryRun      bool   `json:"dry_run"`
	Batch       int    `json:"batch"`
	// Removed counts the rows removed (dry: that would be) per table.
	Removed PruneCounts `json:"removed"`
	Batches int         `json:"batches"`
	// LongestBatchMS is the longest delete transaction of a batch (from
	// begin to commit); 0 on a dry run.
	LongestBatchMS int64 `json:"longest_batch_ms"`
	DurationMS     int64 `json:"duration_ms"`
}

// PruneCounts are rows per table.
type PruneCounts struct {
	Requests  int64 `json:"loanq_work_request"`
	Work      int64 `json:"loanq_work"`
	History   int64 `json:"loanq_history"` // the events of those work rows
	QueryRuns int64 `json:"loanq_query_run"`
}

// ValidatePrune checks a prune's options before the database is touched.
func ValidatePrune(o PruneOptions) error {
	if o.OlderThan < MinPruneAge {
		return problem.WithHint(problem.Usagef("invalid --older-than %s: a prune keeps at least the last 24h", FormatAge(o.OlderThan)),
			"today's dashboard figures and task stats' 24-hour window are never pruned; give 24h or more, e.g. 90d or 720h")
	}
	if o.Batch < 1 || o.Batch > MaxPruneBatch {
		return problem.Usagef("invalid --batch %d: give 1 to %d (rows per short transaction)", o.Batch, MaxPruneBatch)
	}
	if o.Task != "" {
		return ValidateTaskName(o.Task)
	}
	return nil
}

// FormatAge writes an age as whole days ("90d") when it is some, else as a
// duration ("36h0m0s").
func FormatAge(d time.Duration) string {
	if d > 0 && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

// Prune removes the history older than o.OlderThan (docs/retention.md).
func (a *Admin) Prune(ctx context.Context, o PruneOptions) (*PruneResult, error) {
	if err := ValidatePrune(o); err != nil {
		return nil, err
	}
	start := time.Now()
	res := &PruneResult{OlderThanMS: o.OlderThan.Milliseconds(), Task: o.Task, DryRun: o.DryRun, Batch: o.Batch}
	var tasks []*Task
	var taskID int64
	if o.Task != "" {
		t, err := a.Task(ctx, o.Task)
		if err != nil {
			return nil, err
		}
		tasks, taskID = []*Task{t}, t.ID
	} else {
		var err error
		if tasks, err = a.Tasks(ctx); err != nil {
			return nil, err
		}
	}
	age := o.OlderThan.Milliseconds()
	if err := a.pruneRequests(ctx, o, pruneBoundsParams{TaskID: taskID, AgeMS: age}, res); err != nil {
		return nil, err
	}
	for _, t := range tasks {
		if err := a.pruneRuns(ctx, o, pruneBoundsParams{TaskID: t.ID, AgeMS: age}, res); err != nil {
			return nil, fmt.Errorf("pruning the criteria-query runs of task %s: %w", t.Name, err)
		}
	}
	res.DurationMS = time.Since(start).Milliseconds()
	return res, nil
}

// pruneRequests removes the prunable requests with their work rows, batch
// by batch along the primary key between the bounds.
func (a *Admin) pruneRequests(ctx context.Context, o PruneOptions, b pruneBoundsParams, res *PruneResult) error {
	q := a.pruneSQL()
	lo, hi, err := pruneBounds(q.PruneRequestBounds.One(ctx, a.db, pruneBoundsParams{TaskID: b.TaskID, AgeMS: b.AgeMS}))
	if err != nil || hi == 0 {
		return wrapPrune("requests", err)
	}
	after := lo - 1
	for {
		ids, err := engineio.IDs(q.PruneRequestBatch.All(ctx, a.db, pruneBatchParams{
			TaskID: b.TaskID, AgeMS: b.AgeMS, After: after, Upto: hi, Limit: o.Batch}))
		if err != nil || len(ids) == 0 {
			return wrapPrune("requests", err)
		}
		after = ids[len(ids)-1]
		list := idList(ids)
		if o.DryRun {
			work, err := q.PruneWorkCount.One(ctx, a.db, idListParams{IDs: list})
			if err != nil {
				return wrapPrune("requests", err)
			}
			events, err := q.PruneHistoryCount.One(ctx, a.db, idListParams{IDs: list})
			if err != nil {
				return wrapPrune("requests", err)
			}
			res.Removed.Work += work.N
			res.Removed.History += events.N
			res.Removed.Requests += int64(len(ids))
		} else {
			// Two transactions, the work rows first (the requests'
			// foreign key): in one, InnoDB deadlocked the prune against
			// processors. Deleting a request checks the key, taking a
			// shared lock on the next entry of loanq_work's request index,
			// a processor's uncommitted new work row, while the prune held
			// the index entries of the work rows it had deleted, on which
			// that processor's duplicate check of the one-active-row index
			// then waited. Committed first, the work rows are no longer
			// held when the request delete waits. A prune stopped between
			// the two leaves requests without their rows (the audit
			// AuditCountMismatch counts them): the next prune removes them.
			// The work rows' events go in the work rows' transaction,
			// first: an exported event's work row is never missing.
			var work, events, reqs int64
			if err := a.pruneTx(ctx, res, func(tx *sql.Tx) error {
				if events, err = rowsAffected(q.PruneHistory.Exec(ctx, tx, pruneIDsParams{IDs: list, AgeMS: b.AgeMS})); err != nil {
					return err
				}
				work, err = rowsAffected(q.PruneWork.Exec(ctx, tx, pruneIDsParams{IDs: list, AgeMS: b.AgeMS}))
				return err
			}); err != nil {
				return wrapPrune("requests' work rows", err)
			}
			if err := a.pruneTx(ctx, res, func(tx *sql.Tx) error {
				reqs, err = rowsAffected(q.PruneRequests.Exec(ctx, tx, idListParams{IDs: list}))
				return err
			}); err != nil {
				return wrapPrune("requests", err)
			}
			res.Removed.Work += work
			res.Removed.History += events
			res.Removed.Requests += reqs
		}
		res.Batches++
		if err := a.writersTurn(ctx); err != nil {
			return err
		}
	}
}

// pruneRuns removes a task's old criteria-query runs, its latest
// PruneKeepRuns left out.
func (a *Admin) pruneRuns(ctx context.Context, o PruneOptions, b pruneBoundsParams, res *PruneResult) error {
	q := a.pruneSQL()
	lo, hi, err := pruneBounds(q.PruneRunBounds.One(ctx, a.db, pruneBoundsParams{TaskID: b.TaskID, AgeMS: b.AgeMS}))
	if err != nil || hi == 0 {
		return err
	}
	after := lo - 1
	for {
		ids, err := engineio.IDs(q.PruneRunBatch.All(ctx, a.db, pruneBatchParams{
			TaskID: b.TaskID, AgeMS: b.AgeMS, After: after, Upto: hi, Limit: o.Batch}))
		if err != nil || len(ids) == 0 {
			return err
		}
		after = ids[len(ids)-1]
		if o.DryRun {
			res.Removed.QueryRuns += int64(len(ids))
		} else {
			var n int64
			if err := a.pruneTx(ctx, res, func(tx *sql.Tx) error {
				n, err = rowsAffected(q.PruneRuns.Exec(ctx, tx, pruneIDsParams{IDs: idList(ids), AgeMS: b.AgeMS}))
				return err
			}); err != nil {
				return err
			}
			res.Removed.QueryRuns += n
		}
		res.Batches++
		if err := a.writersTurn(ctx); err != nil {
			return err
		}
	}
}

// pruneTx runs one batch's deletes in a transaction of their own. On
// MySQL/MariaDB it is READ COMMITTED, as a rows claim is (RowsTxOptions):
// InnoDB then locks the rows it deletes and no gap beside them, so a
// request being logged or a loan being assigned meanwhile does not wait.
func (a *Admin) pruneTx(ctx context.Context, res *PruneResult, fn func(*sql.Tx) error) error {
	var opts *sql.TxOptions
	if rl, ok := a.driver.(drivers.RowLocker); ok {
		opts = rl.RowsTxOptions()
	}
	start := time.Now()
	tx, err := a.db.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	res.LongestBatchMS = max(res.LongestBatchMS, time.Since(start).Milliseconds())
	return nil
}

// pruneBounds scans the id range a prune walks (0, 0 when there is none).
func pruneBounds(b boundsRow, err error) (lo, hi int64, _ error) {
	return b.Lo.Int64, b.Hi.Int64, err
}

func idList(ids []int64) string {
	b, _ := json.Marshal(ids) // []int64 always marshals
	return string(b)
}

func rowsAffected(r sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

func wrapPrune(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("pruning the %s: %w", what, err)
}

// oneWriterGap is how long a prune leaves between its batches on a database
// with one writer at a time (SQLite): a writer that found the prune's batch
// in the way waits in the database's busy handler, which sleeps up to
// 100 ms between its tries. Without a gap longer than that, the next batch
// begins before the waiter looks again, and a processor's get waited through
// dozens of batches (1.6 s behind batches of 43 ms, TestPruneBesideProcessors).
const oneWriterGap = 110 * time.Millisecond

// writersTurn leaves waiting writers their turn between two batches where
// the database has one writer at a time; elsewhere a batch locks only the
// rows it deletes and the next one begins at once.
func (a *Admin) writersTurn(ctx context.Context) error {
	if a.caps().UserCap != drivers.UserCapOneWriter {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(oneWriterGap):
		return nil
	}
}
