package oracle

import "github.com/loanq/loanq/drivers"

// ParseDSN reads oracle://user:pass@host:port/service (a password may be
// typed as it is, see drivers.ParseURL); the path is the service name.
func (*Driver) ParseDSN(raw string) (drivers.DSN, error) {
	d, err := drivers.ParseURL(raw)
	if err != nil {
		return d, err
	}
	if err := drivers.CheckHostDB(d, "service name", "oracle://user:pass@127.0.0.1:1521/SERVICE"); err != nil {
		return drivers.DSN{}, err
	}
	if _, err := ConnectParams(d); err != nil {
		return drivers.DSN{}, err
	}
	return d, nil
}
