package dispatch

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
)

// The bounded wait (docs/algorithm.md, "Waiting"), written once for both
// waits that use it: a waiter of a row-lock strategy queues on the task row
// (awaitLock, wake.go), a rows caller on a loan row another claimer holds
// (awaitRows, rowswait.go). Either way the database grants the lock the
// moment the holder commits or dies, and the wait must be bounded by the
// database, not only by a context: a cancelled statement may leave the
// lock request queued on the server.
//
// Where the bound is a session setting (MySQL's innodb_lock_wait_timeout),
// the wait runs on a connection of its own, and the setting is put back on
// that very connection before the pool hands it out again; a connection
// whose setting could not be put back is dropped instead.

type waitConn struct {
	e     *Engine
	conn  *sql.Conn
	saved any // the session's own lock wait limit (BoundSessionSetting)
}

// openWaitConn takes a connection for a bounded wait and reads the lock
// wait limit it must get back.
func (e *Engine) openWaitConn(ctx context.Context) (*waitConn, error) {
	conn, err := e.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	w := &waitConn{e: e, conn: conn}
	if e.caps().WaitBound == drivers.BoundSessionSetting {
		if err := e.saveLockWait(ctx, conn, &w.saved); err != nil {
			conn.Close()
			return nil, fmt.Errorf("reading the session lock wait limit: %w", err)
		}
	}
	return w, nil
}

// close puts the session's lock wait limit back and returns the connection.
func (w *waitConn) close(ctx context.Context) {
	if w.e.caps().WaitBound == drivers.BoundSessionSetting {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := w.e.sql().WaitLockRestore.Exec(rctx, w.conn, engineio.SettingParams{Value: w.saved}); err != nil {
			// Never hand a connection with a changed lock wait limit back
			// to the pool: make database/sql close it instead.
			_ = w.conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}
	w.conn.Close()
}

// queue bounds tx's lock wait to bound (WaitLockSet, where the bound is a
// setting) and runs lock, the locking read. It returns true when the lock
// was granted, false and no error when the bound passed first or the row
// is gone.
func (w *waitConn) queue(ctx context.Context, tx *sql.Tx, bound time.Duration, lock func(context.Context) error) (bool, error) {
	if w.e.caps().WaitBound.IsSetting() {
		if _, err := w.e.sql().WaitLockSet.Exec(ctx, tx, engineio.MillisParams{MS: bound.Milliseconds()}); err != nil {
			return false, fmt.Errorf("bounding the lock wait: %w", err)
		}
	}
	// The database bounds the wait; the context is only a safety net in case
	// it does not (a limit rounded up to whole seconds, a lost setting).
	lockCtx, cancel := context.WithTimeout(ctx, time.Duration(boundSeconds(bound))*time.Second+2*time.Second)
	defer cancel()
	err := lock(lockCtx)
	switch {
	case err == nil:
		return true, nil
	case w.e.driver.IsLockBusy(err), errors.Is(err, sql.ErrNoRows):
		return false, nil // the bound passed, or the row is gone: look again
	case lockCtx.Err() != nil && ctx.Err() == nil:
		return false, nil
	case ctx.Err() != nil:
		return false, ctx.Err()
	default:
		return false, err
	}
}

// unbound puts the session's own lock wait limit back inside tx: a waiter
// granted the lock serves next, and its statements wait as long as the
// session normally allows.
func (w *waitConn) unbound(ctx context.Context, tx *sql.Tx) error {
	if !w.e.caps().WaitBound.IsSetting() {
		return nil
	}
	if _, err := w.e.sql().WaitLockRestore.Exec(ctx, tx, engineio.SettingParams{Value: w.saved}); err != nil {
		return fmt.Errorf("restoring the session lock wait limit: %w", err)
	}
	return nil
}

// boundSeconds is a wait bound in whole seconds, rounded up, at least 1.
func boundSeconds(bound time.Duration) int {
	return max(1, int((bound+time.Second-1)/time.Second))
}
