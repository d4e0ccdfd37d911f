package drivers

import "database/sql"

// TokenInsertParams binds TokenInsert: an API token's owner, role and hash.
type TokenInsertParams struct {
	User      string        `bind:"user"`
	Role      string        `bind:"role"`
	Hash      string        `bind:"hash"`
	CreatedBy string        `bind:"created_by"`
	ExpiresMs sql.NullInt64 `bind:"expires_ms"` // NULL: no expiry
}

// HashParams binds an API token's SHA-256 (hex).
type HashParams struct {
	Hash string `bind:"hash"`
}

// TokenRevokeParams binds TokenRevoke.
type TokenRevokeParams struct {
	ID int64  `bind:"id"`
	By string `bind:"by"`
}

// SessionInsertParams binds SessionInsert: a page session's hash, owner,
// CSRF token, the API token it was opened with and its validity.
type SessionInsertParams struct {
	Hash    string        `bind:"hash"`
	User    string        `bind:"user"`
	Role    string        `bind:"role"`
	CSRF    string        `bind:"csrf"`
	TokenID sql.NullInt64 `bind:"token_id"` // NULL: --auth proxy
	TTLMs   int64         `bind:"ttl_ms"`
}

// HistoryParams binds History: whose dispositions, over the last AgeMs.
type HistoryParams struct {
	User  string `bind:"user"`
	AgeMs int64  `bind:"age_ms"`
}
