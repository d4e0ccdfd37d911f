package postgres

import (
	"github.com/jackc/pgx/v5"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/problem"
)

func pgconnParse(dsn drivers.DSN) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(dsn.Raw)
	if err != nil {
		// pgx's parse errors can quote the whole DSN: never show them raw.
		return nil, problem.Usagef("malformed PostgreSQL DSN %s: %s", dsn.Redacted(), dsn.Scrub(err.Error()))
	}
	if _, ok := cfg.RuntimeParams["application_name"]; !ok {
		cfg.RuntimeParams["application_name"] = "loanq"
	}
	return cfg, nil
}
