package historyrun

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/internal/testkit/history"
)

// Spec is the task a run works on: a source table of Loans rows (id, done,
// priority), criteria `done = 0` (with a per-row sleep where the database
// has one), priority order a seeded permutation of the ids, so that the
// order is not the key's.
type Spec struct {
	Strategy string `json:"strategy"` // skip, nowait, wait, lease or rows
	Prefetch int    `json:"prefetch"` // the candidate pool (0: none)
	Loans    int    `json:"loans"`
	// QueryDelay is the task's --query-delay (a pause before each criteria
	// query); RowSleep a sleep for one row in SleepEvery the criteria evaluates
	// (PostgreSQL pg_sleep, whose shortest sleep is 1 ms; MariaDB SLEEP;
	// SQLite has none): the query is slow while its snapshot stays as of
	// its start.
	QueryDelay time.Duration `json:"query_delay"`
	RowSleep   time.Duration `json:"row_sleep"`
	SleepEvery int           `json:"sleep_every"` // RowSleep for one row in SleepEvery (0: 10)
}

// sourceOf is the source table of a task.
func sourceOf(task string) string {
	return "hist_" + strings.NewReplacer("-", "_", ".", "_").Replace(task)
}

// criteria is the task's where clause on the dialect.
func criteria(d drivers.Driver, s Spec) string {
	where := "done = 0"
	if s.RowSleep <= 0 {
		return where
	}
	every := s.SleepEvery
	if every <= 0 {
		every = 10
	}
	secs := fmt.Sprintf("%.4f", s.RowSleep.Seconds())
	switch d.Name() {
	case "postgres":
		return fmt.Sprintf("%s AND (MOD(id, %d) <> 0 OR pg_sleep(%s) IS NOT NULL)", where, every, secs)
	case "mysql":
		return fmt.Sprintf("%s AND (MOD(id, %d) <> 0 OR SLEEP(%s) = 0)", where, every, secs)
	}
	return where
}

// setup creates the source table and the task; it returns the task's id.
func setup(ctx context.Context, d drivers.Driver, db *sql.DB, task string, s Spec, seed uint64) (int64, error) {
	src := sourceOf(task)
	tables := d.Tables()
	ddl := []string{
		fmt.Sprintf("CREATE TABLE %s (id %s PRIMARY KEY, done INTEGER NOT NULL, priority INTEGER NOT NULL)%s", src, tables.BigInt, tables.Options),
		// The index the criteria and the order need (the rows strategy on
		// InnoDB locks every row it reads without it).
		fmt.Sprintf("CREATE INDEX %s_ix ON %s (done, priority, id)", src, src),
	}
	for _, q := range ddl {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return 0, fmt.Errorf("%s: %w", q, err)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	prio := rng.Perm(s.Loans)
	for from := 0; from < s.Loans; from += 400 {
		var b strings.Builder
		fmt.Fprintf(&b, "INSERT INTO %s (id, done, priority) VALUES ", src)
		for i := from; i < min(from+400, s.Loans); i++ {
			if i > from {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "(%d, 0, %d)", i+1, prio[i]+1)
		}
		if _, err := db.ExecContext(ctx, b.String()); err != nil {
			return 0, fmt.Errorf("filling %s: %w", src, err)
		}
	}
	e := dispatch.New(db, d)
	spec := dispatch.TaskSpec{Name: task, Source: src, Key: "id", Where: criteria(d, s), Order: "priority",
		Lock: drivers.Strategy(s.Strategy), QueryDelay: s.QueryDelay, Prefetch: s.Prefetch, CreatedBy: "admin",
		// A rows claim over this source locks what it returns; the per-row
		// sleep is what makes the check's trial claim look wide.
		AllowWideLocks: true}
	if err := spec.Check(); err != nil {
		return 0, err
	}
	t, _, err := e.Admin().CreateTask(ctx, spec)
	if err != nil {
		return 0, fmt.Errorf("creating task %s: %w", task, err)
	}
	if s.Prefetch > 0 {
		// A refresher ran before the processors arrived: the pool is full
		// from the start, and the first gets claim from it.
		if _, err := e.Refill(ctx, t, true); err != nil {
			return 0, fmt.Errorf("filling the pool of %s: %w", task, err)
		}
	}
	return t.ID, nil
}

// dbNow reads the database clock (zero when it cannot).
func dbNow(ctx context.Context, d drivers.Driver, db drivers.Querier) time.Time {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := d.Statements().Now.One(ctx, db, engineio.NoParams{})
	if err != nil {
		return time.Time{}
	}
	return r.Now.T
}

// readState reads the task's rows and its source.
func readState(ctx context.Context, d drivers.Driver, db *sql.DB, taskID int64, task string) (history.State, error) {
	var st history.State
	st.Read = dbNow(ctx, d, db)
	rb := func(q string) string { return drivers.Rebind(d.Dialect(), q) }
	rows, err := db.QueryContext(ctx, rb(`SELECT id, loan_id, user_name, request_id, assigned_at, disposition, disposed_at, return_at
FROM loanq_work WHERE task_id = ? ORDER BY id`), taskID)
	if err != nil {
		return st, fmt.Errorf("reading loanq_work: %w", err)
	}
	for rows.Next() {
		var w history.Work
		var disp sql.NullString
		var a, dis, ret engineio.Time
		if err := rows.Scan(&w.ID, &w.Loan, &w.User, &w.RequestID, &a, &disp, &dis, &ret); err != nil {
			rows.Close()
			return st, fmt.Errorf("reading loanq_work: %w", err)
		}
		w.AssignedAt, w.Disposition, w.DisposedAt, w.ReturnAt = a.T, disp.String, dis.T, ret.T
		st.Work = append(st.Work, w)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return st, err
	}
	rows, err = db.QueryContext(ctx, rb(`SELECT id, user_name, status, requested, assigned, created_at, served_at
FROM loanq_work_request WHERE task_id = ? ORDER BY id`), taskID)
	if err != nil {
		return st, fmt.Errorf("reading loanq_work_request: %w", err)
	}
	for rows.Next() {
		var r history.Request
		var c, s engineio.Time
		if err := rows.Scan(&r.ID, &r.User, &r.Status, &r.Requested, &r.Assigned, &c, &s); err != nil {
			rows.Close()
			return st, fmt.Errorf("reading loanq_work_request: %w", err)
		}
		r.CreatedAt, r.ServedAt = c.T, s.T
		st.Requests = append(st.Requests, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return st, err
	}
	rows, err = db.QueryContext(ctx, fmt.Sprintf("SELECT id, done, priority FROM %s ORDER BY priority", sourceOf(task)))
	if err != nil {
		return st, fmt.Errorf("reading the source: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, done, prio int64
		if err := rows.Scan(&id, &done, &prio); err != nil {
			return st, err
		}
		st.Loans = append(st.Loans, history.Loan{Key: fmt.Sprint(id), Rank: int(prio - 1), MatchedAtStart: true, Matches: done == 0})
	}
	return st, rows.Err()
}

// killSessions ends up to n sessions of the test's database other than the
// killer's own, picked at random among those running loanq's statements
// (PostgreSQL: pg_terminate_backend; MariaDB: KILL). It returns how many.
func killSessions(ctx context.Context, d drivers.Driver, db *sql.DB, n int, rng *rand.Rand) (int, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	var find, kill string
	switch d.Name() {
	case "postgres":
		find = `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`
		kill = "SELECT pg_terminate_backend(%d)"
	case "mysql":
		find = `SELECT ID FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND ID <> CONNECTION_ID()`
		kill = "KILL %d"
	default:
		return 0, nil
	}
	ids, err := drivers.ScanIDs(conn.QueryContext(ctx, find))
	if err != nil {
		return 0, fmt.Errorf("finding sessions: %w", err)
	}
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	killed := 0
	for _, id := range ids[:min(n, len(ids))] {
		if _, err := conn.ExecContext(ctx, fmt.Sprintf(kill, id)); err == nil {
			killed++ // a session gone meanwhile is no error
		}
	}
	return killed, nil
}
