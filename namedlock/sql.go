package namedlock

import (
	"database/sql"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
)

// The named locks' statements: leases in loanq_lock (the farm singleton),
// a catalogue of their own (drivers.Catalogue "namedlock"), not part of the
// engine's drivers.Statements. `loanq sql` prints them after the engine's.
// What a dialect says its own way (NamedLockEnsure on MySQL and Oracle) is
// in its drivers/<db>/sql.go, catalogueSQL["namedlock"].
//
// A lock row is created on first use (NamedLockEnsure, a duplicate is
// ignored, so two first users cannot both fail or both create it) and then
// only ever updated: taking is one UPDATE that succeeds only when the lock
// is free or expired by the database clock, so of N racing takers exactly
// one gets a row. See docs/algorithm.md, "Named locks".
type statements struct {
	// NamedLockEnsure creates the free lock row unless it exists. A unique
	// violation (a racing creator) counts as success.
	NamedLockEnsure drivers.Stmt[nameParams] `purpose:"lock run: create the lock's row if missing (a duplicate is ignored)"`
	// NamedLockTake: one row affected means taken; it bumps the fencing token
	// and sets taken_at and expires_at from the database clock.
	NamedLockTake drivers.Stmt[takeParams]           `purpose:"lock run: take the lock when free or expired, bumping the token"`
	NamedLockRead drivers.Query[nameParams, lockRow] `purpose:"lock run: read one lock"`
	// NamedLockRenew: one row only while the caller still holds the unexpired
	// lease with its token.
	NamedLockRenew drivers.Stmt[renewParams] `purpose:"lock run: renew the lease (fenced by holder and token)"`
	// NamedLockRelease frees the lock only if the caller is still its holder
	// with its token.
	NamedLockRelease drivers.Stmt[fenceParams]                     `purpose:"lock run: release the lock (fenced by holder and token)"`
	NamedLockList    drivers.Query[engineio.NoParams, lockListRow] `purpose:"lock list: every named lock"`
}

// catalogue is compiled for a driver at its first use (Store.sql).
var catalogue = drivers.NewCatalogue("namedlock", portable)

// portable: the row is created on first use and then only updated. The
// UPDATE's row lock (SQLite: the write lock) serialises racing takers; one
// that waited re-reads the committed row and finds it taken.
func portable() *statements {
	return &statements{
		NamedLockEnsure: drivers.Stmt[nameParams]{SQL: `INSERT INTO loanq_lock (name, token) VALUES (:name, 0) ON CONFLICT (name) DO NOTHING`},
		NamedLockTake: drivers.Stmt[takeParams]{SQL: `UPDATE loanq_lock
SET holder = :holder, token = token + 1, taken_at = {{now}},
    expires_at = {{nowPlusMs ":ttl_ms"}}
WHERE name = :name AND (holder IS NULL OR expires_at <= {{now}})`},
		NamedLockRead: drivers.Query[nameParams, lockRow]{SQL: `SELECT holder, token, taken_at, expires_at, {{now}} AS db_now FROM loanq_lock WHERE name = :name`},
		NamedLockRenew: drivers.Stmt[renewParams]{SQL: `UPDATE loanq_lock SET expires_at = {{nowPlusMs ":ttl_ms"}}
WHERE name = :name AND holder = :holder AND token = :token AND expires_at > {{now}}`},
		NamedLockRelease: drivers.Stmt[fenceParams]{SQL: `UPDATE loanq_lock SET holder = NULL, expires_at = NULL
WHERE name = :name AND holder = :holder AND token = :token`},
		NamedLockList: drivers.Query[engineio.NoParams, lockListRow]{SQL: `SELECT name, holder, token, taken_at, expires_at, {{now}} AS db_now FROM loanq_lock ORDER BY name`},
	}
}

// The parameters (bind tags as in drivers/params.go).
type (
	// nameParams is a lock's name.
	nameParams struct {
		Name string `bind:"name"`
	}
	// takeParams takes a named lock for holder for ttl_ms.
	takeParams struct {
		Name   string `bind:"name"`
		Holder string `bind:"holder"`
		TTLMS  int64  `bind:"ttl_ms"`
	}
	// fenceParams is a named lock's holder and its token.
	fenceParams struct {
		Name   string `bind:"name"`
		Holder string `bind:"holder"`
		Token  int64  `bind:"token"`
	}
	// renewParams renews a held named lock for ttl_ms.
	renewParams struct {
		Name   string `bind:"name"`
		Holder string `bind:"holder"`
		Token  int64  `bind:"token"`
		TTLMS  int64  `bind:"ttl_ms"`
	}
)

// The rows (col tags as in drivers/rows.go).
type (
	// lockRow is a named lock, with the database clock.
	lockRow struct {
		Holder    sql.NullString `col:"holder"`
		Token     int64          `col:"token"`
		TakenAt   engineio.Time  `col:"taken_at"`
		ExpiresAt engineio.Time  `col:"expires_at"`
		Now       engineio.Time  `col:"db_now"`
	}
	// lockListRow is lockRow with the lock's name.
	lockListRow struct {
		Name      string         `col:"name"`
		Holder    sql.NullString `col:"holder"`
		Token     int64          `col:"token"`
		TakenAt   engineio.Time  `col:"taken_at"`
		ExpiresAt engineio.Time  `col:"expires_at"`
		Now       engineio.Time  `col:"db_now"`
	}
)
