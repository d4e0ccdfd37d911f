package engineio

import (
	"database/sql"
)

// The parameters of the engine's statements (Statements), one type per
// shape of input; a feature's catalogue keeps its own beside it, and uses
// the plain ones here (NoParams, IDParams, TaskParams) where they fit. A
// field's bind tag is the name the statements write it as (:task_id); the
// order of the binds is the statement's business, so swapping two values
// of one type cannot happen by reordering arguments.

// NoParams is the parameters of a statement that binds nothing.
type NoParams struct{}

// IDParams is a row's id: a task, a request, an assignment (work row).
type IDParams struct {
	ID int64 `bind:"id"`
}

// TaskParams is a task's id.
type TaskParams struct {
	TaskID int64 `bind:"task_id"`
}

// NameParams is a task's or a named lock's name.
type NameParams struct {
	Name string `bind:"name"`
}

// MillisParams is a duration in milliseconds.
type MillisParams struct {
	MS int64 `bind:"ms"`
}

// SettingParams is a session setting's value, as read before changing it;
// nil where the dialect reads none (WaitLockSave empty): then the statement
// puts back the session's own value (PostgreSQL: set_config(…, NULL, true)
// is SET LOCAL … TO DEFAULT).
type SettingParams struct {
	Value any `bind:"value"`
}

// UserParams is a user name.
type UserParams struct {
	User string `bind:"user"`
}

// TaskUserParams is a task and one of its users.
type TaskUserParams struct {
	TaskID int64  `bind:"task_id"`
	User   string `bind:"user"`
}

// TaskLoanParams is a task and one of its loans.
type TaskLoanParams struct {
	TaskID int64  `bind:"task_id"`
	LoanID string `bind:"loan_id"`
}

// TaskWindowParams is a task and a time window ending now.
type TaskWindowParams struct {
	TaskID   int64 `bind:"task_id"`
	WindowMS int64 `bind:"window_ms"`
	Sample   int64 `bind:"sample"`
}

// IDUserParams is a row's id and the user it must belong to.
type IDUserParams struct {
	ID   int64  `bind:"id"`
	User string `bind:"user"`
}

// TaskInsertParams is a new task's definition.
type TaskInsertParams struct {
	Name         string        `bind:"name"`
	Source       string        `bind:"source"`
	Key          string        `bind:"key"`
	Criteria     string        `bind:"criteria"`
	Order        string        `bind:"order"`
	MaxActive    sql.NullInt64 `bind:"max_active"` // NULL: no cap
	LockStrategy string        `bind:"lock_strategy"`
	QueryDelayMS int64         `bind:"query_delay_ms"`
	LeaseTTLMS   int64         `bind:"lease_ttl_ms"`
	CreatedBy    string        `bind:"created_by"`
	HoldLimitMS  sql.NullInt64 `bind:"hold_limit_ms"` // NULL: derived from measured runs
	KeyKind      string        `bind:"key_kind"`      // integer, text or uuid
}

// TaskUpdateParams is a task's changed definition.
type TaskUpdateParams struct {
	ID           int64         `bind:"id"`
	Source       string        `bind:"source"`
	Key          string        `bind:"key"`
	Criteria     string        `bind:"criteria"`
	Order        string        `bind:"order"`
	MaxActive    sql.NullInt64 `bind:"max_active"` // NULL: no cap
	LockStrategy string        `bind:"lock_strategy"`
	QueryDelayMS int64         `bind:"query_delay_ms"`
	LeaseTTLMS   int64         `bind:"lease_ttl_ms"`
	HoldLimitMS  sql.NullInt64 `bind:"hold_limit_ms"` // NULL: derived
	MaxHoldMS    sql.NullInt64 `bind:"max_hold_ms"`   // NULL: never expires
	UpdatedBy    string        `bind:"updated_by"`
	KeyKind      string        `bind:"key_kind"` // integer, text or uuid
}

// TaskMaxHoldParams sets a task's max hold.
type TaskMaxHoldParams struct {
	ID        int64         `bind:"id"`
	MaxHoldMS sql.NullInt64 `bind:"max_hold_ms"` // NULL: never expires
}

// RequestInsertParams is a new work request.
type RequestInsertParams struct {
	TaskID    int64  `bind:"task_id"`
	User      string `bind:"user"`
	Requested int    `bind:"requested"`
}

// RequestFinishParams is a request's outcome.
type RequestFinishParams struct {
	ID       int64  `bind:"id"`
	Assigned int    `bind:"assigned"`
	Status   string `bind:"status"`
}

// LeaseTakeParams takes a task's lease for owner for ttl_ms.
type LeaseTakeParams struct {
	TaskID int64  `bind:"task_id"`
	Owner  string `bind:"owner"`
	TTLMS  int64  `bind:"ttl_ms"`
}

// LeaseOwnerParams is a task's lease holder.
type LeaseOwnerParams struct {
	TaskID int64  `bind:"task_id"`
	Owner  string `bind:"owner"`
}

// LeaseFenceParams is a lease holder and the fencing token it took.
type LeaseFenceParams struct {
	TaskID int64  `bind:"task_id"`
	Owner  string `bind:"owner"`
	Token  int64  `bind:"token"`
}

// LeaseRenewParams renews a held lease for ttl_ms.
type LeaseRenewParams struct {
	TaskID int64  `bind:"task_id"`
	Owner  string `bind:"owner"`
	Token  int64  `bind:"token"`
	TTLMS  int64  `bind:"ttl_ms"`
}

// LeaseTakeOverParams takes over the lease of a dead holder.
type LeaseTakeOverParams struct {
	TaskID    int64  `bind:"task_id"`
	Owner     string `bind:"owner"`
	TTLMS     int64  `bind:"ttl_ms"`
	DeadOwner string `bind:"dead_owner"`
}

// WorkInsertParams assigns a loan to a user for a request.
type WorkInsertParams struct {
	TaskID    int64  `bind:"task_id"`
	LoanID    string `bind:"loan_id"`
	User      string `bind:"user"`
	RequestID int64  `bind:"request_id"`
}

// RequestFinishManyParams is the outcome of a round's requests: a JSON array
// of [request id, assigned, status] arrays.
type RequestFinishManyParams struct {
	TaskID   int64  `bind:"task_id"`
	Outcomes string `bind:"outcomes"`
}

// WorkInsertManyParams assigns a batch of loans of one task: Assignments is
// a JSON array of [loan id, request id, user name] arrays, in assignment
// order.
type WorkInsertManyParams struct {
	TaskID      int64  `bind:"task_id"`
	Assignments string `bind:"assignments"`
}

// QueryRunParams is one logged criteria-query run.
type QueryRunParams struct {
	TaskID         int64  `bind:"task_id"`
	Strategy       string `bind:"strategy"`
	Holder         string `bind:"holder"`
	StartedAgoMS   int64  `bind:"started_ago_ms"` // the run started this long before the insert
	DurationMS     int64  `bind:"duration_ms"`
	RowsFound      int    `bind:"rows_found"`
	RequestsServed int    `bind:"requests_served"`
	LoansAssigned  int    `bind:"loans_assigned"`
	Pooled         int    `bind:"pooled"` // candidates the run put in the task's pool (0: none)
}

// DisposeLoanParams ends a user's active assignment of a loan in a task.
type DisposeLoanParams struct {
	TaskID        int64         `bind:"task_id"`
	LoanID        string        `bind:"loan_id"`
	User          string        `bind:"user"`
	Disposition   string        `bind:"disposition"`
	ReturnAfterMS sql.NullInt64 `bind:"return_after_ms"` // NULL unless return
	// Reason and Note: the disposition's reason code and note
	// (docs/reasons.md); NULL when not given.
	Reason sql.NullString `bind:"reason"`
	Note   sql.NullString `bind:"note"`
}

// DisposeLoansParams ends a user's active assignments of several loans of a
// task with one disposition: IDs is a JSON array of their keys as text
// (loankey.TextJSON), as loanq's loan_id columns hold them.
type DisposeLoansParams struct {
	TaskID        int64         `bind:"task_id"`
	IDs           string        `bind:"ids"`
	User          string        `bind:"user"`
	Disposition   string        `bind:"disposition"`
	ReturnAfterMS sql.NullInt64 `bind:"return_after_ms"` // NULL unless return
	// Reason and Note as in DisposeLoanParams.
	Reason sql.NullString `bind:"reason"`
	Note   sql.NullString `bind:"note"`
}

// PipelineParams is a user's pipeline, of one task or ("") of all.
type PipelineParams struct {
	User string `bind:"user"`
	Task string `bind:"task"`
}

// WorkExpireParams ends a task's work older than its max hold.
type WorkExpireParams struct {
	TaskID    int64 `bind:"task_id"`
	MaxHoldMS int64 `bind:"max_hold_ms"`
}

// WorkOlderParams selects a task's active work older than age_ms, of one
// user or ("") of all.
type WorkOlderParams struct {
	TaskID int64  `bind:"task_id"`
	User   string `bind:"user"`
	AgeMS  int64  `bind:"age_ms"`
}

// WorkReclaimParams ends one assignment on a supervisor's word.
type WorkReclaimParams struct {
	ID         int64  `bind:"id"`
	Supervisor string `bind:"supervisor"`
}

// HoldLimitParams bounds how long a session may hold the task lock.
type HoldLimitParams struct {
	IdleMS      int64 `bind:"idle_ms"`
	StatementMS int64 `bind:"statement_ms"`
}

// CriteriaParams are the binds of a task's criteria query.
type CriteriaParams struct {
	TaskID int64 `bind:"task_id"`
	Limit  int   `bind:"limit"`
}

// ClaimParams binds the rows claim's insert of the keys it locked: the task,
// who gets them for which request, and the keys as a JSON array text.
type ClaimParams struct {
	TaskID    int64  `bind:"task_id"`
	User      string `bind:"user"`
	RequestID int64  `bind:"request_id"`
	IDs       string `bind:"ids"`
}

// FinishingClaimParams binds FinishingClaimer's statement: CriteriaClaim's
// binds, the outcome the claim expects (every locked key assigned: Assigned
// of them, Status by the engine's status rule), and the run's log entry.
type FinishingClaimParams struct {
	TaskID       int64  `bind:"task_id"`
	User         string `bind:"user"`
	RequestID    int64  `bind:"request_id"`
	IDs          string `bind:"ids"`
	Assigned     int    `bind:"assigned"`
	Status       string `bind:"status"`
	Holder       string `bind:"holder"`
	StartedAgoMS int64  `bind:"started_ago_ms"`
	DurationMS   int64  `bind:"duration_ms"`
	RowsFound    int    `bind:"rows_found"`
}

// RecheckParams binds the criteria query over given keys: the task id and
// the keys as a JSON array text (loankey.JSON: "[3,7,9]", "["a","b"]").
type RecheckParams struct {
	TaskID int64  `bind:"task_id"`
	IDs    string `bind:"ids"`
}

// TaskPrefetchParams sets a task's candidate pool (NULLs: no pool).
type TaskPrefetchParams struct {
	ID       int64         `bind:"id"`
	Prefetch sql.NullInt64 `bind:"prefetch"`
	TTLMS    sql.NullInt64 `bind:"ttl_ms"`
	Low      sql.NullInt64 `bind:"low"`
}

// PoolClaimParams claims up to Limit fresh candidates of a task's pool.
type PoolClaimParams struct {
	TaskID int64 `bind:"task_id"`
	TTLMS  int64 `bind:"ttl_ms"`
	Limit  int   `bind:"limit"`
}

// PoolIDsParams names candidates of a task's pool by key (a JSON array).
type PoolIDsParams struct {
	TaskID int64  `bind:"task_id"`
	IDs    string `bind:"ids"`
}

// PoolFillParams puts candidates in a task's pool: a JSON array of
// [loan_id, 0, ""] in criteria order, placed after Offset.
type PoolFillParams struct {
	TaskID     int64  `bind:"task_id"`
	Offset     int    `bind:"offset"`
	Candidates string `bind:"candidates"`
}

// TaskTTLParams is a task and its pool's time to live.
type TaskTTLParams struct {
	TaskID int64 `bind:"task_id"`
	TTLMS  int64 `bind:"ttl_ms"`
}
