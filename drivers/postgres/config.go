package postgres

import (
	"net"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/problem"
)

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

func pgconnParse(dsn drivers.DSN) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(dsn.Raw)
	if err != nil {
		// pgx's parse errors can quote the whole DSN: never show them raw.
		return nil, problem.Usagef("malformed PostgreSQL DSN %s: %s", dsn.Redacted(), dsn.Scrub(err.Error()))
	}
	if _, ok := cfg.RuntimeParams["application_name"]; !ok {
		cfg.RuntimeParams["application_name"] = "loanq"
	}
	for k, v := range serverKeepAlives {
		if _, ok := cfg.RuntimeParams[k]; !ok {
			cfg.RuntimeParams[k] = v
		}
	}
	dialer := &net.Dialer{
		Timeout: cfg.ConnectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{Enable: true,
			Idle: keepAliveIdle, Interval: keepAliveInterval, Count: keepAliveCount},
	}
	cfg.DialFunc = dialer.DialContext
	return cfg, nil
}
