package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/internal/pause"
	"github.com/loanq/loanq/schema"
)

// backoff is the pause after a lock-busy error before the next claim: short
// (a worker that backs off longer than the work takes wastes its lane), with
// jitter so the losers do not return in step.
func backoff() time.Duration { return 5*time.Millisecond + rand.N(10*time.Millisecond) }

// leaseTTL is how long a lease claim holds its items: far longer than the
// work, so that in a healthy run no lease expires; an expired one would be a
// worker that died or stalled.
func leaseTTL(work time.Duration, batch int) time.Duration {
	return time.Minute + 2*work*time.Duration(batch)
}

// worker is one bench worker on its own connection.
type worker struct {
	id    int
	conn  *sql.Conn
	d     drivers.Driver
	c     *Catalogue
	s     drivers.Strategy
	work  time.Duration
	batch int
	start time.Time // the run's start; marks are relative to it
	res   WorkerResult
}

// runLocal runs workers first … first+n-1 as goroutines in this process, each
// on its own connection, taken before the clock starts. ready, if not nil,
// is called once every connection is open and must return when the run may
// start (the child-process handshake).
func runLocal(ctx context.Context, dsn string, s drivers.Strategy, first, n int, work time.Duration, batch int, ready func() error) ([]WorkerResult, time.Duration, error) {
	// Every worker keeps one connection for the whole run: no pool hand-off
	// between claims, and no worker waits for a free connection.
	opened, err := schema.Open(ctx, dsn, schema.Options{Conns: n})
	if err != nil {
		return nil, 0, err
	}
	defer opened.Close()
	d, db := opened.Driver, opened.DB
	c, err := For(d)
	if err != nil {
		return nil, 0, err
	}
	ws := make([]*worker, n)
	for i := range ws {
		conn, err := db.Conn(ctx)
		if err != nil {
			return nil, 0, fmt.Errorf("opening the connection of worker %d: %w", first+i, err)
		}
		defer conn.Close()
		ws[i] = &worker{id: first + i, conn: conn, d: d, c: c, s: s, work: work, batch: batch}
		ws[i].res.Worker = first + i
	}
	if ready != nil {
		if err := ready(); err != nil {
			return nil, 0, err
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, w := range ws {
		w.start = start
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.run(ctx)
			w.res.ElapsedMS = time.Since(start).Milliseconds()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	out := make([]WorkerResult, n)
	for i, w := range ws {
		out[i] = w.res
	}
	if err := errors.Join(errs...); err != nil {
		return out, elapsed, err
	}
	return out, elapsed, nil
}

// run claims and finishes items until none is left.
func (w *worker) run(ctx context.Context) error {
	for {
		var n int
		var err error
		if w.s == drivers.Lease {
			n, err = w.leaseOnce(ctx)
		} else {
			n, err = w.lockOnce(ctx)
		}
		switch {
		case err != nil && w.d.IsLockBusy(err):
			w.res.LockErrors++
			w.res.ErrorsAtMS = append(w.res.ErrorsAtMS, ms(time.Since(w.start)))
			if err := pause.For(ctx, backoff()); err != nil {
				return err
			}
		case err != nil && w.d.IsDeadlock(err):
			// A deadlock victim was rolled back, so nothing it claimed
			// counts: retry like a lock error. (On InnoDB, the catalogue's Begin (READ
			// COMMITTED avoids the gap locks that cause them.)
			w.res.Deadlocks++
			w.res.ErrorsAtMS = append(w.res.ErrorsAtMS, ms(time.Since(w.start)))
			if err := pause.For(ctx, backoff()); err != nil {
				return err
			}
		case err != nil:
			return fmt.Errorf("worker %d: %w", w.id, err)
		case n == 0:
			return nil
		}
	}
}

// lockOnce is one transaction of a row-lock strategy: claim up to batch
// items (the row locks are the claim), work on them while holding the locks,
// finish them and commit, which releases the locks. It returns how many items
// it finished; 0 means none was left to claim.
func (w *worker) lockOnce(ctx context.Context) (int, error) {
	t0 := time.Now()
	tx, err := w.begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback() // after Commit, a no-op; on any error it releases the locks
	ids, err := claimItems(ctx, &w.c.Statements, tx, w.s, "", 0, w.batch)
	if err != nil {
		return 0, err
	}
	t1 := time.Now()
	if len(ids) == 0 {
		// skip: every ready row is locked by another worker, who will finish
		// it (or roll back, and then a worker still running takes it); wait
		// and nowait: no ready row is left.
		return 0, nil
	}
	if err := pause.For(ctx, w.work*time.Duration(len(ids))); err != nil {
		return 0, err
	}
	owner := Owner(w.id)
	if len(ids) == 1 {
		if _, err := w.c.Done.Exec(ctx, tx, itemParams{ID: ids[0], Owner: owner}); err != nil {
			return 0, fmt.Errorf("finishing item %d: %w", ids[0], err)
		}
	} else {
		// One statement for the whole batch: a round trip per item was most
		// of a batched claim's cost.
		res, err := w.c.DoneMany.Exec(ctx, tx, itemsParams{IDs: idList(ids), Owner: owner})
		if err != nil {
			return 0, fmt.Errorf("finishing items %v: %w", ids, err)
		}
		if n, err := res.RowsAffected(); err == nil && n != int64(len(ids)) {
			return 0, fmt.Errorf("finishing items %v changed %d rows, want %d", ids, n, len(ids))
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	w.mark(ids, t0, t1)
	return len(ids), nil
}

// leaseOnce claims up to batch items with a lease in a short transaction of
// its own, works on them with no transaction open, and finishes each with a
// fenced UPDATE. 0 means nothing is left: no ready item, and no expired lease
// to take back.
func (w *worker) leaseOnce(ctx context.Context) (int, error) {
	t0 := time.Now()
	owner := Owner(w.id)
	ids, err := w.leaseClaim(ctx, owner)
	if err != nil {
		return 0, err
	}
	t1 := time.Now()
	if len(ids) == 0 {
		// Another claimer may have taken the rows this UPDATE picked (its
		// subselect locks nothing): ask again while ready items are left.
		left, err := w.c.Ready.One(ctx, w.conn, engineio.NoParams{})
		if err != nil {
			return 0, fmt.Errorf("counting ready items: %w", err)
		}
		if left.N > 0 {
			w.res.Retries++
			return -1, nil
		}
		res, err := w.c.LeaseExpire.Exec(ctx, w.conn, engineio.NoParams{})
		if err != nil {
			return 0, fmt.Errorf("taking back expired leases: %w", err)
		}
		if n, _ := res.RowsAffected(); n > 0 {
			return -1, nil
		}
		return 0, nil
	}
	if err := pause.For(ctx, w.work*time.Duration(len(ids))); err != nil {
		return 0, err
	}
	var finished []int64
	if len(ids) == 1 {
		res, err := w.finishLeased(ctx, func() (sql.Result, error) {
			return w.c.LeaseDone.Exec(ctx, w.conn, itemParams{ID: ids[0], Owner: owner})
		})
		if err != nil {
			return 0, fmt.Errorf("finishing item %d: %w", ids[0], err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			finished = ids
		} else {
			// The lease ran out and someone else may hold the item now: the
			// fence keeps this late finish from counting twice.
			w.res.LeaseLost++
		}
	} else {
		res, err := w.finishLeased(ctx, func() (sql.Result, error) {
			return w.c.LeaseDoneMany.Exec(ctx, w.conn, itemsParams{IDs: idList(ids), Owner: owner})
		})
		if err != nil {
			return 0, fmt.Errorf("finishing items %v: %w", ids, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return 0, fmt.Errorf("finishing items %v: %w", ids, err)
		}
		// Items whose lease was lost were not finished (the fence); the
		// audit reads which ones were from the table.
		w.res.LeaseLost += int64(len(ids)) - n
		finished = ids[:n]
	}
	w.mark(finished, t0, t1)
	return len(ids), nil
}

// finishLeased runs a lease's fenced finish, again while the database
// answers busy (SQLite's one writer, past its busy timeout on a loaded
// machine). The items stay leased to this worker until it finishes them: a
// worker that went on to a new claim instead left them claimed until their
// lease ran out, which for the last items is after every worker has found
// nothing ready and stopped — a "missed" item in the audit (seen once in
// the suite, SQLite, 32 workers, beside other tests).
func (w *worker) finishLeased(ctx context.Context, finish func() (sql.Result, error)) (sql.Result, error) {
	for {
		res, err := finish()
		if err == nil || !w.d.IsLockBusy(err) {
			return res, err
		}
		w.res.LockErrors++
		w.res.ErrorsAtMS = append(w.res.ErrorsAtMS, ms(time.Since(w.start)))
		if err := pause.For(ctx, backoff()); err != nil {
			return nil, err
		}
	}
}

func (w *worker) leaseClaim(ctx context.Context, owner string) ([]int64, error) {
	// On SQLite this BEGIN is BEGIN IMMEDIATE (_txlock=immediate): the write
	// lock is taken before the ready rows are read, so two claimers never
	// pick the same rows and never fail on a read-to-write upgrade.
	tx, err := w.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	ids, err := claimItems(ctx, &w.c.Statements, tx, drivers.Lease, owner, leaseTTL(w.work, w.batch).Milliseconds(), w.batch)
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit of the lease: %w", err)
	}
	return ids, nil
}

// begin starts a claim transaction on the worker's connection, after the
// catalogue's Begin (MySQL: READ COMMITTED for this transaction).
func (w *worker) begin(ctx context.Context) (*sql.Tx, error) {
	if !w.c.Begin.Empty() {
		if _, err := w.c.Begin.Exec(ctx, w.conn, engineio.NoParams{}); err != nil {
			return nil, fmt.Errorf("before begin: %w", err)
		}
	}
	tx, err := w.conn.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	return tx, nil
}

func (w *worker) mark(ids []int64, t0, t1 time.Time) {
	if len(ids) == 0 {
		return
	}
	w.res.Claims++
	w.res.Marks = append(w.res.Marks, Mark{Items: ids,
		StartMS: ms(t0.Sub(w.start)), ClaimedMS: ms(t1.Sub(w.start)), EndMS: ms(time.Since(w.start))})
}

// idList is the JSON array text DoneMany and LeaseDoneMany bind.
func idList(ids []int64) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(id, 10))
	}
	b.WriteByte(']')
	return b.String()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
