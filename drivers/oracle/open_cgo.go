//go:build cgo

package oracle

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/godror/godror"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/dsn"
	"github.com/loanq/loanq/problem"
)

// unsupported: this build has godror; connecting needs only Instant Client.
const unsupported = ""

// OraCode matches godror's error by its Code method; keep that true.
var _ interface{ Code() int } = (*godror.OraErr)(nil)

// open connects through godror. godror loads the Oracle Client library
// (libclntsh) lazily, on the first connection, so a missing Instant Client
// shows up here, at Ping, as DPI-1047, not at start-up.
func open(ctx context.Context, target dsn.DSN) (*sql.DB, error) {
	P, err := ConnectParams(target)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(godror.NewConnector(P))
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, classifyConnectError(target, err)
	}
	return db, nil
}

// InstantClientHint is the advice given with DPI-1047.
const InstantClientHint = "install Oracle Instant Client Basic or Basic Light (19c or later) for this machine's architecture " +
	"and make libclntsh findable: add its directory to LD_LIBRARY_PATH, or register it with ldconfig " +
	"(e.g. echo /opt/oracle/instantclient_23_7 > /etc/ld.so.conf.d/oracle.conf && ldconfig); " +
	"see https://oracle.github.io/odpi/doc/installation.html"

func classifyConnectError(target dsn.DSN, err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "DPI-1047"): // Cannot locate a 64-bit Oracle Client library
		// godror reports ODPI-C's own errors as an OraErr with code 0, printed
		// "ORA-00000: DPI-1047: …"; the ORA-00000 says nothing, drop it.
		if i := strings.Index(msg, "DPI-1047"); i > 0 {
			err = errors.New(msg[i:])
		}
		return drivers.ConnectError(problem.Failure, target, err, InstantClientHint)
	}
	switch OraCode(err) {
	case 1017, 28000: // invalid username/password; account locked
		return drivers.ConnectError(problem.Usage, target, err, "check the user name and password in --db / LOANQ_DB")
	case 12514: // listener does not currently know of service requested
		return drivers.ConnectError(problem.Usage, target, err, "check the service name in --db / LOANQ_DB (lsnrctl services lists them)")
	}
	return drivers.ConnectError(problem.Failure, target, err, "is the Oracle listener running and reachable? check host, port and service in --db / LOANQ_DB")
}
