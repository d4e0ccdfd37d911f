//go:build !cgo

package oracle

import (
	"context"
	"database/sql"

	"github.com/loanq/loanq/dsn"
	"github.com/loanq/loanq/problem"
)

// unsupported: see open below.
const unsupported = "built without cgo (CGO_ENABLED=0); rebuild with CGO_ENABLED=1 for Oracle"

// open: godror is a cgo package (it calls the Oracle Client library through
// ODPI-C), so a binary built with CGO_ENABLED=0 cannot reach Oracle at all.
// Everything else of this driver (its SQL, `loanq sql --dialect oracle`) is
// still there; only connecting needs the rebuild.
func open(_ context.Context, target dsn.DSN) (*sql.DB, error) {
	return nil, problem.WithHint(
		problem.Usagef("cannot connect to %s: this loanq binary was built without cgo (CGO_ENABLED=0), and the Oracle driver (godror) needs cgo", target.Redacted()),
		"rebuild with `CGO_ENABLED=1 go build` on a machine with a C compiler, and install Oracle Instant Client Basic where loanq runs (LD_LIBRARY_PATH or ldconfig)")
}
