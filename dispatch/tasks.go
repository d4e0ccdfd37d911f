package dispatch

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/loanq/loanq/loankey"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/internal/sqllex"
	"github.com/loanq/loanq/internal/suggest"
	"github.com/loanq/loanq/internal/textsafe"
	"github.com/loanq/loanq/problem"
)

// Task is a queue: a criteria query over a table or view of loans, a priority
// order, and how its lock is taken. It has no JSON form of its own: the
// commands and the API print jsondoc.Task, the contract of docs/json.md.
type Task struct {
	ID         int64
	Name       string
	Source     string
	Key        string
	Where      string
	Order      string
	MaxActive  int // 0: no cap
	Lock       drivers.Strategy
	QueryDelay time.Duration
	LeaseTTL   time.Duration
	// HoldLimit bounds how long a caller may hold the task's row lock before
	// the database ends its session; 0: derived from the measured criteria
	// time (see holdLimit).
	HoldLimit time.Duration
	// MaxHold is the age past which active work of the task is returned to
	// the queue ('expired') by the engine while it serves; 0: never.
	// Not HoldLimit: that bounds the task LOCK, this the WORK.
	MaxHold time.Duration
	// Prefetch is the size of the task's candidate pool (0: no pool),
	// PrefetchTTL how long a candidate stays claimable, PrefetchLow the size
	// under which refreshers refill it (docs/algorithm.md, "The candidate
	// pool").
	Prefetch    int
	PrefetchTTL time.Duration
	PrefetchLow int
	CreatedBy   string
	CreatedAt   time.Time
	// KeyKind is the kind of the key column (integer, text or uuid),
	// detected at task create (keyKind) and kept in loanq_task.key_kind:
	// how keys are parsed, bound and shown.
	KeyKind loankey.Kind
	// Priority, Show, Link: work next's order (higher first), the source
	// columns shown with each loan and the link to it (details.go).
	Priority int
	Show     []string
	Link     string
	// Restricted: the task has an allow list (--allow); FourEyes: it names
	// tasks with --not-worked-in (docs/governance.md, governance.go).
	Restricted bool
	FourEyes   bool
}

func (t *Task) criteria() drivers.CriteriaSource {
	return drivers.CriteriaSource{Source: t.Source, Key: t.Key, Where: t.Where, Order: t.Order, Kind: t.KeyKind}
}

// taskRef is what the engine remembers of a task by name (Engine.taskIDs).
type taskRef struct {
	id   int64
	kind loankey.Kind
}

// key is a loan key of the task as shown (a JSON number for an integer
// task, a string otherwise).
func (t *Task) key(text string) loankey.Key { return loankey.New(t.KeyKind, text) }

// sameDefinition is what --if-not-exists compares.
func (t *Task) sameDefinition(o *Task) bool {
	return t.Source == o.Source && t.Key == o.Key && t.Where == o.Where && t.Order == o.Order &&
		t.MaxActive == o.MaxActive && t.Lock == o.Lock && t.QueryDelay == o.QueryDelay && t.LeaseTTL == o.LeaseTTL &&
		t.HoldLimit == o.HoldLimit && t.MaxHold == o.MaxHold &&
		t.Prefetch == o.Prefetch && t.PrefetchTTL == o.PrefetchTTL && t.PrefetchLow == o.PrefetchLow &&
		t.Priority == o.Priority && strings.Join(t.Show, ",") == strings.Join(o.Show, ",") && t.Link == o.Link
}

var (
	taskNameRE   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`) })
	identifierRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$#]{0,63}(\.[A-Za-z_][A-Za-z0-9_$#]{0,63})?$`)
	})
)

// ValidateTaskName checks a task name given on the command line.
func ValidateTaskName(name string) error {
	if pos, r, ok := textsafe.FirstUnsafe(name, false); ok {
		return problem.Usagef("invalid task name %s: character %d is %s, a control or invisible character; use 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit",
			quote(name), pos, textsafe.CharName(r))
	}
	if !taskNameRE().MatchString(name) {
		return problem.Usagef("invalid task name %q: use 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	}
	return nil
}

// DefaultLeaseTTL is how long a lease lasts when the task does not say. The
// holder renews it every TTL/3 while it works, so a query may run far longer;
// the TTL is how long a crashed holder on another host blocks the task (one
// on this host is taken over at once: docs/algorithm.md).
const DefaultLeaseTTL = 15 * time.Second

// TaskSpec is the input of CreateTask.
type TaskSpec struct {
	Name       string
	Source     string
	Key        string
	Where      string
	Order      string
	MaxActive  int
	Lock       drivers.Strategy // "" for the driver's default
	QueryDelay time.Duration
	LeaseTTL   time.Duration // 0 for DefaultLeaseTTL
	HoldLimit  time.Duration // 0: derived from the measured criteria time
	MaxHold    time.Duration // 0: active work never expires
	// Prefetch, PrefetchTTL, PrefetchLow: the candidate pool (0: none;
	// defaults DefaultPrefetchTTL and Prefetch/4).
	Prefetch    int
	PrefetchTTL time.Duration
	PrefetchLow int
	CreatedBy   string
	// IfNotExists makes a re-run with an identical definition a no-op.
	IfNotExists bool
	// AllowWideLocks keeps a rows task whose claim locks more than
	// WideLocks times the rows it returns (rows.go, checkLockable).
	AllowWideLocks bool
	// Priority, Show, Link: as Task's (details.go).
	Priority int
	Show     []string
	Link     string
	// Governance: who may work the task, its four-eyes rule (governance.go).
	Governance GovernanceChange
	// MaxHoldDefault says MaxHold is DefaultMaxHold because none was given:
	// --if-not-exists then accepts an existing task whatever its max hold
	// (a task created before the default keeps its setting).
	MaxHoldDefault bool
	// Reasons: the task's reason codes (docs/reasons.md).
	Reasons Reasons
}

// DefaultMaxHold is task create's --max-hold when none is given
// (docs/abandoned-work.md): longer than a weekend away (Friday evening to
// Monday morning is 64 h), short enough that the work of someone who left
// returns within three days. Tasks created before it keep their setting.
const DefaultMaxHold = 72 * time.Hour

// Check checks what can be checked of a task's definition without a
// database, and fills in the defaults (source loan, key id, the lease
// TTL): commands call it before they connect, so bad input is refused the
// same way whether or not the database is reachable. CreateTask checks
// again, and then what depends on the database (the criteria's syntax in
// its dialect, the strategy, the creator's name).
func (s *TaskSpec) Check() error {
	if err := ValidateTaskName(s.Name); err != nil {
		return err
	}
	if s.Source == "" {
		s.Source = "loan"
	}
	if s.Key == "" {
		s.Key = "id"
	}
	if err := checkSource(s.Source); err != nil {
		return err
	}
	if err := checkKey(s.Key); err != nil {
		return err
	}
	s.Where = strings.TrimSpace(s.Where)
	s.Order = strings.TrimSpace(s.Order)
	if s.Where == "" {
		return problem.Usagef("--where is required: the SQL condition that selects the task's loans (e.g. --where \"statements_submitted = 1 AND statements_verified = 0\")")
	}
	if err := checkMaxActive(s.MaxActive); err != nil {
		return err
	}
	if err := checkQueryDelay(s.QueryDelay); err != nil {
		return err
	}
	if s.LeaseTTL == 0 {
		s.LeaseTTL = DefaultLeaseTTL
	}
	if err := checkLeaseTTL(s.LeaseTTL); err != nil {
		return err
	}
	if err := validateHoldLimit(s.HoldLimit, s.QueryDelay); err != nil {
		return err
	}
	if err := validatePrefetch(&s.Prefetch, &s.PrefetchTTL, &s.PrefetchLow); err != nil {
		return err
	}
	if err := s.checkDisplay(); err != nil { // details.go
		return err
	}
	if err := s.Governance.Check(); err != nil {
		return err
	}
	return validateMaxHold(s.MaxHold)
}

// The checks of one setting each, shared by TaskSpec.Check and
// TaskChange.Check.

func checkSource(source string) error {
	if !identifierRE().MatchString(source) {
		return problem.Usagef("invalid --source %q: give a table or view name, optionally schema-qualified (e.g. loan or app.loan_view)", source)
	}
	return nil
}

func checkKey(key string) error {
	if !identifierRE().MatchString(key) || strings.Contains(key, ".") {
		return problem.Usagef("invalid --key %q: give the column that holds the loan id (e.g. id)", key)
	}
	return nil
}

func checkMaxActive(n int) error {
	if n < 0 {
		return problem.Usagef("invalid --max-active %d: give a positive cap, or 0 for none", n)
	}
	return nil
}

func checkQueryDelay(d time.Duration) error {
	if d < 0 || d > MaxQueryDelay {
		return problem.Usagef("invalid --query-delay %s: give a duration between 0s and %s", d, MaxQueryDelay)
	}
	return nil
}

func checkLeaseTTL(d time.Duration) error {
	if d < time.Second || d > 24*time.Hour {
		return problem.Usagef("invalid --lease-ttl %s: give a duration between 1s and 24h", d)
	}
	return nil
}

// validateSpec is Check and what depends on the engine's database.
func (a *Admin) validateSpec(s *TaskSpec) error {
	if err := s.Check(); err != nil {
		return err
	}
	syntax := sqllex.For(a.driver)
	if err := validateCriteriaText("where", s.Where, syntax); err != nil {
		return err
	}
	if err := validateCriteriaText("order", s.Order, syntax); err != nil {
		return err
	}
	if err := validateUser(s.CreatedBy); err != nil {
		return err
	}
	if s.Lock == "" {
		s.Lock = a.driver.Capabilities().Strategies[0]
	}
	if !drivers.Supports(a.driver, s.Lock) {
		return problem.Usagef("lock strategy %q is not available on %s: use one of %s", s.Lock, a.driver.Name(), strategyList(a.driver))
	}
	return nil
}

func strategyList(d drivers.Driver) string {
	var out []string
	for _, s := range d.Capabilities().Strategies {
		out = append(out, string(s))
	}
	return strings.Join(out, ", ")
}

// CreateTask checks the criteria against the database, then stores the task.
// It returns the task and whether it was created (false: an identical task
// existed and IfNotExists was set).
func (a *Admin) CreateTask(ctx context.Context, s TaskSpec) (*Task, bool, error) {
	if err := a.validateSpec(&s); err != nil {
		return nil, false, err
	}
	want := &Task{Name: s.Name, Source: s.Source, Key: s.Key, Where: s.Where, Order: s.Order,
		MaxActive: s.MaxActive, Lock: s.Lock, QueryDelay: s.QueryDelay, LeaseTTL: s.LeaseTTL, HoldLimit: s.HoldLimit, MaxHold: s.MaxHold,
		Prefetch: s.Prefetch, PrefetchTTL: s.PrefetchTTL, PrefetchLow: s.PrefetchLow,
		Priority: s.Priority, Show: s.Show, Link: s.Link}
	existing, err := a.taskByName(ctx, s.Name)
	if err != nil && problem.KindOf(err) != problem.Usage {
		return nil, false, err
	}
	if existing != nil && s.MaxHoldDefault {
		want.MaxHold = existing.MaxHold
	}
	if existing != nil {
		return a.existingTask(existing, want, s.IfNotExists)
	}
	if err := a.checkCriteria(ctx, want); err != nil {
		return nil, false, err
	}
	if err := a.checkDetails(ctx, want); err != nil { // details.go
		return nil, false, err
	}
	verdict := ""
	if s.Lock == drivers.Rows {
		if verdict, err = a.checkLockable(ctx, want, s.AllowWideLocks); err != nil {
			return nil, false, err
		}
	}
	id, err := a.insertTask(ctx, s, want.KeyKind)
	if err != nil {
		if a.driver.IsUniqueViolation(err) { // created by someone else in the meantime
			if existing, err2 := a.taskByName(ctx, s.Name); err2 == nil {
				if s.MaxHoldDefault {
					want.MaxHold = existing.MaxHold
				}
				return a.existingTask(existing, want, s.IfNotExists)
			}
		}
		return nil, false, fmt.Errorf("storing task %s: %w", s.Name, err)
	}
	if err := a.keepVerdict(ctx, id, verdict); err != nil { // rows.go
		return nil, false, err
	}
	t, err := a.taskByID(ctx, id)
	return t, true, err
}

// insertTask stores the task and its --max-hold in one transaction.
func (a *Admin) insertTask(ctx context.Context, s TaskSpec, kind loankey.Kind) (int64, error) {
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	id, err := a.sql().TaskInsert.InsertID(ctx, tx, engineio.TaskInsertParams{Name: s.Name, Source: s.Source, Key: s.Key,
		Criteria: s.Where, Order: s.Order, MaxActive: positive(int64(s.MaxActive)), LockStrategy: string(s.Lock),
		QueryDelayMS: s.QueryDelay.Milliseconds(), LeaseTTLMS: s.LeaseTTL.Milliseconds(), CreatedBy: s.CreatedBy,
		HoldLimitMS: positive(s.HoldLimit.Milliseconds()), KeyKind: kind.String()})
	if err != nil {
		return 0, err
	}
	if s.MaxHold > 0 {
		if _, err := a.sql().TaskSetMaxHold.Exec(ctx, tx, engineio.TaskMaxHoldParams{MaxHoldMS: positive(s.MaxHold.Milliseconds()), ID: id}); err != nil {
			return 0, err
		}
	}
	if !s.Reasons.Empty() {
		if err := a.writeReasons(ctx, tx, id, s.Reasons); err != nil {
			return 0, err
		}
	}
	if s.Prefetch > 0 {
		size, ttl, low := prefetchValues(s.Prefetch, s.PrefetchTTL, s.PrefetchLow)
		if _, err := a.sql().TaskSetPrefetch.Exec(ctx, tx, engineio.TaskPrefetchParams{ID: id, Prefetch: size, TTLMS: ttl, Low: low}); err != nil {
			return 0, err
		}
	}
	if err := a.storeDisplay(ctx, tx, id, s.Priority, s.Show, s.Link); err != nil { // details.go
		return 0, err
	}
	if err := a.applyGovernance(ctx, tx, id, s.Name, s.Governance); err != nil { // governance.go
		return 0, err
	}
	return id, tx.Commit()
}

func (a *Admin) existingTask(existing, want *Task, ifNotExists bool) (*Task, bool, error) {
	if !ifNotExists {
		return nil, false, &problem.Error{Kind: problem.Usage, Msg: fmt.Sprintf("task %q already exists", want.Name),
			Hint: "pick another name, or add --if-not-exists to accept an identical existing task"}
	}
	if !existing.sameDefinition(want) {
		return nil, false, &problem.Error{Kind: problem.Usage,
			Msg:  fmt.Sprintf("task %q already exists with a different definition", want.Name),
			Hint: "`loanq task show " + want.Name + "` shows it; choose another name"}
	}
	return existing, false, nil
}

// checkCriteria runs the criteria query once (limit 1) in a transaction that is
// rolled back: a bad column or a syntax error comes back as bad input, with the
// database's own message, before anything is stored. It sets t.KeyKind from
// the key column's type (keyKind).
func (a *Admin) checkCriteria(ctx context.Context, t *Task) error {
	kind, err := a.keyKind(ctx, t)
	if err != nil {
		return err
	}
	// Unknown until the rows say: the criteria read as text in any case.
	t.KeyKind = kind
	if kind == loankey.Unknown {
		t.KeyKind = loankey.Text
	}
	tx, err := a.db.BeginTx(ctx, a.driver.ReadTxOptions())
	if err != nil {
		return fmt.Errorf("checking the criteria: %w", err)
	}
	defer tx.Rollback()
	rows, err := drivers.CriteriaQuery(a.driver.Dialect(), t.criteria()).Query(ctx, tx, engineio.CriteriaParams{TaskID: 0, Limit: keySample})
	if err != nil {
		return &problem.Error{Kind: problem.Usage, Msg: fmt.Sprintf("the criteria of task %q do not run on %s", t.Name, a.driver.Name()), Err: err,
			Hint: "check --where, --order, --source and --key against the table"}
	}
	defer rows.Close()
	integers := true
	for rows.Next() {
		var key string
		if err := rows.Scan(&key); err != nil {
			return &problem.Error{Kind: problem.Usage, Msg: fmt.Sprintf("the key column %s of %s cannot be read as a loan key", t.Key, t.Source), Err: err,
				Hint: "give --key " + loankey.SupportedTypes}
		}
		if err := checkKeyLength(t, key); err != nil {
			return err
		}
		if _, err := strconv.ParseInt(key, 10, 64); err != nil {
			integers = false
		}
	}
	if err := rows.Err(); err != nil {
		return &problem.Error{Kind: problem.Usage, Msg: fmt.Sprintf("the criteria of task %q fail on %s", t.Name, a.driver.Name()), Err: err}
	}
	if kind == loankey.Unknown {
		// A column whose type does not tell (a computed view column, an
		// SQLite column without a declared type, an Oracle NUMBER without a
		// scale): integer keys when its first rows are all 64-bit integers
		// (an empty source too: what such a column usually holds), else text.
		t.KeyKind = loankey.Text
		if integers {
			t.KeyKind = loankey.Integer
		}
	}
	return nil
}

// keySample is how many of the criteria query's rows decide the kind of a
// key column whose type does not tell.
const keySample = 100

// keyKind reads the kind of the key column from a probe that returns no
// row (drivers.SourceProbe, drivers.KeyKindOf; a driver may know better from
// its catalogue: drivers.KeyDescriber) and refuses a type loanq does not
// take as a key (floating point, dates, binary): a float key would
// compare by its text, and a date's text depends on the session. A probe that
// fails (no such table or column) is left to the criteria query, whose
// message names the problem. Outside the criteria check's transaction: a
// failed statement would abort it on PostgreSQL.
func (a *Admin) keyKind(ctx context.Context, t *Task) (loankey.Kind, error) {
	rows, err := drivers.SourceProbe(a.driver.Dialect(), t.criteria()).Query(ctx, a.db, engineio.NoParams{})
	if err != nil {
		return loankey.Unknown, nil
	}
	cts, err := rows.ColumnTypes()
	rows.Close()
	if err != nil || len(cts) != 1 {
		return loankey.Unknown, nil
	}
	kind := drivers.KeyKindOf(a.driver, cts[0])
	if kd, ok := a.driver.(drivers.KeyDescriber); ok && kind != loankey.Other {
		if k, err := kd.DescribeKey(ctx, a.db, t.criteria()); err == nil && k != loankey.Unknown {
			kind = k
		}
	}
	if kind != loankey.Other {
		return kind, nil
	}
	return kind, &problem.Error{Kind: problem.Usage,
		Msg:  fmt.Sprintf("the key column %s of %s is of type %s: a loan key must be %s", t.Key, t.Source, typeName(cts[0]), loankey.SupportedTypes),
		Hint: "give --key such a column, or a view over the table that maps each row to one"}
}

func typeName(ct *sql.ColumnType) string {
	if n := ct.DatabaseTypeName(); n != "" {
		return n
	}
	return "not integer, text or UUID"
}

// runnable re-checks a task's criteria as read from the database before
// they are run for a caller (storedCriteria).
func (e *Engine) runnable(t *Task) error {
	return storedCriteria(t, sqllex.For(e.driver))
}

// scanTask makes a task of its row (TaskByName, TaskByID, TaskList); err is
// the read's (passed through).
func (st *store) scanTask(r engineio.TaskRow, err error) (*Task, error) {
	if err != nil {
		return nil, err
	}
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	return &Task{ID: r.ID, Name: r.Name, Source: r.Source, Key: r.Key, Where: r.Criteria,
		// order_by is NULL on Oracle for a task without --order: Oracle
		// stores the empty string as NULL.
		Order:     r.Order.String,
		MaxActive: int(r.MaxActive.Int64), Lock: drivers.Strategy(r.Lock),
		QueryDelay: ms(r.DelayMS), LeaseTTL: ms(r.LeaseMS), CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt.T,
		HoldLimit: ms(r.HoldMS.Int64), MaxHold: ms(r.MaxHoldMS.Int64),
		Prefetch: int(r.Prefetch.Int64), PrefetchTTL: ms(r.PrefetchTTLMS.Int64), PrefetchLow: int(r.PrefetchLow.Int64),
		KeyKind:  loankey.ParseKind(r.KeyKind.String),
		Priority: int(r.Priority), Show: splitShow(r.ShowColumns.String), Link: r.LinkTemplate.String,
		Restricted: r.AllowN > 0, FourEyes: r.FourEyesN > 0}, nil
}

// Task returns a task by name; an unknown name is bad input.
func (st *store) Task(ctx context.Context, name string) (*Task, error) {
	if err := ValidateTaskName(name); err != nil {
		return nil, err
	}
	return st.taskByName(ctx, name)
}

func (st *store) taskByName(ctx context.Context, name string) (*Task, error) {
	t, err := st.scanTask(st.sql().TaskByName.One(ctx, st.db, engineio.NameParams{Name: name}))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, &problem.Error{Kind: problem.Usage, Msg: fmt.Sprintf("unknown task %q", name), Hint: st.taskHint(ctx, name)}
	}
	if err != nil {
		return nil, fmt.Errorf("reading task %s: %w", name, err)
	}
	st.taskIDs.Store(t.Name, taskRef{id: t.ID, kind: t.KeyKind})
	return t, nil
}

// taskHint says which task an unknown name was probably meant to be ("did
// you mean `intake-docs`?"), read from the task list; when none is close or
// the list cannot be read, where to look.
func (st *store) taskHint(ctx context.Context, name string) string {
	const look = "`loanq task list` shows the tasks"
	tasks, err := st.Tasks(ctx)
	if err != nil {
		return look
	}
	names := make([]string, len(tasks))
	for i, t := range tasks {
		names[i] = t.Name
	}
	if close := suggest.Close(name, names); len(close) > 0 {
		return "did you mean `" + strings.Join(close, "` or `") + "`? " + look
	}
	return look
}

func (st *store) taskByID(ctx context.Context, id int64) (*Task, error) {
	t, err := st.scanTask(st.sql().TaskByID.One(ctx, st.db, engineio.IDParams{ID: id}))
	if err != nil {
		return nil, fmt.Errorf("reading task %d: %w", id, err)
	}
	return t, nil
}

// Tasks lists every task by name.
func (st *store) Tasks(ctx context.Context) ([]*Task, error) {
	rows, err := st.sql().TaskList.All(ctx, st.db, engineio.NoParams{})
	if err != nil {
		return nil, fmt.Errorf("listing tasks: %w", err)
	}
	var out []*Task
	for _, r := range rows {
		t, _ := st.scanTask(r, nil)
		out = append(out, t)
	}
	return out, nil
}

// QueryRun is one logged run of a task's criteria query.
type QueryRun struct {
	ID             int64     `json:"id"`
	Strategy       string    `json:"strategy"`
	Holder         string    `json:"holder"`
	StartedAt      time.Time `json:"started_at"`
	DurationMS     int64     `json:"duration_ms"`
	RowsFound      int       `json:"rows_found"`
	RequestsServed int       `json:"requests_served"`
	LoansAssigned  int       `json:"loans_assigned"`

	// started is when the run started, by this process's monotonic clock.
	// QueryRunInsert stores as started_at the database clock minus the
	// time since, so the start is on the database clock without a
	// statement to read it.
	started time.Time
}

// Runs returns the latest criteria-query runs of a task, newest first.
func (a *Admin) Runs(ctx context.Context, t *Task) ([]QueryRun, error) {
	rows, err := a.sql().TaskRuns.All(ctx, a.db, engineio.TaskParams{TaskID: t.ID})
	if err != nil {
		return nil, fmt.Errorf("reading the runs of task %s: %w", t.Name, err)
	}
	var out []QueryRun
	for _, r := range rows {
		out = append(out, QueryRun{ID: r.ID, Strategy: r.Strategy, Holder: r.Holder, StartedAt: r.StartedAt.T,
			DurationMS: r.DurationMS, RowsFound: r.RowsFound, RequestsServed: r.RequestsServed, LoansAssigned: r.LoansAssigned})
	}
	return out, nil
}

// DeleteTask removes a task with its whole history: assignments, requests and
// criteria-query runs. A task with active assignments is refused unless force
// is set: deleting it would silently take work out of people's pipelines.
// It returns how many assignments (active or not) were deleted.
func (a *Admin) DeleteTask(ctx context.Context, name string, force bool) (int64, error) {
	task, err := a.Task(ctx, name)
	if err != nil {
		return 0, err
	}
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("deleting task %s: %w", name, err)
	}
	defer tx.Rollback()
	// Lock the task first, as a work get would: a holder in the middle of a
	// round finishes before its task disappears (lease holders are fenced:
	// their commit finds no task row). A dialect without row locks (SQLite)
	// serialises writers anyway.
	if drivers.Supports(a.driver, drivers.Wait) {
		if _, err := a.sql().LockWait.One(ctx, tx, engineio.TaskParams{TaskID: task.ID}); err != nil {
			return 0, fmt.Errorf("locking task %s before deleting it: %w", name, err)
		}
	}
	count, err := a.taskDeleteSQL().ActiveWorkCount.One(ctx, tx, engineio.TaskParams{TaskID: task.ID})
	if err != nil {
		return 0, fmt.Errorf("counting active work of task %s: %w", name, err)
	}
	active := count.N
	if active > 0 && !force {
		return 0, problem.Usagef("task %s has %d active assignment(s): disposition them first, or delete with --force to drop them too", name, active)
	}
	if err := a.deleteGovernance(ctx, tx, task); err != nil { // governance.go
		return 0, err
	}
	// Children first: events belong to work rows (loanq_history, no
	// foreign key: migration 00021), work rows reference requests, and all
	// reference the task.
	if _, err := a.taskDeleteSQL().DeleteHistory.Exec(ctx, tx, engineio.TaskParams{TaskID: task.ID}); err != nil {
		return 0, fmt.Errorf("deleting the history events of task %s: %w", name, err)
	}
	res, err := a.taskDeleteSQL().DeleteWork.Exec(ctx, tx, engineio.TaskParams{TaskID: task.ID})
	if err != nil {
		return 0, fmt.Errorf("deleting the work of task %s: %w", name, err)
	}
	work, _ := res.RowsAffected()
	if _, err := a.taskDeleteSQL().DeleteRequests.Exec(ctx, tx, engineio.TaskParams{TaskID: task.ID}); err != nil {
		return 0, fmt.Errorf("deleting the requests of task %s: %w", name, err)
	}
	if _, err := a.taskDeleteSQL().DeleteQueryRuns.Exec(ctx, tx, engineio.TaskParams{TaskID: task.ID}); err != nil {
		return 0, fmt.Errorf("deleting the query runs of task %s: %w", name, err)
	}
	if _, err := a.taskDeleteSQL().DeleteTaskUsers.Exec(ctx, tx, engineio.TaskParams{TaskID: task.ID}); err != nil {
		return 0, fmt.Errorf("deleting the per-user lock rows of task %s: %w", name, err)
	}
	if _, err := a.sql().PoolClear.Exec(ctx, tx, engineio.TaskParams{TaskID: task.ID}); err != nil {
		return 0, fmt.Errorf("deleting the candidate pool of task %s: %w", name, err)
	}
	if _, err := a.taskDeleteSQL().DeleteTaskRow.Exec(ctx, tx, engineio.TaskParams{TaskID: task.ID}); err != nil {
		return 0, fmt.Errorf("deleting task %s: %w", name, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("deleting task %s: %w", name, err)
	}
	return work, nil
}

// positive is n as a nullable bind: NULL unless n > 0 (no cap, no limit set).
func positive(n int64) sql.NullInt64 {
	return sql.NullInt64{Int64: n, Valid: n > 0}
}
