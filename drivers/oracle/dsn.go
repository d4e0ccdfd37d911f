package oracle

import "github.com/loanq/loanq/dsn"

// ParseDSN reads oracle://user:pass@host:port/service (a password may be
// typed as it is, see dsn.ParseURL); the path is the service name.
func (*Driver) ParseDSN(raw string) (dsn.DSN, error) {
	d, err := dsn.ParseURL(raw)
	if err != nil {
		return d, err
	}
	if err := dsn.CheckHostDB(d, "service name", "oracle://user:pass@127.0.0.1:1521/SERVICE"); err != nil {
		return dsn.DSN{}, err
	}
	if _, err := ConnectParams(d); err != nil {
		return dsn.DSN{}, err
	}
	return d, nil
}
