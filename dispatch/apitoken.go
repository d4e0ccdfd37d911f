package dispatch

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/problem"
)

// API token roles (`loanq token create --role`): a processor acts only as
// the token's user; a supervisor may also reclaim and see everyone's work.
const (
	TokenProcessor  = "processor"
	TokenSupervisor = "supervisor"
)

// tokenPrefix marks loanq API tokens, so a leaked one is recognisable (and
// a secret scanner can be taught the pattern).
const tokenPrefix = "lqt_"

// IssuedToken is what `loanq token create` prints: the token itself is shown
// here once and never stored (only its SHA-256 is).
type IssuedToken struct {
	ID        int64  `json:"id"`
	User      string `json:"user"`
	Role      string `json:"role"`
	Token     string `json:"token"`
	ExpiresMs *int64 `json:"expires_in_ms"` // null: no expiry
}

// TokenInfo is one row of `loanq token list`: never the token.
type TokenInfo struct {
	ID        int64  `json:"id"`
	User      string `json:"user"`
	Role      string `json:"role"`
	CreatedBy string `json:"created_by"`
	AgeS      int64  `json:"age_s"`
	State     string `json:"state"` // active, expired or revoked
	ExpiresS  *int64 `json:"expires_in_s"`
	RevokedBy string `json:"revoked_by,omitempty"`
}

// Principal is the user an API call acts as, from its token.
type Principal struct {
	TokenID int64
	User    string
	Role    string
}

// Supervisor reports whether the principal may act on everyone's work.
func (p *Principal) Supervisor() bool { return p.Role == TokenSupervisor }

// HashToken is how a token is kept and looked up: hex SHA-256. The token is
// 32 random bytes, so a plain hash (no salt, no stretching) cannot be
// reversed by guessing.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// ParseTokenRole checks a --role of `token create`.
func ParseTokenRole(s string) (string, error) {
	switch r := strings.ToLower(strings.TrimSpace(s)); r {
	case TokenProcessor, TokenSupervisor:
		return r, nil
	}
	return "", problem.Usagef("invalid --role %q: give processor (acts only as its user) or supervisor (may also reclaim and see everyone's work)", s)
}

// CheckNewToken checks a token's user, role and expiry without a database
// (commands call it before they connect) and returns the role as stored.
func CheckNewToken(user, role string, expires time.Duration) (string, error) {
	if err := validateUser(user); err != nil {
		return "", problem.WithHint(err, "`loanq token create --user NAME` names the processor the token acts as")
	}
	role, err := ParseTokenRole(role)
	if err != nil {
		return "", err
	}
	if expires < 0 || (expires > 0 && expires < time.Minute) {
		return "", problem.Usagef("invalid --expires %s: give at least 1m, such as 90d or 720h (leave it out for no expiry)", expires)
	}
	return role, nil
}

// Issuer is the name `token create` and `token revoke` record as who issued
// or revoked a token (created_by, revoked_by): the connection's database
// account as the database reports it (the Identity statement: PostgreSQL
// current_user, MySQL and MariaDB the user part of USER(), Oracle
// SESSION_USER), never the OS user, which anyone can choose; and
// "ACCOUNT (as NAME)" when the command acted as another user (requested:
// --user or LOANQ_USER, which the database allows a trusted or mapped
// account). SQLite has no accounts: the acting user, requested or else
// fallback (the OS user), as every command records on SQLite.
func (a *Admin) Issuer(ctx context.Context, requested, fallback string) (string, error) {
	if a.caps().Accounts == drivers.AccountsNone {
		return a.ActingUser(ctx, requested, fallback)
	}
	if requested != "" {
		// Refused, with the reason, unless the database lets the account act
		// as that name.
		if _, err := a.ActingUser(ctx, requested, ""); err != nil {
			return "", err
		}
	}
	id, err := a.Identity(ctx, "")
	if err != nil {
		return "", err
	}
	if requested == "" || requested == id.Account {
		return id.Account, nil
	}
	by := id.Account + " (as " + requested + ")"
	if utf8.RuneCountInString(by) > MaxUserChars {
		return "", problem.Usagef("%q is too long to record as the token's issuer (at most %d characters): act as a shorter --user, or drop --user to record the account %q alone",
			by, MaxUserChars, id.Account)
	}
	return by, nil
}

// CreateToken issues a token for user with role, valid for expires (0: no
// expiry); by is who issues it (Issuer).
func (a *Admin) CreateToken(ctx context.Context, user, role, by string, expires time.Duration) (*IssuedToken, error) {
	role, err := CheckNewToken(user, role, expires)
	if err != nil {
		return nil, err
	}
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return nil, fmt.Errorf("reading random bytes for a token: %w", err)
	}
	token := tokenPrefix + base64.RawURLEncoding.EncodeToString(secret[:])
	out := &IssuedToken{User: user, Role: role, Token: token}
	var expiresMS sql.NullInt64 // NULL: never
	if expires > 0 {
		ms := expires.Milliseconds()
		expiresMS = sql.NullInt64{Int64: ms, Valid: true}
		out.ExpiresMs = &ms
	}
	if out.ID, err = a.tokenSQL().TokenInsert.InsertID(ctx, a.db, tokenInsertParams{User: user, Role: role,
		Hash: HashToken(token), CreatedBy: by, ExpiresMs: expiresMS}); err != nil {
		return nil, fmt.Errorf("storing the token: %w", err)
	}
	return out, nil
}

// ListTokens lists every token ever issued, oldest first.
func (a *Admin) ListTokens(ctx context.Context) ([]TokenInfo, error) {
	rows, err := a.tokenSQL().TokenList.All(ctx, a.db, engineio.NoParams{})
	if err != nil {
		return nil, fmt.Errorf("listing tokens: %w", err)
	}
	list := []TokenInfo{}
	for _, r := range rows {
		t := TokenInfo{ID: r.ID, User: r.User, Role: r.Role, CreatedBy: r.CreatedBy, AgeS: r.AgeS, State: r.State, RevokedBy: r.RevokedBy.String}
		if r.LeftS.Valid {
			t.ExpiresS = &r.LeftS.Int64
		}
		list = append(list, t)
	}
	return list, nil
}

// RevokeToken refuses the token from now on, in every serve process (each
// call is authenticated against the table); by is who revokes it (Issuer).
func (a *Admin) RevokeToken(ctx context.Context, id int64, by string) error {
	if id <= 0 {
		return problem.Usagef("invalid token id %d: give the id `loanq token list` shows", id)
	}
	res, err := a.tokenSQL().TokenRevoke.Exec(ctx, a.db, tokenRevokeParams{ID: id, By: by})
	if err != nil {
		return fmt.Errorf("revoking token %d: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("revoking token %d: %w", id, err)
	} else if n == 0 {
		return problem.Usagef("no active token %d: `loanq token list` shows the ids and which are revoked already", id)
	}
	return nil
}

// Authenticate returns the principal of a token, or nil when the token is
// unknown, revoked or expired (by the database clock).
func (a *Admin) Authenticate(ctx context.Context, token string) (*Principal, error) {
	if !strings.HasPrefix(token, tokenPrefix) || len(token) > 100 {
		return nil, nil // not one of ours: no query
	}
	r, err := a.tokenSQL().TokenAuth.One(ctx, a.db, hashParams{Hash: HashToken(token)})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checking an API token: %w", err)
	}
	return &Principal{TokenID: r.ID, User: r.User, Role: r.Role}, nil
}
