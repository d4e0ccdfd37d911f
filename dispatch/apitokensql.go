package dispatch

import (
	"database/sql"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
)

// The API tokens' statements (apitoken.go: `loanq token`, `loanq serve
// --api --auth token`; docs/api.md): a catalogue of their own
// (drivers.Catalogue "apitoken"), not part of the engine's
// drivers.Statements; `loanq sql` prints them after the engine's. Every
// dialect sends the portable text.
type tokenStatements struct {
	// TokenInsert: the token itself is never stored.
	TokenInsert drivers.Stmt[tokenInsertParams] `purpose:"api: issue a token (only its hash is kept)"`
	// TokenAuth: the token's id, user and role when it is neither revoked nor
	// expired (database clock); no row otherwise.
	TokenAuth drivers.Query[hashParams, tokenAuthRow]        `purpose:"api: authenticate a call by its token's hash"`
	TokenList drivers.Query[engineio.NoParams, tokenListRow] `purpose:"api: list tokens (never the tokens themselves)"`
	// TokenRevoke: 0 rows: no such token, or already revoked.
	TokenRevoke drivers.Stmt[tokenRevokeParams] `purpose:"api: revoke a token"`
}

var tokenCatalogue = drivers.NewCatalogue("apitoken", portableToken)

// tokenSQL is the API tokens' catalogue compiled for the engine's driver.
func (a *Admin) tokenSQL() *tokenStatements { return tokenCatalogue.For(a.driver) }

func portableToken() *tokenStatements {
	return &tokenStatements{
		TokenInsert: drivers.Stmt[tokenInsertParams]{SQL: `INSERT INTO loanq_api_token (user_name, role, token_hash, created_by, created_at, expires_at)
VALUES (:user, :role, :hash, :created_by, {{now}}, {{nowPlusMs ":expires_ms"}}){{returningID}}`},
		TokenAuth: drivers.Query[hashParams, tokenAuthRow]{SQL: `SELECT id, user_name, role FROM loanq_api_token
WHERE token_hash = :hash AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > {{now}})`},
		TokenList: drivers.Query[engineio.NoParams, tokenListRow]{SQL: `SELECT id, user_name, role, created_by, {{age "created_at"}} AS age_s,
       CASE WHEN revoked_at IS NOT NULL THEN 'revoked'
            WHEN expires_at IS NOT NULL AND expires_at <= {{now}} THEN 'expired' ELSE 'active' END AS state,
       CASE WHEN revoked_at IS NULL AND expires_at > {{now}} THEN -({{age "expires_at"}}) END AS left_s,
       revoked_by
FROM loanq_api_token ORDER BY id`},
		TokenRevoke: drivers.Stmt[tokenRevokeParams]{SQL: `UPDATE loanq_api_token SET revoked_at = {{now}}, revoked_by = :by
WHERE id = :id AND revoked_at IS NULL`},
	}
}

// The parameters (bind tags as in drivers/params.go).
type (
	// tokenInsertParams binds TokenInsert: an API token's owner, role and
	// hash.
	tokenInsertParams struct {
		User      string        `bind:"user"`
		Role      string        `bind:"role"`
		Hash      string        `bind:"hash"`
		CreatedBy string        `bind:"created_by"`
		ExpiresMs sql.NullInt64 `bind:"expires_ms"` // NULL: no expiry
	}
	// hashParams binds the SHA-256 (hex) of an API token or of a page
	// session's id.
	hashParams struct {
		Hash string `bind:"hash"`
	}
	// tokenRevokeParams binds TokenRevoke.
	tokenRevokeParams struct {
		ID int64  `bind:"id"`
		By string `bind:"by"`
	}
)

// The rows (col tags as in drivers/rows.go).
type (
	// tokenAuthRow is a valid token's id, user and role.
	tokenAuthRow struct {
		ID   int64  `col:"id"`
		User string `col:"user_name"`
		Role string `col:"role"`
	}
	// tokenListRow is one token of the list.
	tokenListRow struct {
		ID        int64          `col:"id"`
		User      string         `col:"user_name"`
		Role      string         `col:"role"`
		CreatedBy string         `col:"created_by"`
		AgeS      int64          `col:"age_s"`
		State     string         `col:"state"`  // 'active', 'expired' or 'revoked'
		LeftS     sql.NullInt64  `col:"left_s"` // seconds before expiry (NULL: none, or past)
		RevokedBy sql.NullString `col:"revoked_by"`
	}
)
