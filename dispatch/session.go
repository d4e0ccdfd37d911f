package dispatch

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"github.com/loanq/loanq/loankey"
	"time"

	"github.com/loanq/loanq/drivers/engineio"
)

// Sessions of the processor's page (/work of `loanq serve --api`): a browser
// signs in once and then carries a cookie holding a random session id. The
// session is a row of loanq_session (only the id's SHA-256), so every serve
// node accepts it and a sign-out or an expiry holds on every node at once.

// Session is a signed-in browser: its user, role and the CSRF token every
// POST and DELETE of the page must echo.
type Session struct {
	Principal
	CSRF string
}

// randomToken is 32 random bytes, base64url: a session id or a CSRF token.
func randomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("reading random bytes: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// CreateSession opens a session for p, valid for ttl; it returns the
// session id (the cookie's value, never stored) and the session. Expired
// sessions are deleted on the way, so the table holds only live ones.
func (a *Admin) CreateSession(ctx context.Context, p *Principal, ttl time.Duration) (string, *Session, error) {
	if err := validateUser(p.User); err != nil {
		return "", nil, err
	}
	id, err := randomToken()
	if err != nil {
		return "", nil, err
	}
	csrf, err := randomToken()
	if err != nil {
		return "", nil, err
	}
	if _, err := a.sessionSQL().SessionPrune.Exec(ctx, a.db, engineio.NoParams{}); err != nil {
		return "", nil, fmt.Errorf("deleting expired sessions: %w", err)
	}
	tok := sql.NullInt64{Int64: p.TokenID, Valid: p.TokenID != 0}
	if _, err := a.sessionSQL().SessionInsert.Exec(ctx, a.db, sessionInsertParams{Hash: HashToken(id), User: p.User, Role: p.Role,
		CSRF: csrf, TokenID: tok, TTLMs: ttl.Milliseconds()}); err != nil {
		return "", nil, fmt.Errorf("opening a session for %s: %w", p.User, err)
	}
	return id, &Session{Principal: *p, CSRF: csrf}, nil
}

// SessionOf reads the session whose id is id; nil when there is none, it
// expired, or the API token it was opened with was revoked or expired.
func (a *Admin) SessionOf(ctx context.Context, id string) (*Session, error) {
	if id == "" || len(id) > 100 {
		return nil, nil // not one of ours: no query
	}
	r, err := a.sessionSQL().SessionAuth.One(ctx, a.db, hashParams{Hash: HashToken(id)})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checking a session: %w", err)
	}
	return &Session{Principal: Principal{User: r.User, Role: r.Role}, CSRF: r.CSRF}, nil
}

// EndSession deletes the session whose id is id (sign-out); no session is
// not an error.
func (a *Admin) EndSession(ctx context.Context, id string) error {
	if _, err := a.sessionSQL().SessionDelete.Exec(ctx, a.db, hashParams{Hash: HashToken(id)}); err != nil {
		return fmt.Errorf("ending a session: %w", err)
	}
	return nil
}

// HistoryItem is one disposition of the user's day.
type HistoryItem struct {
	Task        string      `json:"task"`
	LoanID      loankey.Key `json:"loan_id"` // a number for integer-keyed tasks, a string otherwise
	Disposition string      `json:"disposition"`
	DisposedAt  time.Time   `json:"disposed_at"`
	ReturnAt    *time.Time  `json:"return_at"`
	// Reason and Note: the disposition's (docs/reasons.md); null when none.
	Reason *string `json:"reason"`
	Note   *string `json:"note"`
}

// History lists user's dispositions over the last since (the page's
// "today": since local midnight), newest first, at most 200.
func (e *Engine) History(ctx context.Context, user string, since time.Duration) ([]HistoryItem, error) {
	if err := validateUser(user); err != nil {
		return nil, err
	}
	rows, err := e.sessionSQL().History.All(ctx, e.db, historyParams{User: user, AgeMs: since.Milliseconds()})
	if err != nil {
		return nil, fmt.Errorf("reading the history of %s: %w", user, err)
	}
	out := []HistoryItem{}
	for _, r := range rows {
		it := HistoryItem{Task: r.Task, LoanID: loankey.New(loankey.ParseKind(r.KeyKind), r.LoanID),
			Disposition: r.Disposition, DisposedAt: r.DisposedAt.T}
		if !r.ReturnAt.T.IsZero() {
			it.ReturnAt = &r.ReturnAt.T
		}
		if r.Reason.Valid {
			it.Reason = &r.Reason.String
		}
		if r.Note.Valid {
			it.Note = &r.Note.String
		}
		out = append(out, it)
	}
	return out, nil
}
