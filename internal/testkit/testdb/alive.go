package testdb

import (
	"context"
	"database/sql"
	"strconv"
	"time"

	"github.com/loanq/loanq/drivers"
)

// AgeRequest sets the last sign of life of request id (alive_at,
// docs/algorithm.md "Abandoned requests") to ago before the database's
// clock: how a test stands for the time a killed caller stays silent
// without waiting for it. It returns the database's error, for a test that
// also runs against a schema without the column. db may be a transaction:
// one that holds the request uncommitted.
func AgeRequest(d drivers.Driver, db interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, id int64, ago time.Duration) error {
	q := `UPDATE loanq_work_request SET alive_at = ` + d.Dialect().NowMinusMillis(strconv.FormatInt(ago.Milliseconds(), 10)) + ` WHERE id = ?`
	_, err := db.ExecContext(context.Background(), Rebind(d, q), id)
	return err
}
