package engineio

import (
	"database/sql"
	"fmt"
	"time"
)

// The row types of the engine's statements that return rows (Query[P, R]):
// one field per column, in the statement's order, each tagged with the
// column's output name. Build checks every dialect's text against them. A
// feature's catalogue keeps its own beside it, and uses the plain ones here
// (Count, IDRow, KeyRow) where they fit.

// UserCountRow is a count for one user.
type UserCountRow struct {
	User string `col:"user_name"`
	N    int64  `col:"n"`
}

// Count is the row of a statement that answers one number.
type Count struct {
	N int64 `col:"n"`
}

// IDRow is one id: a lock statement's task row, a request, a batch's ids.
type IDRow struct {
	ID int64 `col:"id"`
}

// KeyRow is one loan key as loanq's tables hold it (text).
type KeyRow struct {
	LoanID string `col:"loan_id"`
}

// NowRow is the database clock.
type NowRow struct {
	Now Time `col:"db_now"`
}

// TaskRow is a task's definition (TaskByName, TaskByID, TaskList).
type TaskRow struct {
	ID            int64          `col:"id"`
	Name          string         `col:"name"`
	Source        string         `col:"source_table"`
	Key           string         `col:"key_column"`
	Criteria      string         `col:"criteria"`
	Order         sql.NullString `col:"order_by"` // NULL on Oracle for ""
	MaxActive     sql.NullInt64  `col:"max_active"`
	Lock          string         `col:"lock_strategy"`
	DelayMS       int64          `col:"query_delay_ms"`
	LeaseMS       int64          `col:"lease_ttl_ms"`
	CreatedBy     string         `col:"created_by"`
	CreatedAt     Time           `col:"created_at"`
	HoldMS        sql.NullInt64  `col:"hold_limit_ms"`
	MaxHoldMS     sql.NullInt64  `col:"max_hold_ms"`
	Prefetch      sql.NullInt64  `col:"prefetch"`
	PrefetchTTLMS sql.NullInt64  `col:"prefetch_ttl_ms"`
	PrefetchLow   sql.NullInt64  `col:"prefetch_low"`
	KeyKind       sql.NullString `col:"key_kind"`
	// Priority, ShowColumns, LinkTemplate: what work next orders by and
	// what is shown with each loan (dispatch/details.go).
	Priority     int64          `col:"priority"`
	ShowColumns  sql.NullString `col:"show_columns"`
	LinkTemplate sql.NullString `col:"link_template"`
	AllowN       int64          `col:"allow_n"`     // --allow entries (0: everyone may work it)
	FourEyesN    int64          `col:"four_eyes_n"` // --not-worked-in tasks
}

// RunRow is one criteria-query run of the log (TaskRuns).
type RunRow struct {
	ID             int64  `col:"id"`
	Strategy       string `col:"strategy"`
	Holder         string `col:"holder"`
	StartedAt      Time   `col:"started_at"`
	DurationMS     int64  `col:"duration_ms"`
	RowsFound      int    `col:"rows_found"`
	RequestsServed int    `col:"requests_served"`
	LoansAssigned  int    `col:"loans_assigned"`
}

// PendingRow is a pending request (RequestsPending).
type PendingRow struct {
	ID        int64  `col:"id"`
	User      string `col:"user_name"`
	Requested int    `col:"requested"`
	CreatedAt Time   `col:"created_at"`
}

// RequestLoanRow is a request with one of its loans (RequestWithLoans; a
// NULL loan when it has none).
type RequestLoanRow struct {
	ID        int64          `col:"id"`
	TaskID    int64          `col:"task_id"`
	Task      string         `col:"name"`
	User      string         `col:"user_name"`
	Requested int            `col:"requested"`
	Assigned  int            `col:"assigned"`
	Status    string         `col:"status"`
	CreatedAt Time           `col:"created_at"`
	LoanID    sql.NullString `col:"loan_id"`
	KeyKind   sql.NullString `col:"key_kind"`
}

// RequestRow is a request (RequestByID).
type RequestRow struct {
	ID        int64  `col:"id"`
	TaskID    int64  `col:"task_id"`
	Task      string `col:"name"`
	User      string `col:"user_name"`
	Requested int    `col:"requested"`
	Assigned  int    `col:"assigned"`
	Status    string `col:"status"`
	CreatedAt Time   `col:"created_at"`
	ServedAt  Time   `col:"served_at"`
}

// FinishingClaimRow is a loan a finishing claim assigned, in order, with
// its request's creation time (FinishingClaimer).
type FinishingClaimRow struct {
	LoanID    string `col:"loan_id"`
	CreatedAt Time   `col:"created_at"`
}

// TokenRow is a lease's fencing token.
type TokenRow struct {
	Token int64 `col:"lease_token"`
}

// OwnerRow is a lease's holder.
type OwnerRow struct {
	Owner string `col:"lease_owner"`
}

// TaskIDRow is a per-user cap lock row (UserLock).
type TaskIDRow struct {
	TaskID int64 `col:"task_id"`
}

// ActiveWorkRow is a loan's active assignment.
type ActiveWorkRow struct {
	ID   int64  `col:"id"`
	User string `col:"user_name"`
}

// AssigneeRow is an active loan of a task and who holds it.
type AssigneeRow struct {
	LoanID string `col:"loan_id"`
	User   string `col:"user_name"`
}

// LastWorkRow is a loan's latest assignment.
type LastWorkRow struct {
	Disposition sql.NullString `col:"disposition"`
	User        string         `col:"user_name"`
}

// PipelineRow is one loan of a user's pipeline.
type PipelineRow struct {
	Task       string `col:"name"`
	LoanID     string `col:"loan_id"`
	AssignedAt Time   `col:"assigned_at"`
	KeyKind    string `col:"key_kind"`
	// DBNow is the database clock when the pipeline was read: an age is
	// DBNow - AssignedAt, both the database's.
	DBNow Time `col:"db_now"`
}

// WakeRow is what a waiting caller reads (RequestWake): its request's
// status, the lease's owner, 1 when no unexpired lease holds the task.
type WakeRow struct {
	Status    string         `col:"status"`
	Owner     sql.NullString `col:"lease_owner"`
	LeaseFree int64          `col:"lease_free"`
}

// SettingRow is a session setting's value as the database returns it.
type SettingRow struct {
	Value any `col:"setting"`
}

// RecentRunsRow is the task's ten latest criteria-query runs: how many, and
// their mean duration.
type RecentRunsRow struct {
	Runs   int64 `col:"runs"`
	MeanMS int64 `col:"mean_ms"`
}

// TaskLoadRow is what a serving round reads of its task (TaskLoad).
type TaskLoadRow struct {
	Requests int64         `col:"requests"`
	Need     int64         `col:"need"`
	Loans    int64         `col:"loans"`
	Arrivals int64         `col:"arrivals"`
	SpanMS   int64         `col:"span_ms"`
	Runs     int64         `col:"runs"`
	MeanMS   int64         `col:"mean_ms"`
	MaxMS    sql.NullInt64 `col:"max_ms"`
}

// MaxMSRow is a longest duration (NULL: none).
type MaxMSRow struct {
	MaxMS sql.NullInt64 `col:"max_ms"`
}

// VerdictRow is a task's lock probe verdict (NULL: none).
type VerdictRow struct {
	Verdict sql.NullString `col:"lock_verdict"`
}

// WorkOlderRow is one active assignment older than an age.
type WorkOlderRow struct {
	ID         int64  `col:"id"`
	LoanID     string `col:"loan_id"`
	User       string `col:"user_name"`
	AssignedAt Time   `col:"assigned_at"`
	AgeS       int64  `col:"age_s"`
}

// PoolStatsRow is a task's pool: fresh candidates, the oldest's age (NULL:
// none), requests served from it, runs that refilled it.
type PoolStatsRow struct {
	Fresh   int           `col:"fresh"`
	AgeS    sql.NullInt64 `col:"age_s"`
	Hits    int64         `col:"hits"`
	Refills int64         `col:"refills"`
}

// IdentityRow is the connection's account, 1 when it may act as the user,
// and the user an admin mapped to the account (NULL: none).
type IdentityRow struct {
	Account string         `col:"account_name"`
	MayAct  int64          `col:"may_act"`
	Mapped  sql.NullString `col:"mapped"`
}

// Time scans a timestamp column as any driver returns it (time.Time from
// pgx, MySQL with parseTime and godror; ISO text from SQLite) as UTC time;
// NULL is the zero time.
type Time struct{ T time.Time }

// Scan implements sql.Scanner.
func (t *Time) Scan(v any) error {
	var err error
	t.T, err = AsTime(v)
	return err
}

// AsTime converts what a driver returns for a timestamp column to UTC time;
// nil gives the zero time.
func AsTime(v any) (time.Time, error) {
	switch t := v.(type) {
	case nil:
		return time.Time{}, nil
	case time.Time:
		return t.UTC(), nil
	case []byte:
		return parseTimeText(string(t))
	case string:
		return parseTimeText(t)
	}
	return time.Time{}, fmt.Errorf("unexpected time value %T", v)
}

func parseTimeText(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.000Z", "2006-01-02 15:04:05.999999999", "2006-01-02 15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("unrecognised time %q", s)
}

// IDs returns the ids of rows in order; err is the error of the query that
// returned them (passed through).
func IDs(rows []IDRow, err error) ([]int64, error) {
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out, nil
}

// LoanIDs returns the loan keys of rows in order; err is the error of the
// query that returned them (passed through).
func LoanIDs(rows []KeyRow, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.LoanID
	}
	return out, nil
}
