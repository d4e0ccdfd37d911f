// Package history checks a recorded history of loanq's callers against the
// database's final state, the way Jepsen's checkers (Elle, Knossos) check a
// database: callers record every operation they invoke and how it
// completed, with times, and Check looks for what no correct engine could
// have produced — a loan active twice, a loan handed out after it stopped
// matching, a request served twice or left pending, a disposition lost, an
// `empty` answer while a loan was free (docs/algorithm.md, SPEC §3-§4, §8-§9).
//
// The package is pure: no database. A harness (internal/testkit/historyrun) runs the
// callers, writes their operations with Log, reads the final state of
// loanq_work, loanq_work_request and the task's source table into a State,
// and calls Check.
//
// Times: an operation has its invoke and complete times on the caller's
// clock (wall clock; the callers of one history run on one machine, so one
// clock), and, where the caller read it, the database clock just before the
// invoke and just after the completion (DBInvoke, DBComplete). The rules
// compare client times with client times and database times with database
// times, never one with the other.
package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
)

// Kind is what an operation did.
type Kind string

const (
	// Get is `work get` (and `work status` of a request: Request set before
	// the call): Count asked, Status, Request and Loans answered.
	Get Kind = "get"
	// Dispose is `disposition TASK Loan Action [--after After]`.
	Dispose Kind = "dispose"
	// Change is the worker's change of the loan's source row in a
	// transaction of its own: after it the loan matches the task's criteria
	// when Matches is true, and does not when it is false. DBComplete is the
	// database clock read after the commit.
	Change Kind = "change"
	// Cancel is `work cancel Request`: Status is the request's status after
	// it (cancelled, or served first: then Loans are the caller's).
	Cancel Kind = "cancel"
	// Kill says the caller's process was killed (SIGKILL) at Invoke; it
	// invokes nothing afterwards.
	Kill Kind = "kill"
)

// Type is how an operation ended, as in Jepsen.
type Type string

const (
	// OK: it completed and the caller was told it happened.
	OK Type = "ok"
	// Fail: it completed with an answer that says nothing happened (bad
	// input, a loan not active).
	Fail Type = "fail"
	// Info: unknown — an error that may have come after the database
	// applied it, or no completion at all (the caller was killed).
	Info Type = "info"
)

// Op is one operation of one caller.
type Op struct {
	// Index is the operation's position in the history (Check sets it, in
	// order of invoke time).
	Index int `json:"index"`
	// ID identifies the operation within its log (Log sets it); the invoke
	// and completion lines of one operation share it.
	ID string `json:"id,omitempty"`
	// Process names the OS process the caller ran in; Via how it reached
	// the engine (engine: dispatch in-process, cli: the loanq binary).
	Process string `json:"process,omitempty"`
	Via     string `json:"via,omitempty"`
	// Caller is the user the caller acts as (loanq_work.user_name).
	Caller string `json:"caller"`
	Kind   Kind   `json:"kind"`
	Type   Type   `json:"type,omitempty"`

	Invoke     time.Time `json:"invoke"`
	Complete   time.Time `json:"complete,omitzero"` // zero: it never completed
	DBInvoke   time.Time `json:"db_invoke,omitzero"`
	DBComplete time.Time `json:"db_complete,omitzero"`

	Request int64    `json:"request,omitempty"`
	Count   int      `json:"count,omitempty"` // a get's --count; a disposition's loans in its call
	Status  string   `json:"status,omitempty"`
	Loans   []string `json:"loans,omitempty"`

	Loan    string        `json:"loan,omitempty"`
	Action  string        `json:"action,omitempty"`
	After   time.Duration `json:"after,omitempty"`
	Matches bool          `json:"matches,omitempty"`

	Err string `json:"err,omitempty"`
}

// completed reports whether the operation has a completion time.
func (o *Op) completed() bool { return !o.Complete.IsZero() }

// end is the completion time, or far in the future when there is none.
func (o *Op) end() time.Time {
	if o.Complete.IsZero() {
		return forever
	}
	return o.Complete
}

// touches reports whether the operation names the loan or the request.
func (o *Op) touches(loan string, request int64) bool {
	if loan != "" && (o.Loan == loan || slices.Contains(o.Loans, loan)) {
		return true
	}
	return request != 0 && o.Request == request
}

var forever = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// State is the database at the end of the run, for one task.
type State struct {
	// Read is the database clock when the state was read.
	Read     time.Time
	Work     []Work
	Requests []Request
	Loans    []Loan
}

// Work is a loanq_work row.
type Work struct {
	ID          int64     `json:"id"`
	Loan        string    `json:"loan"`
	User        string    `json:"user"`
	RequestID   int64     `json:"request_id"`
	AssignedAt  time.Time `json:"assigned_at"`
	Disposition string    `json:"disposition,omitempty"` // "": active
	DisposedAt  time.Time `json:"disposed_at,omitzero"`
	ReturnAt    time.Time `json:"return_at,omitzero"`
}

// Request is a loanq_work_request row.
type Request struct {
	ID        int64     `json:"id"`
	User      string    `json:"user"`
	Status    string    `json:"status"`
	Requested int       `json:"requested"`
	Assigned  int       `json:"assigned"`
	CreatedAt time.Time `json:"created_at,omitzero"`
	ServedAt  time.Time `json:"served_at,omitzero"`
}

// Loan is a row of the task's source: its key, its place in the task's
// priority order (0 first), and whether it matched the criteria when the
// run began and when it ended.
type Loan struct {
	Key            string `json:"key"`
	Rank           int    `json:"rank"`
	MatchedAtStart bool   `json:"matched_at_start"`
	Matches        bool   `json:"matches"`
}

// Log writes a history as JSON lines, one line when an operation is
// invoked and one when it completes, each written at once (no buffer) so
// that a process killed with SIGKILL leaves its invoked operations behind.
// It is safe for concurrent use.
type Log struct {
	mu   sync.Mutex
	w    io.Writer
	name string
	seq  int
	err  error
}

// NewLog returns a log writing to w; name prefixes the operation ids (a
// process's name).
func NewLog(w io.Writer, name string) *Log { return &Log{w: w, name: name} }

// Invoke records that op is invoked now (unless op.Invoke is set) and
// returns it, with its ID, for Complete.
func (l *Log) Invoke(op Op) *Op {
	l.mu.Lock()
	l.seq++
	op.ID = fmt.Sprintf("%s.%d", l.name, l.seq)
	l.mu.Unlock()
	if op.Process == "" {
		op.Process = l.name
	}
	if op.Invoke.IsZero() {
		op.Invoke = time.Now()
	}
	op.Type = ""
	l.write(op)
	return &op
}

// Complete records the operation's completion (now, unless op.Complete is
// set) with its type.
func (l *Log) Complete(op *Op, t Type) {
	if op.Complete.IsZero() {
		op.Complete = time.Now()
	}
	op.Type = t
	l.write(*op)
}

// Record writes an operation that is whole already (a kill).
func (l *Log) Record(op Op) {
	l.mu.Lock()
	l.seq++
	op.ID = fmt.Sprintf("%s.%d", l.name, l.seq)
	l.mu.Unlock()
	if op.Process == "" {
		op.Process = l.name
	}
	l.write(op)
}

// Err is the first write error.
func (l *Log) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *Log) write(op Op) {
	b, err := json.Marshal(op)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		_, err = l.w.Write(append(b, '\n'))
	}
	if err != nil && l.err == nil {
		l.err = err
	}
}

// ReadLog reads what Log wrote: an operation's completion line replaces its
// invoke line; an operation with no completion line is Info with no
// completion time (its caller was killed before it completed). A last line
// cut short (the writer killed in the middle of a write) is ignored.
func ReadLog(r io.Reader) ([]Op, error) {
	var out []Op
	at := map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	var cut error
	for line := 1; sc.Scan(); line++ {
		if cut != nil {
			return nil, cut // a bad line that was not the last
		}
		var op Op
		if err := json.Unmarshal(sc.Bytes(), &op); err != nil {
			cut = fmt.Errorf("history line %d: %w", line, err)
			continue
		}
		if i, ok := at[op.ID]; ok && op.ID != "" {
			out[i] = op
			continue
		}
		if op.ID != "" {
			at[op.ID] = len(out)
		}
		out = append(out, op)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].Type == "" {
			out[i].Type = Info
			out[i].Complete = time.Time{}
		}
	}
	return out, nil
}
