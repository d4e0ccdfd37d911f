package postgres

import (
	"net"
	"net/url"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loanq/loanq/dsn"
	"github.com/loanq/loanq/problem"
)

// ParseDSN reads postgres:// and postgresql:// URLs (a password may be typed
// as it is, see dsn.ParseURL). The host may instead be given as ?host=
// (a Unix socket folder, as libpq allows). The DSN is checked by building
// pgx's configuration, so a malformed option is bad input before connecting.
func (*Driver) ParseDSN(raw string) (dsn.DSN, error) {
	d, err := dsn.ParseURL(raw)
	if err != nil {
		return d, err
	}
	if d.Host == "" && d.Query.Get("host") == "" {
		return dsn.DSN{}, problem.Usagef("malformed PostgreSQL DSN %s: no host (e.g. %s://user@127.0.0.1:5432/db)", d.Redacted(), d.Scheme)
	}
	if _, _, err := pgconnParse(d); err != nil {
		return dsn.DSN{}, err
	}
	return d, nil
}

// pgconnParse builds pgx's configuration. pgx is handed a URL without the
// password, so none of its parse errors can quote it; the password is set on
// the parsed configuration. added lists the startup parameters loanq put in
// (those the DSN does not set itself), which the connector drops when a
// pooler refuses them.
func pgconnParse(target dsn.DSN) (cfg *pgx.ConnConfig, added []string, err error) {
	u := url.URL{Scheme: "postgres", Host: target.Host, Path: "/" + target.Database, RawQuery: target.Query.Encode()}
	if target.User != "" {
		u.User = url.User(target.User)
	}
	cfg, err = pgx.ParseConfig(u.String())
	if err != nil {
		return nil, nil, problem.Usagef("malformed PostgreSQL DSN %s: %s", target.Redacted(), target.Scrub(err.Error()))
	}
	if target.Password != "" {
		cfg.Password = target.Password
	}
	// application_name is one of the few startup parameters PgBouncer
	// tracks (and sets on whichever server connection serves the client), so
	// it stays in every startup packet.
	if _, ok := cfg.RuntimeParams["application_name"]; !ok {
		cfg.RuntimeParams["application_name"] = "loanq"
	}
	for k, v := range serverKeepAlives {
		if _, ok := cfg.RuntimeParams[k]; !ok {
			cfg.RuntimeParams[k] = v
			added = append(added, k)
		}
	}
	sort.Strings(added)
	dialer := &net.Dialer{
		Timeout: cfg.ConnectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{Enable: true,
			Idle: keepAliveIdle, Interval: keepAliveInterval, Count: keepAliveCount},
	}
	cfg.DialFunc = dialer.DialContext
	return cfg, added, nil
}

// TCP keepalive on both ends of the connection, so that a peer that vanished
// without a FIN (power loss, a cut network) is noticed in about a minute
// instead of the kernel default of two hours: the client's dialer probes the
// server, and the server-side tcp_keepalives_* settings make the backend
// probe its client and end the session (rolling back, freeing the task lock).
// A DSN that sets tcp_keepalives_* itself keeps its own values.
const (
	keepAliveIdle     = 30 * time.Second
	keepAliveInterval = 10 * time.Second
	keepAliveCount    = 3
)

var serverKeepAlives = map[string]string{
	"tcp_keepalives_idle":     "30",
	"tcp_keepalives_interval": "10",
	"tcp_keepalives_count":    "3",
}
