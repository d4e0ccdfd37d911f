package postgres

import (
	"context"
	"database/sql/driver"
	"errors"
	"maps"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// connector opens loanq's PostgreSQL connections so that a plain DSN works
// both on the server itself and behind a connection pooler in transaction
// pooling mode (PgBouncer; docs/postgres.md, "Behind PgBouncer"):
//
//   - Startup parameters. loanq asks the server for TCP keepalives
//     (tcp_keepalives_*) in the startup packet. A pooler refuses startup
//     parameters it does not track (PgBouncer: "unsupported startup
//     parameter", SQLSTATE 08P01). When one of loanq's own is refused, the
//     connector connects again without them and stops sending them for the
//     rest of the pool's life: they would only reach the pooler's server
//     connections, which the pooler configures itself. A parameter the DSN
//     itself names is never dropped; its refusal is the user's error
//     (classifyConnectError explains it).
//   - Statements. pgx's default (cache_statement) prepares every statement
//     under a name (stmtcache_…) on the connection and reuses the server's
//     plan. Behind a transaction pooler the next statement may run on another
//     server connection, which lacks it or already has it from another client
//     ("prepared statement … already exists", 42P05). So the first connection
//     of the pool asks which it reached (behindPooler): the server itself
//     keeps pgx's default; behind a pooler every connection of the pool uses
//     pgx's describe cache (pooledMode), which leaves nothing named on a
//     server connection. A DSN that names default_query_exec_mode is taken as
//     it is, and nothing is asked.
type connector struct {
	base   driver.Connector
	added  []string    // startup parameters loanq added, not the DSN's
	plain  atomic.Bool // a server refused one of them: stop sending them
	detect bool        // the DSN leaves the exec mode to loanq
	route  atomic.Int32
	driver driver.Driver
}

// What the pool's connections reach, as far as known.
const (
	routeUnknown int32 = iota
	routeDirect
	routePooled
)

// pooledMode is the exec mode behind a pooler: the describe cache. The
// first run of a statement on a connection asks for its parameter and
// result types with the unnamed statement (one round trip); later runs
// send it parsed, bound and executed in one message sequence, one round
// trip, which a transaction pooler keeps on one server connection. The
// server parses and plans it on every run (docs/postgres.md says what that
// costs).
const pooledMode = pgx.QueryExecModeCacheDescribe

func newConnector(cfg *pgx.ConnConfig, added []string, detect bool) *connector {
	c := &connector{added: added, detect: detect}
	c.base = stdlib.GetConnector(*cfg, stdlib.OptionBeforeConnect(c.beforeConnect), stdlib.OptionShouldPing(shouldPing))
	c.driver = c.base.Driver()
	return c
}

// openedKey is where a connection keeps the time it was opened (in pgconn's
// CustomData).
const openedKey = "loanq.opened"

// shouldPing is pgx's rule for checking a pooled connection before it is
// used again, ping after more than a second idle, with the idle time
// counted from the connection's opening too. pgx counts it from the last
// reuse only, which a new connection has never had: it would ping every
// connection at its first reuse, a round trip that each loanq command
// (a process, with a new connection) paid right after the connection's
// start-up had shown it alive.
func shouldPing(_ context.Context, p stdlib.ShouldPingParams) bool {
	idle := p.IdleDuration
	if opened, ok := p.Conn.PgConn().CustomData()[openedKey].(time.Time); ok {
		idle = min(idle, time.Since(opened))
	}
	return idle > time.Second
}

// markOpened records when conn was opened (shouldPing).
func markOpened(conn driver.Conn) {
	if sc, ok := conn.(*stdlib.Conn); ok {
		sc.Conn().PgConn().CustomData()[openedKey] = time.Now()
	}
}

// beforeConnect adapts each new connection's configuration (a shallow copy:
// its map is copied, not edited) to what earlier connections found.
func (c *connector) beforeConnect(_ context.Context, cfg *pgx.ConnConfig) error {
	if c.plain.Load() {
		params := maps.Clone(cfg.RuntimeParams)
		for _, k := range c.added {
			delete(params, k)
		}
		cfg.RuntimeParams = params
	}
	if c.detect && c.route.Load() == routePooled {
		cfg.DefaultQueryExecMode = pooledMode
	}
	return nil
}

func (c *connector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.connect(ctx)
	if err != nil || !c.detect || c.route.Load() != routeUnknown {
		return conn, err
	}
	// The first connection of a pool that detects: is a pooler in the way?
	pooled, err := behindPooler(ctx, conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if !pooled {
		c.route.CompareAndSwap(routeUnknown, routeDirect)
		return conn, nil
	}
	// This connection was opened with pgx's default exec mode: open the
	// pool's first one again, in the pooler's.
	c.route.Store(routePooled)
	conn.Close()
	return c.connect(ctx)
}

// connect opens one connection, again without loanq's own startup
// parameters when a pooler refuses them.
func (c *connector) connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.base.Connect(ctx)
	if err != nil && !c.plain.Load() && refusedParameter(err, c.added) != "" {
		c.plain.Store(true)
		conn, err = c.base.Connect(ctx)
	}
	if err == nil {
		markOpened(conn)
	}
	return conn, err
}

func (c *connector) Driver() driver.Driver { return c.driver }

// behindPooler tells a connection to a pooler from one to the server. The
// server's startup reply carries the process id of the session's backend
// (BackendKeyData), which cancel requests name; a pooler that shares server
// connections between clients answers with a key of its own (PgBouncer:
// random bytes), since it must route the cancel itself. So the process id
// the connection was given equals pg_backend_pid() on the server itself, and
// not behind a pooler. A plain TCP proxy or tunnel forwards the server's
// reply, and is rightly taken for the server. The query goes by the simple
// protocol: nothing is prepared before the exec mode is known.
func behindPooler(ctx context.Context, conn driver.Conn) (bool, error) {
	sc, ok := conn.(*stdlib.Conn)
	if !ok {
		return false, nil
	}
	pc := sc.Conn()
	var pid int64
	if err := pc.QueryRow(ctx, "SELECT pg_backend_pid()", pgx.QueryExecModeSimpleProtocol).Scan(&pid); err != nil {
		return false, err
	}
	return pid != int64(pc.PgConn().PID()), nil
}

// refusedParameter returns the startup parameter among names that the
// server refused, or "". PgBouncer answers an untracked one with FATAL
// 08P01 "unsupported startup parameter: NAME" (and, in an options=-c…
// parameter, "unsupported options startup parameter: …").
func refusedParameter(err error, names []string) string {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "08P01" {
		return ""
	}
	const marker = "startup parameter: "
	i := strings.Index(pe.Message, marker)
	if i < 0 {
		return ""
	}
	name := strings.TrimSpace(pe.Message[i+len(marker):])
	if names == nil {
		return name
	}
	for _, n := range names {
		if strings.EqualFold(n, name) {
			return name
		}
	}
	return ""
}
