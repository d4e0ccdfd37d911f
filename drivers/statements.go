package drivers

import (
	"reflect"
	"strings"
)

// Statements holds every fixed statement a dialect sends, by purpose. Each
// driver fills one in its sql.go; the engine executes these strings and
// `loanq sql` prints them, so documentation cannot drift from behaviour.
//
// Bind order is given in each field's comment and is the same for every
// dialect; only the placeholder syntax differs ($1, ?, :1).
type Statements struct {
	// Now reads the database clock. All loanq times come from the database.
	Now string `purpose:"read the database clock"`

	// --- tasks ---

	// TaskInsert binds: name, source, key, criteria, order, max_active (NULL for
	// none), lock_strategy, query_delay_ms, lease_ttl_ms, created_by.
	TaskInsert string `purpose:"create a task"`
	// TaskByName binds: name. TaskByID binds: id. Both, and TaskList, select in
	// order: id, name, source, key, criteria, order, max_active, lock_strategy,
	// query_delay_ms, lease_ttl_ms, created_by, created_at.
	TaskByName string `purpose:"read a task by name"`
	TaskByID   string `purpose:"read a task by id"`
	TaskList   string `purpose:"list tasks"`
	// TaskRuns binds: task id; the ten most recent criteria-query runs.
	TaskRuns string `purpose:"recent criteria-query runs of a task"`

	// --- the request log (SPEC §3 step 1) ---

	// RequestInsert binds: task id, user, requested. Committed on its own before
	// the lock is tried, so a request is never lost with a rolled-back transaction.
	RequestInsert string `purpose:"record a work request (committed before the lock)"`
	// RequestByID binds: id. Columns: id, task id, task name, user, requested,
	// assigned, status, created_at, served_at.
	RequestByID string `purpose:"read a work request"`
	// RequestsPending binds: task id. Oldest first: id, user, requested.
	RequestsPending string `purpose:"pending requests of a task, oldest first"`
	// RequestFinish binds: assigned, status, id. Only a pending request changes.
	RequestFinish string `purpose:"set a request's outcome"`
	// RequestLoans binds: request id. The loans assigned to it.
	RequestLoans string `purpose:"loans assigned to a request"`

	// --- the task lock (SPEC §3 step 2), one per strategy ---

	// LockSkip, LockNoWait, LockWait bind: task id. Each must be the first
	// statement of its transaction (seed 002).
	LockSkip   string `purpose:"task lock, strategy skip"`
	LockNoWait string `purpose:"task lock, strategy nowait"`
	LockWait   string `purpose:"task lock, strategy wait"`
	// LeaseAcquire binds: owner, ttl ms, task id. Takes the lease when it is free
	// or expired, and bumps the fencing token. One row affected means taken.
	LeaseAcquire string `purpose:"task lock, strategy lease: take the lease"`
	// LeaseToken binds: task id, owner. Reads the token just taken.
	LeaseToken string `purpose:"task lock, strategy lease: read the fencing token"`
	// LeaseFenceRelease binds: task id, owner, token. The first statement of the
	// assignment transaction: it succeeds (one row) only while the caller still
	// holds an unexpired lease with its token, and frees the lease at commit.
	LeaseFenceRelease string `purpose:"task lock, strategy lease: fencing check and release at commit"`
	// LeaseRelease binds: task id, owner, token. Frees the lease after a failure.
	LeaseRelease string `purpose:"task lock, strategy lease: give the lease back"`

	// --- assignments ---

	// ActiveCountForUser binds: task id, user. Read after the lock (max_active).
	ActiveCountForUser string `purpose:"a user's active work in a task (per-user cap)"`
	// WorkInsert binds: task id, loan id, user, request id.
	WorkInsert string `purpose:"assign a loan"`
	// QueryRunInsert binds: task id, strategy, holder, started_at, duration_ms,
	// rows_found, requests_served, loans_assigned.
	QueryRunInsert string `purpose:"log a criteria-query run"`

	// --- dispositions (SPEC §4) ---

	// ActiveWork binds: task id, loan id. Columns: work id, user.
	ActiveWork string `purpose:"the active assignment of a loan in a task"`
	// LastWork binds: task id, loan id. Columns: disposition, user. Most recent first.
	LastWork string `purpose:"the latest assignment of a loan in a task"`
	// Dispose binds: disposition, return-after milliseconds (NULL unless return), work id, user.
	Dispose string `purpose:"end an assignment with a disposition"`

	// --- pipeline ---

	// Pipeline binds: user, task name, task name. Oldest first: task, loan,
	// assigned_at, seconds since assignment. An empty task name means all tasks.
	Pipeline string `purpose:"a user's active work, oldest first"`
}

// Named is one statement with its purpose.
type Named struct {
	Field   string
	Purpose string
	SQL     string
}

// List returns the statements in declaration order with their purposes.
func (s *Statements) List() []Named {
	v := reflect.ValueOf(s).Elem()
	t := v.Type()
	out := make([]Named, 0, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		out = append(out, Named{Field: f.Name, Purpose: f.Tag.Get("purpose"), SQL: strings.TrimSpace(v.Field(i).String())})
	}
	return out
}

// Missing lists fields a driver left empty; the conformance suite checks it.
func (s *Statements) Missing() []string {
	var out []string
	for _, n := range s.List() {
		if n.SQL == "" {
			out = append(out, n.Field)
		}
	}
	return out
}

// Lock returns the lock statement of a row-lock strategy.
func (s *Statements) Lock(st Strategy) string {
	switch st {
	case Skip:
		return s.LockSkip
	case NoWait:
		return s.LockNoWait
	case Wait:
		return s.LockWait
	}
	return ""
}
