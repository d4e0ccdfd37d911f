package drivers

import (
	"errors"
	"net"
)

// Unreached says that err is a failure to open a connection to the server
// (the dial was refused, timed out or found no route), so the statement that
// got it was never sent and changed nothing.
//
// database/sql sends a statement on a pooled connection and, when the driver
// reports driver.ErrBadConn (a connection found dead before anything was
// written), on a new one; the error that comes back is the last attempt's.
// A dial error there means no attempt reached the server. A connection lost
// after the statement was written reports something else (an EOF, a reset),
// and then the statement may have been applied: callers must not say
// "nothing was recorded" for those.
func Unreached(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
