// Package dispatch is loanq's algorithm (docs/algorithm.md), written once
// against the drivers.Driver interface. It knows no dialect: every statement
// it sends comes from the driver's Statements or CriteriaQuery.
//
// The shape of a `work get`:
//
//  1. the request is logged in loanq_work_request and committed on its own;
//  2. a transaction takes the task lock as its FIRST statement;
//  3. no lock: answer busy; the caller rechecks later (5 s, 10 s, 20 s, …);
//  4. lock held: run the criteria query once, limited to what the pending
//     requests need;
//  5. serve every pending request of the task, oldest first, and commit;
//  6. after the commit, look again: a request that committed after the read
//     of step 5 is served by another round, so none stays pending.
package dispatch

import (
	"crypto/rand"
	"database/sql"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/loanq/loanq/drivers"
)

// Limits of user input.
const (
	MaxCount      = 1000             // most loans one work get may ask for
	MaxReturnWait = 72 * time.Hour   // longest `disposition … return --after`
	MaxQueryDelay = 10 * time.Minute // --query-delay, a demo/test aid
)

// DefaultBackoff is how a busy caller rechecks: 5 s, 10 s, then every 20 s.
var DefaultBackoff = []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second}

// store is what the serving engine and the admin surface share: the
// database, its driver, and the task-name cache. Neither exports it: a
// command reaches the database through their methods only, so no caller
// reads around the engine's rules (docs/algorithm.md).
type store struct {
	db     *sql.DB
	driver drivers.Driver

	// taskIDs maps task names to ids and key kinds as task reads find them
	// (name → taskRef): a disposition needs these only. A stale entry (the task deleted, or
	// deleted and created again under its name) matches no active work, as
	// task ids are never reused (identity, sequences, SQLite's AUTOINCREMENT,
	// InnoDB's persistent counter), and the disposition then reads the task
	// (Dispose).
	taskIDs sync.Map

	// shareWaits are the share-mode waits in progress, one per task
	// (wakeGroup, wake.go): this process's other waiters on the task join
	// it instead of queueing a connection each.
	shareWaits wakeGroups
}

// Engine serves work: requests, rounds, claims, dispositions, the
// pipeline, explain. Tasks, tokens, sessions, groups, prune, audit and
// stats are the Admin's (admin.go); both read tasks through the store.
type Engine struct {
	*store
	// Holder names this process in lease rows and in the query-run log.
	Holder string
	// MaxRounds bounds how many serving rounds one caller runs for others
	// before returning its own answer; leftovers are served by their own
	// callers' rechecks.
	MaxRounds int

	// hooks are where tests act inside a round; unset in production.
	hooks testHooks
}

// testHooks are points inside the engine's transactions where tests act
// (set only from export_test.go). Each is nil in production, where hook
// costs one comparison.
type testHooks struct {
	// beforeCommit runs inside an assignment or claim transaction, just
	// before its commit.
	beforeCommit func()
	// afterQuery runs right after the criteria query (a rows claim's first
	// locking read), before the pending requests are re-read and served.
	afterQuery func()
	// afterPending runs in a serving round right after the pending
	// requests were read for assignment.
	afterPending func()
	// renewed runs after each lease renewal.
	renewed func()
	// afterCommit runs right after an assignment or claim transaction
	// committed.
	afterCommit func()
	// beforeRequestLog runs in Get just before the request is logged on
	// its own (not in a claim's transaction).
	beforeRequestLog func()
	// loggedInClaim runs in a rows claim's transaction right after it
	// logged its fresh request (tests age the request there).
	loggedInClaim func(tx *sql.Tx, id int64)
}

// hook runs a test hook, if set.
func hook(f func()) {
	if f != nil {
		f()
	}
}

// New returns an engine with the defaults.
func New(db *sql.DB, d drivers.Driver) *Engine {
	host, _ := os.Hostname()
	// The holder must be unique per engine, not only per process: two engines
	// in one process must not pass each other's lease fence.
	var b [4]byte
	_, _ = rand.Read(b[:])
	return &Engine{store: &store{db: db, driver: d}, Holder: fmt.Sprintf("%s:%d:%x", host, os.Getpid(), b), MaxRounds: 10}
}

func (st *store) sql() *drivers.Statements { return st.driver.Statements() }

// caps are what the database can do where databases differ: the engine
// switches on them, never on whether a statement is empty.
func (st *store) caps() drivers.Capabilities { return st.driver.Capabilities() }
