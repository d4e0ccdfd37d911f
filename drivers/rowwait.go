package drivers

import (
	"context"
	"github.com/loanq/loanq/loankey"
	"strconv"
	"strings"
)

// RowWaiter is implemented by RowLocker drivers: how a rows caller that
// found eligible loans held by other claimers waits for one of them to be
// let go of (dispatch: awaitRows). The statement is a locking read of one
// source row by its key, queued (not skipping), in share mode where the
// database has one so that every waiter is granted at the holder's commit
// at once; bounded like LockWaitBounded (WaitLockSet before it where the
// dialect bounds the wait with a setting, {wait_s} in the text where it
// bounds it in the statement). It binds the key.
type RowWaiter interface {
	RowWaitSQL(src CriteriaSource) string
}

// RowWait returns d's RowWaitSQL for src with its bound in whole seconds,
// or "" when d has none.
func RowWait(d Driver, src CriteriaSource, seconds int) string {
	rw, ok := d.(RowWaiter)
	if !ok {
		return ""
	}
	return strings.ReplaceAll(rw.RowWaitSQL(src), "{wait_s}", strconv.Itoa(seconds))
}

// WaitForRow queues on the source row with key (RowWait, bounded by
// seconds where the dialect writes the bound in the statement; the caller
// sets WaitLockSet before where it does not). It returns the error of the
// locking read: nil when granted, sql.ErrNoRows when the row is gone,
// d.IsLockBusy when the bound passed. The key is bound in the column's own
// type (KeyArg), so that the lookup is served by its index.
func WaitForRow(ctx context.Context, d Driver, q Querier, src CriteriaSource, key string, seconds int) error {
	text := RowWait(d, src, seconds)
	if text == "" {
		return nil
	}
	var got any
	return q.QueryRowContext(ctx, text, loankey.Arg(src.Kind, key)).Scan(&got)
}
