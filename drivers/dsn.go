package drivers

import (
	"sort"
	"strings"

	"github.com/loanq/loanq/dsn"
	"github.com/loanq/loanq/problem"
)

// ParseDSN picks the driver registered for the DSN's scheme and lets it
// parse the DSN: each driver knows its own forms and aliases (docs of the
// forms: README.md, "Connecting"). It returns the driver with the DSN it
// parsed. An empty DSN is dsn.Default.
func ParseDSN(raw string) (Driver, dsn.DSN, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		raw = dsn.Default
	}
	scheme, ok := dsn.SchemeOf(raw)
	if ok {
		if d, err := Lookup(scheme); err == nil {
			return parseWith(d, raw)
		}
	}
	if !strings.Contains(raw, "://") {
		for _, d := range all() {
			if d.AcceptsPlainPath(raw) {
				return parseWith(d, raw)
			}
		}
	}
	if ok {
		// A scheme loanq does not take ("jdbc:oracle:thin:@db:1521/ORCL",
		// "pg://…"). Only the scheme is shown: in a foreign format, where
		// the password is (userinfo, ?password=, "user/pass@") cannot be told.
		err := problem.Usagef("unknown database scheme %q in %s:…: loanq takes %s, or a path ending in .db", scheme, scheme, strings.Join(knownSchemes(), ", "))
		if scheme == "jdbc" {
			err = problem.WithHint(err, "loanq reads no JDBC URLs: write jdbc:oracle:thin:@HOST:PORT/SERVICE as oracle://USER:PASS@HOST:PORT/SERVICE, jdbc:postgresql://HOST/DB as postgres://USER@HOST/DB, jdbc:mysql://HOST/DB as mysql://USER:PASS@HOST/DB; README.md, \"Connecting to a server\"")
		}
		return nil, dsn.DSN{}, err
	}
	return nil, dsn.DSN{}, problem.Usagef("malformed database DSN %q: expected %s, or a path ending in .db", dsn.RedactLoose(raw), strings.Join(knownSchemes(), ", "))
}

func parseWith(d Driver, raw string) (Driver, dsn.DSN, error) {
	parsed, err := d.ParseDSN(raw)
	if err != nil {
		return nil, dsn.DSN{}, err
	}
	return d, parsed, nil
}

// knownSchemes lists the registered schemes as SCHEME://.
func knownSchemes() []string {
	mu.RLock()
	defer mu.RUnlock()
	return knownSchemesLocked()
}

func all() []Driver {
	mu.RLock()
	defer mu.RUnlock()
	seen := map[Driver]bool{}
	var out []Driver
	for _, d := range registry {
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}
