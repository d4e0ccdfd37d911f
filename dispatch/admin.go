package dispatch

import (
	"database/sql"

	"github.com/loanq/loanq/drivers"
)

// Admin is loanq's admin surface: tasks (create, update, delete, reasons),
// API tokens and the processor page's sessions, groups, prune, audit, and
// the supervisor's reads (work list, stats). It is a type of its own so
// that the serving engine (Engine) holds only what serving needs; both
// read tasks, identities and entitlements through the store they share.
type Admin struct {
	*store
}

// NewAdmin returns the admin surface of one database.
func NewAdmin(db *sql.DB, d drivers.Driver) *Admin {
	return &Admin{store: &store{db: db, driver: d}}
}

// Admin returns the admin surface over the engine's database, sharing its
// task cache: a task the admin updates or deletes is read again by both.
func (e *Engine) Admin() *Admin { return &Admin{store: e.store} }
