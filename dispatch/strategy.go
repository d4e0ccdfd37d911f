package dispatch

import (
	"context"
	"database/sql"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/problem"
)

// A lock strategy is a server: how a new get may be served before its
// request is logged, how a serving round runs, how a caller whose request
// is still pending waits for its turn, and why it is still pending. One is
// chosen per call (serverFor) from the task's strategy, the call's --lock
// and the task's candidate pool; Get and Status then ask it, never the
// strategy's name (docs/algorithm.md, "Step by step").
//
//	rowLockServer  skip, nowait, wait: a round under the task's row lock (round.go)
//	leaseServer    lease: a round under the task's lease (lease.go)
//	rowsServer     rows: each caller claims loan rows itself (rows.go)
//	poolServer     a task with --prefetch: its pool first, then the strategy it wraps (pool.go)
//
// Adding a strategy: a server here, its rounds or claims in a file of its
// own, its statements in drivers (ARCHITECTURE.md, "Adding a strategy").
type server interface {
	// strategy is the name `loanq_query_run.strategy` and explain record.
	strategy() drivers.Strategy
	// fresh serves a new get before any request is logged, in one commit,
	// or returns nil and no error when the request must be logged first.
	fresh(ctx context.Context, task *Task, user string, count int) (*Request, error)
	// serve serves the task's pending requests, own's among them, once:
	// a Busy error when someone else is serving them.
	serve(ctx context.Context, task *Task, own *ownRequest, lockDeadline time.Time) error
	// await waits at most bound for own to be served (served true) or for
	// this caller's turn to serve; only a cancelled ctx or a failing
	// database is an error.
	await(ctx context.Context, task *Task, own *ownRequest, bound time.Duration) (served bool, err error)
	// pendingWhy says why a request is still pending after a busy answer.
	pendingWhy() string

	// What `loanq explain` shows of the strategy (explain.go): the options
	// of the probe's claim transaction, its claim of count in tx (which
	// the probe rolls back), and the text to plan for a statement.
	probeTxOptions() *sql.TxOptions
	probeClaim(ctx context.Context, tx *sql.Tx, task *Task, count int) (claimed int, note string, err error)
	planSQL(task *Task, text string) string
	// queueing says how callers meet on the task, for explain's verdict:
	// "" when a claim locks the loan rows it takes, and callers meet only
	// there (the verdict then weighs how many rows a claim locks).
	queueing() string
	// perUser reports whether one claim serves one user, so that a rule of
	// the user's (four eyes) is in the claim's criteria; otherwise a round
	// shares one criteria query out among its requesters.
	perUser() bool
}

// serverFor chooses the server of one call: the task's strategy or the
// call's override, wrapped by the task's pool when it has one.
func (e *Engine) serverFor(t *Task, override drivers.Strategy) (server, error) {
	if err := e.runnable(t); err != nil {
		return nil, err
	}
	s := t.Lock
	if override != "" {
		s = override
	}
	srv, err := e.serverOf(s)
	if err != nil {
		return nil, err
	}
	if t.Prefetch > 0 {
		srv = poolServer{e, srv}
	}
	return srv, nil
}

// serverOf is the server of strategy s, refused where the database has
// no such strategy.
func (e *Engine) serverOf(s drivers.Strategy) (server, error) {
	if !drivers.Supports(e.driver, s) {
		return nil, problem.Usagef("lock strategy %q is not available on %s: use one of %s", s, e.driver.Name(), strategyList(e.driver))
	}
	switch s {
	case drivers.Rows:
		return rowsServer{e}, nil
	case drivers.Lease:
		return leaseServer{e}, nil
	default:
		return rowLockServer{e, s}, nil
	}
}

// rowLockServer: skip, nowait and wait, rounds under the task's row lock.
type rowLockServer struct {
	e    *Engine
	lock drivers.Strategy
}

func (s rowLockServer) strategy() drivers.Strategy { return s.lock }

func (rowLockServer) fresh(context.Context, *Task, string, int) (*Request, error) { return nil, nil }

func (s rowLockServer) serve(ctx context.Context, task *Task, own *ownRequest, lockDeadline time.Time) error {
	return s.e.serveRounds(ctx, task, func() error { return s.e.serveRoundRowLock(ctx, task, s.lock, lockDeadline, own) })
}

// await queues on the task row where the database lets a wait be bounded,
// else polls the request (wake.go).
func (s rowLockServer) await(ctx context.Context, task *Task, own *ownRequest, bound time.Duration) (bool, error) {
	if s.e.caps().Wait == drivers.WaitPoll {
		return s.e.pollRequest(ctx, task, own.id, bound)
	}
	return s.e.awaitLock(ctx, task, s.lock, own, bound)
}

func (rowLockServer) pendingWhy() string { return "another caller holds the task lock" }

func (rowLockServer) probeTxOptions() *sql.TxOptions { return nil }

func (s rowLockServer) probeClaim(ctx context.Context, tx *sql.Tx, task *Task, count int) (int, string, error) {
	return s.e.probeCriteria(ctx, tx, task, count, true)
}

func (rowLockServer) planSQL(_ *Task, text string) string { return text }

func (rowLockServer) queueing() string {
	return "callers queue on the task's row lock and its holder serves their requests together"
}

func (rowLockServer) perUser() bool { return false }

// leaseServer: rounds under the task's lease, no transaction open while
// the criteria query runs; there is no lock to queue on, so a waiter polls.
type leaseServer struct{ e *Engine }

func (leaseServer) strategy() drivers.Strategy { return drivers.Lease }

func (leaseServer) queueing() string {
	return "callers take the task's lease in turn and its holder serves their requests together"
}

func (leaseServer) perUser() bool { return false }

func (leaseServer) fresh(context.Context, *Task, string, int) (*Request, error) { return nil, nil }

func (s leaseServer) serve(ctx context.Context, task *Task, own *ownRequest, _ time.Time) error {
	return s.e.serveRounds(ctx, task, func() error { return s.e.serveRoundLease(ctx, task, own) })
}

func (s leaseServer) await(ctx context.Context, task *Task, own *ownRequest, bound time.Duration) (bool, error) {
	return s.e.pollRequest(ctx, task, own.id, bound)
}

func (leaseServer) pendingWhy() string { return "another caller holds the task lock" }

func (leaseServer) probeTxOptions() *sql.TxOptions { return nil }

// probeClaim: the lease is a row update, not a lock held while the query
// runs: the probe runs the criteria query alone.
func (s leaseServer) probeClaim(ctx context.Context, tx *sql.Tx, task *Task, count int) (int, string, error) {
	return s.e.probeCriteria(ctx, tx, task, count, false)
}

func (leaseServer) planSQL(_ *Task, text string) string { return text }

// rowsServer: no task lock; each caller claims loan rows itself, and a
// waiter waits for a loan row another claimer holds (rowswait.go).
type rowsServer struct{ e *Engine }

func (rowsServer) strategy() drivers.Strategy { return drivers.Rows }

func (rowsServer) queueing() string { return "" }

func (rowsServer) perUser() bool { return true }

func (s rowsServer) fresh(ctx context.Context, task *Task, user string, count int) (*Request, error) {
	req, err := s.e.serveRowsFresh(ctx, task, user, count)
	return req, s.e.claimFailed(ctx, task, err, "claiming loans of")
}

func (s rowsServer) serve(ctx context.Context, task *Task, own *ownRequest, _ time.Time) error {
	return s.e.serveRows(ctx, task, own)
}

func (s rowsServer) await(ctx context.Context, task *Task, own *ownRequest, bound time.Duration) (bool, error) {
	return s.e.awaitRows(ctx, task, own.user, bound)
}

func (rowsServer) pendingWhy() string {
	return "other callers hold eligible loans (rows strategy): it is not served until they let go of them"
}

// The rows strategy is offered only by RowLocker drivers (Capabilities).
func (s rowsServer) rowLocker() drivers.RowLocker { return s.e.driver.(drivers.RowLocker) }

func (s rowsServer) probeTxOptions() *sql.TxOptions { return s.rowLocker().RowsTxOptions() }

// probeClaim locks count loan rows as a rows claim does.
func (s rowsServer) probeClaim(ctx context.Context, tx *sql.Tx, task *Task, count int) (int, string, error) {
	keys, err := s.rowLocker().LockRows(ctx, tx, task.criteria(), task.ID, count)
	return len(keys), "", err
}

// planSQL: a driver that sends the rows claim through a procedure (Oracle)
// has it planned as its cursor.
func (s rowsServer) planSQL(task *Task, text string) string {
	if cp, ok := s.e.driver.(drivers.ClaimPlanner); ok {
		return cp.RowsPlanSQL(task.criteria())
	}
	return text
}

// poolServer: a task with a candidate pool serves a new get from it when it
// can (one short transaction, no criteria query); otherwise, and for every
// logged request, the strategy it wraps serves.
type poolServer struct {
	e *Engine
	server
}

func (s poolServer) fresh(ctx context.Context, task *Task, user string, count int) (*Request, error) {
	if req, err := s.e.servePool(ctx, task, user, count); err != nil || req != nil {
		return req, s.e.claimFailed(ctx, task, err, "claiming from the pool of")
	}
	if s.server.strategy() == drivers.Rows {
		// Claims of a rows task never run the criteria query for the pool:
		// refill it once this get is done, if it ran low.
		defer s.e.refillIfLow(context.WithoutCancel(ctx), task)
	}
	return s.server.fresh(ctx, task, user, count)
}
