package drivers

import "errors"

// IsPermissionDenied reports whether any registered driver recognises err
// as its database refusing a statement to the connected account. The
// command line turns such an error into bad input (exit 2): nothing was
// changed, and running the command again as it is will not help.
func IsPermissionDenied(err error) bool {
	if err == nil {
		return false
	}
	mu.RLock()
	defer mu.RUnlock()
	for _, d := range registry {
		if d.IsPermissionDenied(err) {
			return true
		}
	}
	return false
}

// Identity is what the database says about the account a connection uses
// (the Identity statement).
type Identity struct {
	// Account is the database account's name (MySQL: the user part).
	Account string
	// MayActAs says whether the account may act as the user that was asked
	// about: its own name, the name an admin mapped to it, or anyone when the
	// account is trusted.
	MayActAs bool
	// Mapped is the user name an admin mapped to the account, "" when none.
	Mapped string
}

// ErrNoAccounts is returned by ReadIdentity on a database without accounts
// (SQLite): any user name may be used.
var ErrNoAccounts = errors.New("this database has no accounts")
