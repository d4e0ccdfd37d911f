package dispatch

import (
	"context"
	"database/sql"
	"fmt"
	"github.com/loanq/loanq/loankey"
	"slices"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
)

// A round hands out only what is eligible when it assigns
// (docs/algorithm.md, "What a round may hand out").
//
// A round's criteria query reads a snapshot taken when the query began, and
// a heavy query runs for seconds. Callers that do not take the task lock —
// pool claims (pool.go), rows claims (rows.go), a caller given another
// --lock — assign loans of the same task meanwhile, and a processor may work
// and dispose of such a loan before the round's query ends. The snapshot
// still lists that loan; it is no longer active, so neither the
// one-active-row index nor a read of the active work (takePool) stops the
// round from assigning it a second time: a loan worked twice, sequentially
// (docs/algorithm.md, "What a round may hand out"). The round therefore runs the criteria query again over the
// keys it is about to assign, by key, with a snapshot of its own taken now:
// what no longer matches, is active, was set to never or returned with a
// future time is dropped.

// recheckCandidates splits the round's candidates (criteria order, less
// what pool claims hold) into those checked and still eligible, in order,
// and an unchecked tail. It checks no more than the round can assign (need:
// what the pending requests ask for), so a pool task's refill does not pay
// a recheck of its whole pool; the tail only refills the pool, whose claims
// recheck every candidate themselves (CriteriaClaim). dropped tells whether
// any candidate had become ineligible since the query's snapshot.
//
// It reads in the round's transaction, which sees the round's own writes —
// work returned under the lock by --max-hold (expire) is eligible again in
// this very round — and, as a statement of its own, every commit before
// it: PostgreSQL and Oracle read at READ COMMITTED, SQLite's round holds
// the single writer's lock, and on InnoDB every round runs at READ
// COMMITTED (roundTxOptions). A claim that commits after this read held its
// pool row when the round took the pool (takePool leaves it out), or holds
// the loan's source row (lockSourceRows).
func (e *Engine) recheckCandidates(ctx context.Context, tx *sql.Tx, task *Task, loans []string, need int) (checked, unchecked []string, dropped bool, err error) {
	rest := loans
	for len(rest) > 0 && len(checked) < need {
		batch := rest[:min(len(rest), need-len(checked))]
		rest = rest[len(batch):]
		locked, err := e.lockSourceRows(ctx, tx, task, batch)
		if err != nil {
			return nil, nil, false, err
		}
		still := make(map[string]bool, len(locked))
		for _, run := range keyChunks(task.KeyKind, locked) {
			keys, err := drivers.ScanKeys(drivers.CriteriaRecheck(e.driver.Dialect(), task.criteria()).Query(ctx, tx,
				engineio.RecheckParams{TaskID: task.ID, IDs: loankey.JSON(task.KeyKind, run)}))
			if err != nil {
				return nil, nil, false, fmt.Errorf("checking the candidates of task %s again before assigning them: %w", task.Name, err)
			}
			for _, k := range keys {
				still[k] = true
			}
		}
		for _, loan := range batch {
			if still[loan] {
				checked = append(checked, loan)
			} else {
				dropped = true // ineligible now, or held by a rows claim
			}
		}
	}
	return checked, rest, dropped, nil
}

// requestedTotal is how many loans the pending requests ask for together:
// the most a round can assign.
func requestedTotal(pending []pendingRequest) int {
	n := 0
	for _, r := range pending {
		n += r.requested
	}
	return n
}

// lockSourceRows takes, on a rows task, the source row locks of the keys in
// tx (drivers.LockSourceKeys), passing over those a rows claim holds, and
// returns the keys locked, in order. Rows claims lock the rows they assign
// and do not take the task lock; a pool claim or a round that assigned
// without these locks could be stalled between its snapshot and its insert
// (an InnoDB insert waits for the table's AUTO-INC lock) while a rows claim
// assigned one of its loans and the processor disposed of it. Once the
// source row is locked, nobody else can assign the loan until this commit,
// and the recheck or claim statement that follows sees every commit before
// the lock. On a task of any other strategy nobody locks source rows, and
// its criteria may not be lockable (a view, an aggregate): keys unchanged.
func (e *Engine) lockSourceRows(ctx context.Context, tx *sql.Tx, task *Task, keys []string) ([]string, error) {
	if task.Lock != drivers.Rows || len(keys) == 0 {
		return keys, nil
	}
	locked := make(map[string]bool, len(keys))
	for _, run := range keyChunks(task.KeyKind, keys) {
		got, err := drivers.ScanKeys(drivers.LockSourceKeys(e.driver.Dialect(), task.criteria()).Query(ctx, tx,
			engineio.RecheckParams{TaskID: task.ID, IDs: loankey.JSON(task.KeyKind, run)}))
		if err != nil {
			return nil, fmt.Errorf("locking the source rows of task %s's candidates: %w", task.Name, err)
		}
		for _, k := range got {
			locked[k] = true
		}
	}
	return slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return !locked[k] }), nil
}
