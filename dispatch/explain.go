package dispatch

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strings"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/drivers/engineio"
	"github.com/loanq/loanq/problem"
)

// `loanq explain` (docs/<database>.md, "Reading `loanq explain`"): what one
// get of a task sends, how the database plans it, and — measured, not
// guessed — how many rows one claim locks. Whether SKIP LOCKED shares the
// work between concurrent callers or serialises them depends on that number
// only: a claim that locks the n rows it returns leaves the rest to the
// others; one that locks every eligible row (InnoDB, when no index serves the
// order and the rows are sorted) leaves them nothing.
//
// The probe never changes data: both of its transactions roll back. It
// counts what another session could lock, so a task that real callers are
// claiming at the same moment is measured with their locks too: run it
// when the task is quiet.

// Explanation is `loanq explain TASK`.
type Explanation struct {
	Task       string               `json:"task"`
	Database   string               `json:"database"`
	Strategy   string               `json:"strategy"`
	Count      int                  `json:"count"`
	Statements []ExplainedStatement `json:"statements"`
	Probe      Probe                `json:"probe"`
	// Verdict is ok, warning or unknown (nothing eligible to measure).
	Verdict string `json:"verdict"`
	Message string `json:"message"`
	// SuggestedIndex is an index that would serve the criteria and order (a
	// heuristic from --where's equalities and --order), "" when none is
	// needed or none can be derived.
	SuggestedIndex string `json:"suggested_index"`
}

// ExplainedStatement is one statement of a get, with its binds, and the
// database's plan for those that read the source.
type ExplainedStatement struct {
	Purpose string   `json:"purpose"`
	SQL     string   `json:"sql"`
	Binds   []any    `json:"binds"`
	Plan    []string `json:"plan"`
	Index   string   `json:"index"`
	Sort    bool     `json:"sort"`
}

// Probe is the measurement: one claim of Count inside a transaction rolled
// back, while a second session counts the eligible rows it can still lock.
type Probe struct {
	// Measured is false where the database has no row locks (SQLite).
	Measured bool `json:"measured"`
	// Claimed is how many rows the claim returned (locked and returned for
	// rows; read by the criteria query for the other strategies).
	Claimed int `json:"claimed"`
	// Eligible is how many rows the criteria match now (at most ProbeLimit).
	Eligible int `json:"eligible"`
	// StillLockable is how many of them the second session could lock with
	// SKIP LOCKED while the claim held its locks.
	StillLockable int `json:"still_lockable"`
	// RowsLocked is Eligible − StillLockable: the source rows the claim locks.
	RowsLocked int `json:"rows_locked"`
	// DataLocks are the claim's InnoDB locks from performance_schema
	// (MySQL 8), gap and next-key locks included; DataLocksReadable says
	// whether that table could be read at all.
	DataLocksReadable bool     `json:"data_locks_readable"`
	DataLocks         []string `json:"data_locks"`
	Note              string   `json:"note"`
	// RecordsLocked is InnoDB's count of the index records the claim's
	// transaction holds locked (MySQL 8, MariaDB; RecordsLockedMeasured
	// false elsewhere): about two per row read through a secondary index.
	// Far more than the rows claimed means the claim keeps rows it passed
	// over locked (docs/mysql.md), which RowsLocked, counting eligible rows
	// only, does not show.
	RecordsLockedMeasured bool  `json:"records_locked_measured"`
	RecordsLocked         int64 `json:"records_locked"`
}

// ProbeLimit bounds how many eligible rows the probe counts.
const ProbeLimit = 100000

// WideLocks is the ratio past which a claim locks too much: `task create
// --lock rows` refuses a task whose claim locks more than twice the rows it
// returns.
const WideLocks = 2

// Explain explains task name with a probe of count rows.
func (e *Engine) Explain(ctx context.Context, name string, count int) (*Explanation, error) {
	return e.ExplainFor(ctx, name, count, "")
}

// ExplainFor is Explain as user's get would send it: on a task with a
// four-eyes rule, a claim's criteria carry the rule for that user, and a
// round's allocation reads the rule's history (governance.go). "": the
// statements with USER standing for the caller.
func (e *Engine) ExplainFor(ctx context.Context, name string, count int, user string) (*Explanation, error) {
	if count < 1 || count > MaxCount {
		return nil, problem.Usagef("invalid --count %d: give between 1 and %d", count, MaxCount)
	}
	task, err := e.Task(ctx, name)
	if err != nil {
		return nil, err
	}
	srv, err := e.serverOf(task.Lock)
	if err != nil {
		return nil, err
	}
	return e.explainTask(ctx, task, srv, count, user)
}

func (st *store) explainTask(ctx context.Context, task *Task, srv server, count int, user string) (*Explanation, error) {
	strategy := srv.strategy()
	x := &Explanation{Task: task.Name, Database: st.driver.Name(), Strategy: string(strategy), Count: count}
	stmts, planned := st.getStatements(task, srv, count, user)
	x.Statements = stmts
	var plan drivers.QueryPlan
	if planned >= 0 {
		// EXPLAIN (PLAN FOR) inside a transaction rolled back: Oracle's
		// PLAN_TABLE rows go with it.
		tx, err := st.db.BeginTx(ctx, nil)
		if err != nil {
			return nil, fmt.Errorf("planning the criteria of task %s: %w", task.Name, err)
		}
		s := &x.Statements[planned]
		plan, err = st.driver.Explain(ctx, tx, srv.planSQL(task, s.SQL), s.Binds...)
		_ = tx.Rollback()
		if err != nil {
			return nil, fmt.Errorf("planning the criteria of task %s: %w", task.Name, err)
		}
		s.Plan, s.Index, s.Sort = plan.Lines, plan.Index, plan.Sort
	}
	p, err := st.probe(ctx, task, srv, count)
	if err != nil {
		return nil, err
	}
	x.Probe = p
	x.Verdict, x.Message, x.SuggestedIndex = verdict(task, srv, p, plan, st.driver.Name())
	return x, nil
}

// getStatements lists what one get of count sends that matters for its
// locks (drivers.GetStatements), and the index of the one to plan.
func (st *store) getStatements(task *Task, srv server, count int, user string) ([]ExplainedStatement, int) {
	strategy := srv.strategy()
	src := task.criteria()
	if srv.perUser() {
		// A claim serves one user: the four-eyes rule is in its criteria.
		if user == "" {
			user = "USER"
		}
		src = st.criteriaFor(task, user)
	}
	shown, planned := drivers.GetStatements(st.driver, strategy, src, drivers.GetShape{
		TaskID: task.ID, Count: count, Capped: task.MaxActive > 0, LeaseTTLMS: task.LeaseTTL.Milliseconds()})
	out := make([]ExplainedStatement, len(shown))
	for i, s := range shown {
		out[i] = ExplainedStatement{Purpose: s.Purpose, SQL: s.SQL, Binds: s.Binds}
	}
	if task.FourEyes && !srv.perUser() {
		// A round's one criteria query serves every requester; the rule is
		// per user, applied when the round shares its candidates out.
		s := drivers.ShowQuery("four eyes (--not-worked-in): which candidates each waiting user worked in a named task; the round gives those to the other requesters",
			&st.governanceSQL().FourEyesBlocked, engineio.PoolIDsParams{TaskID: task.ID, IDs: "[candidates]"})
		out = append(out, ExplainedStatement{Purpose: s.Purpose, SQL: s.SQL, Binds: s.Binds})
	}
	return out, planned
}

// probe runs one claim of count in a transaction (A) it rolls back, and
// meanwhile counts, in a second session (B), the eligible rows B can still
// lock.
func (st *store) probe(ctx context.Context, task *Task, srv server, count int) (Probe, error) {
	var p Probe
	rl, hasRowLocks := st.driver.(drivers.RowLocker)
	fail := func(what string, err error) (Probe, error) {
		return Probe{}, fmt.Errorf("probing the locks of task %s: %s: %w", task.Name, what, err)
	}
	connA, err := st.db.Conn(ctx)
	if err != nil {
		return fail("connecting", err)
	}
	defer connA.Close()
	var connID int64
	dl, hasDataLocks := st.driver.(drivers.DataLocker)
	if hasDataLocks {
		if connID, err = dl.ConnectionID(ctx, connA); err != nil {
			return fail("reading the session id", err)
		}
	}
	txA, err := connA.BeginTx(ctx, srv.probeTxOptions())
	if err != nil {
		return fail("beginning the claim", err)
	}
	defer txA.Rollback() // the probe changes nothing
	if p.Claimed, p.Note, err = srv.probeClaim(ctx, txA, task, count); err != nil {
		return fail("claiming", err)
	}
	if !hasRowLocks {
		p.Note += st.driver.Name() + " has no row locks: one writer at a time, and the task lock is the task's lease row (an UPDATE, not a lock held while the query runs); callers never lock loan rows"
		return p, nil
	}
	// B: what is still lockable while A holds its locks.
	txB, err := st.db.BeginTx(ctx, rl.RowsTxOptions())
	if err != nil {
		return fail("beginning the second session", err)
	}
	defer txB.Rollback()
	eligible, err := drivers.ScanKeys(drivers.CriteriaQuery(st.driver.Dialect(), task.criteria()).Query(ctx, txB, engineio.CriteriaParams{TaskID: task.ID, Limit: ProbeLimit}))
	if err != nil {
		return fail("counting the eligible rows", err)
	}
	p.Measured, p.Eligible = true, len(eligible)
	if p.Eligible > 0 {
		lockable, err := rl.LockRows(ctx, txB, task.criteria(), task.ID, p.Eligible)
		if err != nil {
			return fail("counting the rows still lockable", err)
		}
		p.StillLockable = len(lockable)
	}
	p.RowsLocked = max(0, p.Eligible-p.StillLockable)
	_ = txB.Rollback()
	if hasDataLocks {
		if p.RecordsLocked, p.RecordsLockedMeasured, err = dl.RecordsLocked(ctx, st.db, connID); err != nil {
			return fail("reading information_schema.INNODB_TRX", err)
		}
		locks, ok, err := dl.DataLocks(ctx, st.db, connID)
		if err != nil {
			return fail("reading performance_schema.data_locks", err)
		}
		p.DataLocksReadable, p.DataLocks = ok, locks
	}
	if p.DataLocks == nil {
		p.DataLocks = []string{}
	}
	return p, nil
}

// verdict turns a probe into something a DBA can act on.
func verdict(task *Task, srv server, p Probe, plan drivers.QueryPlan, dialect string) (v, msg, index string) {
	sortNote := ""
	if plan.Sort {
		sortNote = " (the order needs a sort)"
	}
	switch {
	case !p.Measured:
		msg = fmt.Sprintf("ok: a claim of %d locks no loan row: %s", p.Claimed, strings.TrimSpace(p.Note))
		if index = SuggestIndex(task, dialect); plan.Sort && index != "" {
			return "ok", msg + "; each criteria query sorts the eligible rows: an index that serves the order (a suggestion): " + index, index
		}
		return "ok", msg, ""
	case p.Eligible == 0:
		return "unknown", "unknown: no loan is eligible now, so the probe locked nothing; run explain again when loans are eligible", ""
	case srv.queueing() != "":
		how := srv.queueing()
		msg = fmt.Sprintf("ok: a claim of %d locks no loan row (%d locked by others now): %s", p.Claimed, p.RowsLocked, how)
		if plan.Sort {
			index = SuggestIndex(task, dialect)
			if index != "" {
				msg += fmt.Sprintf("; each criteria query sorts every eligible row%s: an index that serves the order (a suggestion): %s", sortNote, index)
			}
		}
		return "ok", msg, index
	case WideClaim(p.Claimed, p.RowsLocked):
		index = SuggestIndex(task, dialect)
		msg = fmt.Sprintf("warning: a claim of %d locks %d rows%s: concurrent callers will skip all of them", p.Claimed, p.RowsLocked, sortNote)
		if index != "" {
			msg += "; an index that serves it (a suggestion, from --where and --order): " + index
		} else {
			msg += "; add an index that serves the criteria and the order (--order is not a plain column list, so loanq cannot suggest one)"
		}
		return "warning", msg, index
	default:
		return "ok", fmt.Sprintf("ok: a claim of %d locks %d rows", p.Claimed, p.RowsLocked), ""
	}
}

// PassedOverLocked says whether InnoDB's count of the claim's record locks
// shows rows locked beyond those it claimed: more than WideLocks times two
// records (a secondary index entry and the row) per row claimed.
func PassedOverLocked(p Probe) bool {
	return p.RecordsLockedMeasured && p.RecordsLocked > int64(2*WideLocks*max(p.Claimed, 1))
}

// WideClaim says whether a claim that returned claimed rows and locked
// locked rows locks too many: more than WideLocks times what it returns.
func WideClaim(claimed, locked int) bool {
	return locked > WideLocks*max(claimed, 1) || (claimed == 0 && locked > 0)
}

var (
	eqColumn  = regexp.MustCompile(`(?i)(?:^|[\s(])(?:src\.)?([a-z_][a-z0-9_]*)\s*(?:=|\bIN\s*\(|\bIS\s+NULL\b)`)
	orderTerm = regexp.MustCompile(`(?i)^(?:src\.)?([a-z_][a-z0-9_]*)(?:\s+(ASC|DESC))?$`)
	orWord    = regexp.MustCompile(`(?i)\bOR\b`)
	quoted    = regexp.MustCompile(`'(?:[^']|'')*'`)
)

// SuggestIndex derives an index from the task's --where equality columns
// (those compared with =, IN or IS NULL, when the condition has no OR) and
// its --order columns, then the key: a heuristic, "" when --order is not a
// plain column list.
func SuggestIndex(t *Task, dialect string) string {
	var cols []string
	seen := map[string]bool{}
	add := func(c, dir string) {
		if !seen[strings.ToLower(c)] {
			seen[strings.ToLower(c)] = true
			cols = append(cols, strings.TrimSpace(c+" "+dir))
		}
	}
	where := quoted.ReplaceAllString(t.Where, "''")
	if !orWord.MatchString(where) {
		for _, m := range eqColumn.FindAllStringSubmatch(where, -1) {
			switch strings.ToUpper(m[1]) {
			case "AND", "NOT", "WHERE":
				continue
			}
			add(m[1], "")
		}
	}
	if strings.TrimSpace(t.Order) != "" {
		for _, term := range strings.Split(t.Order, ",") {
			m := orderTerm.FindStringSubmatch(strings.TrimSpace(term))
			if m == nil {
				return ""
			}
			dir := strings.ToUpper(m[2])
			if dir == "ASC" {
				dir = ""
			}
			add(m[1], dir)
		}
	}
	add(t.Key, "")
	table := t.Source
	if i := strings.LastIndex(table, "."); i >= 0 {
		table = table[i+1:]
	}
	name := strings.ToLower(table + "_" + regexp.MustCompile(`[^A-Za-z0-9_]`).ReplaceAllString(t.Name, "_") + "_ix")
	if len(name) > 30 { // Oracle before 12.2 allows 30
		name = name[:27] + "_ix"
	}
	return fmt.Sprintf("CREATE INDEX %s ON %s (%s)", name, t.Source, strings.Join(cols, ", "))
}

// probeCriteria is the probe's claim for the strategies with a task lock:
// the task row as a row-lock strategy locks it (lockTask), but never queued
// behind a holder (wait would): the probe measures, it does not serve;
// then the criteria query for count rows.
func (e *Engine) probeCriteria(ctx context.Context, tx *sql.Tx, task *Task, count int, lockTask bool) (claimed int, note string, err error) {
	if lockTask && e.caps().Supports(drivers.Skip) {
		if _, err := e.sql().Lock(drivers.Skip).One(ctx, tx, engineio.TaskParams{TaskID: task.ID}); err != nil {
			if err != sql.ErrNoRows && !e.driver.IsLockBusy(err) {
				return 0, "", fmt.Errorf("taking the task lock: %w", err)
			}
			note = "another caller holds the task lock now: the probe ran the criteria query without it. "
		}
	}
	keys, err := drivers.ScanKeys(drivers.CriteriaQuery(e.driver.Dialect(), task.criteria()).Query(ctx, tx, engineio.CriteriaParams{TaskID: task.ID, Limit: count}))
	if err != nil {
		return 0, "", fmt.Errorf("running the criteria query: %w", err)
	}
	return len(keys), note, nil
}
