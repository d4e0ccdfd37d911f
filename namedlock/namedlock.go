// Package namedlock is `loanq lock run`'s named lock — not the lock
// strategies of work get, which are drivers.Strategy. Named leases in loanq's
// own table loanq_lock, for jobs that must run on one node of a farm at a
// time (the farm singleton). A lease is taken with one UPDATE that succeeds
// only when the lock is free or expired by the database clock, renewed while
// its holder works, and fenced by a token that grows at every take: a holder
// that lost its lease can neither renew nor release the next holder's.
// Acquire and Keep (keeper.go) are lock run's lease keeper: take the lease,
// waiting if asked, renew it while the command runs, stop the command when
// it is lost. docs/algorithm.md, "Named locks", is the contract.
package namedlock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/problem"
)

// Limits of the command line.
const (
	MaxNameChars = 200 // loanq_lock.name is VARCHAR(200) (characters on Oracle)
	MinTTL       = time.Second
	MaxTTL       = 24 * time.Hour
	MaxWait      = 24 * time.Hour
	DefaultTTL   = 30 * time.Second
)

// ValidateName checks a lock name before anything is stored under it, with
// the rules of user names (dispatch): not empty, no white space at either end
// (MySQL's PAD SPACE would make "a" and "a " one lock), UTF-8 text without
// control characters, at most MaxNameChars characters.
func ValidateName(name string) error {
	const how = "name the lock with 1-200 characters, e.g. nightly-export"
	switch {
	case strings.TrimSpace(name) == "":
		return problem.Usagef("empty lock name: %s", how)
	case strings.TrimSpace(name) != name:
		return problem.Usagef("invalid lock name %q: it may not begin or end with white space; %s", name, how)
	case !utf8.ValidString(name) || strings.IndexFunc(name, unicode.IsControl) >= 0:
		return problem.Usagef("invalid lock name %q: it must be UTF-8 text without control characters; %s", name, how)
	case utf8.RuneCountInString(name) > MaxNameChars:
		return problem.Usagef("invalid lock name %.20q…: %d characters, at most %d are stored", name, utf8.RuneCountInString(name), MaxNameChars)
	}
	return nil
}

// ValidateTTL checks --ttl.
func ValidateTTL(ttl time.Duration) error {
	if ttl < MinTTL || ttl > MaxTTL {
		return problem.Usagef("invalid --ttl %s: give a duration from 1s to 24h (the lease is renewed every third of it)", ttl)
	}
	return nil
}

// Store reads and writes loanq_lock through a driver's statements.
type Store struct {
	DB     *sql.DB
	Driver drivers.Driver
}

func (s *Store) sql() *statements { return catalogue.For(s.Driver) }

// Lease is a lock as one holder took it.
type Lease struct {
	Name      string
	Holder    string
	Token     int64
	TakenAt   time.Time
	ExpiresAt time.Time
}

// Info is one row of loanq_lock as `lock list` shows it.
type Info struct {
	Name      string    `json:"name"`
	Holder    string    `json:"holder"` // "" when free
	Token     int64     `json:"token"`
	TakenAt   time.Time `json:"taken_at"`   // zero when never taken
	ExpiresAt time.Time `json:"expires_at"` // zero when free
	// State is held, expired (held but past its expiry: the next taker gets
	// it) or free, by the database clock.
	State string `json:"state"`
}

// Take tries once to take the named lease for holder. It returns the lease,
// or nil and the lock's current state when another holder has it.
func (s *Store) Take(ctx context.Context, name, holder string, ttl time.Duration) (*Lease, *Info, error) {
	if err := s.ensure(ctx, name); err != nil {
		return nil, nil, err
	}
	tx, err := s.DB.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("lock %s: begin: %w", name, err)
	}
	defer tx.Rollback()
	res, err := s.sql().NamedLockTake.Exec(ctx, tx, takeParams{Name: name, Holder: holder, TTLMS: ttl.Milliseconds()})
	if err != nil {
		return nil, nil, fmt.Errorf("lock %s: take: %w", name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, nil, fmt.Errorf("lock %s: take: %w", name, err)
	}
	if n != 1 {
		tx.Rollback()
		info, err := s.read(ctx, s.DB, name)
		return nil, info, err
	}
	// Read the token in the taking transaction: the row stays locked (or,
	// on SQLite, the database write-locked) until commit, so what is read is
	// what this take wrote.
	info, err := s.read(ctx, tx, name)
	if err != nil {
		return nil, nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, nil, fmt.Errorf("lock %s: commit the take: %w", name, err)
	}
	return &Lease{Name: name, Holder: holder, Token: info.Token, TakenAt: info.TakenAt, ExpiresAt: info.ExpiresAt}, nil, nil
}

// ensure creates the lock's row unless it exists. Two first users racing
// both succeed: the statement ignores a duplicate where the dialect can say
// so, and a unique violation (Oracle's plain INSERT) is the same answer.
func (s *Store) ensure(ctx context.Context, name string) error {
	// InnoDB may pick a racing upsert as a deadlock victim; nothing was
	// written, so it runs again.
	err := drivers.RetryDeadlock(ctx, s.Driver, 4, func() error {
		_, err := s.sql().NamedLockEnsure.Exec(ctx, s.DB, nameParams{Name: name})
		return err
	})
	if err == nil || s.Driver.IsUniqueViolation(err) {
		return nil
	}
	return fmt.Errorf("lock %s: create its row: %w", name, err)
}

// Renew extends the lease by ttl from now (database clock). false means the
// lease is no longer this holder's: it expired, or someone took it over.
func (s *Store) Renew(ctx context.Context, l *Lease, ttl time.Duration) (bool, error) {
	res, err := s.sql().NamedLockRenew.Exec(ctx, s.DB, renewParams{Name: l.Name, Holder: l.Holder, Token: l.Token, TTLMS: ttl.Milliseconds()})
	if err != nil {
		return false, fmt.Errorf("lock %s: renew: %w", l.Name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("lock %s: renew: %w", l.Name, err)
	}
	return n == 1, nil
}

// Release frees the lock if this holder still has it with its token; false
// means someone else holds it now (nothing was changed).
func (s *Store) Release(ctx context.Context, l *Lease) (bool, error) {
	res, err := s.sql().NamedLockRelease.Exec(ctx, s.DB, fenceParams{Name: l.Name, Holder: l.Holder, Token: l.Token})
	if err != nil {
		return false, fmt.Errorf("lock %s: release: %w", l.Name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("lock %s: release: %w", l.Name, err)
	}
	return n == 1, nil
}

// Get reads one lock; nil when it has never been used.
func (s *Store) Get(ctx context.Context, name string) (*Info, error) {
	return s.read(ctx, s.DB, name)
}

func (s *Store) read(ctx context.Context, q drivers.Querier, name string) (*Info, error) {
	r, err := s.sql().NamedLockRead.One(ctx, q, nameParams{Name: name})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock %s: read: %w", name, err)
	}
	info := Info{Name: name, Token: r.Token}
	info.fill(r.Holder, r.TakenAt, r.ExpiresAt, r.Now)
	return &info, nil
}

// List returns every lock, by name.
func (s *Store) List(ctx context.Context) ([]Info, error) {
	rows, err := s.sql().NamedLockList.All(ctx, s.DB, engineio.NoParams{})
	if err != nil {
		return nil, fmt.Errorf("list locks: %w", err)
	}
	out := []Info{}
	for _, r := range rows {
		info := Info{Name: r.Name, Token: r.Token}
		info.fill(r.Holder, r.TakenAt, r.ExpiresAt, r.Now)
		out = append(out, info)
	}
	return out, nil
}

// fill sets the holder, times and state (by the database clock now).
func (info *Info) fill(holder sql.NullString, taken, expires, now engineio.Time) {
	info.Holder, info.TakenAt, info.ExpiresAt = holder.String, taken.T, expires.T
	dbNow := now.T
	switch {
	case !holder.Valid:
		info.State = "free"
	case !info.ExpiresAt.After(dbNow):
		info.State = "expired"
	default:
		info.State = "held"
	}
}
