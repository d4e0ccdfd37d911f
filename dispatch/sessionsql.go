package dispatch

import (
	"database/sql"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
)

// The statements of the processor's page (session.go: /work of `loanq
// serve --api`): its sessions and the user's history of the day. A
// catalogue of their own (drivers.Catalogue "session"), not part of the
// engine's drivers.Statements; `loanq sql` prints them after the engine's.
// Every dialect sends the portable text.
type sessionStatements struct {
	// SessionInsert: the session id itself is never stored.
	SessionInsert drivers.Stmt[sessionInsertParams] `purpose:"page: open a session (only its hash is kept)"`
	// SessionAuth: the session's user, role and CSRF token when it has not
	// expired and its API token (if any) is neither revoked nor expired
	// (database clock); no row otherwise.
	SessionAuth drivers.Query[hashParams, sessionRow] `purpose:"page: authenticate a call by its session cookie's hash"`
	// SessionDelete: sign-out.
	SessionDelete drivers.Stmt[hashParams] `purpose:"page: end a session (sign out)"`
	// SessionPrune deletes expired sessions.
	SessionPrune drivers.Stmt[engineio.NoParams] `purpose:"page: delete expired sessions"`
	// History: the user's dispositions in the last age ms, newest first, at
	// most 200, with the task's key kind (loan ids are text: loankey.New).
	History drivers.Query[historyParams, historyRow] `purpose:"page: a user's dispositions of the day"`
}

var sessionCatalogue = drivers.NewCatalogue("session", portableSession)

// sessionSQL is the page's catalogue compiled for the engine's driver.
func (st *store) sessionSQL() *sessionStatements { return sessionCatalogue.For(st.driver) }

func portableSession() *sessionStatements {
	return &sessionStatements{
		SessionInsert: drivers.Stmt[sessionInsertParams]{SQL: `INSERT INTO loanq_session (session_hash, user_name, role, csrf, token_id, created_at, expires_at)
VALUES (:hash, :user, :role, :csrf, :token_id, {{now}}, {{nowPlusMs ":ttl_ms"}})`},
		SessionAuth: drivers.Query[hashParams, sessionRow]{SQL: `SELECT s.user_name, s.role, s.csrf FROM loanq_session s
LEFT JOIN loanq_api_token t ON t.id = s.token_id
WHERE s.session_hash = :hash AND s.expires_at > {{now}}
  AND (s.token_id IS NULL OR (t.id IS NOT NULL AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > {{now}})))`},
		SessionDelete: drivers.Stmt[hashParams]{SQL: `DELETE FROM loanq_session WHERE session_hash = :hash`},
		SessionPrune:  drivers.Stmt[engineio.NoParams]{SQL: `DELETE FROM loanq_session WHERE expires_at <= {{now}}`},
		History: drivers.Query[historyParams, historyRow]{SQL: `SELECT t.name, w.loan_id, w.disposition, w.disposed_at, w.return_at, t.key_kind, w.reason, w.note
FROM loanq_work w JOIN loanq_task t ON t.id = w.task_id
WHERE w.user_name = :user AND w.disposition IS NOT NULL AND w.disposed_at > {{nowMinusMs ":age_ms"}}
ORDER BY w.disposed_at DESC, w.id DESC {{limit "200"}}`},
	}
}

// The parameters (bind tags as in drivers/params.go; hashParams is in
// apitokensql.go).
type (
	// sessionInsertParams binds SessionInsert: a page session's hash,
	// owner, CSRF token, the API token it was opened with and its validity.
	sessionInsertParams struct {
		Hash    string        `bind:"hash"`
		User    string        `bind:"user"`
		Role    string        `bind:"role"`
		CSRF    string        `bind:"csrf"`
		TokenID sql.NullInt64 `bind:"token_id"` // NULL: --auth proxy
		TTLMs   int64         `bind:"ttl_ms"`
	}
	// historyParams binds History: whose dispositions, over the last AgeMs.
	historyParams struct {
		User  string `bind:"user"`
		AgeMs int64  `bind:"age_ms"`
	}
)

// The rows (col tags as in drivers/rows.go).
type (
	// sessionRow is a valid session's user, role and CSRF token.
	sessionRow struct {
		User string `col:"user_name"`
		Role string `col:"role"`
		CSRF string `col:"csrf"`
	}
	// historyRow is one of a user's dispositions.
	historyRow struct {
		Task        string         `col:"name"`
		LoanID      string         `col:"loan_id"`
		Disposition string         `col:"disposition"`
		DisposedAt  engineio.Time  `col:"disposed_at"`
		ReturnAt    engineio.Time  `col:"return_at"`
		KeyKind     string         `col:"key_kind"`
		Reason      sql.NullString `col:"reason"`
		Note        sql.NullString `col:"note"`
	}
)
