package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/loanq/loanq/loankey"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/testkit/testdb"
)

// killsPerDialect is how many `work get` processes each dialect's rounds must
// really kill (SIGKILL delivered before the process exited): 34 on each of the
// three databases, at least 100 per CI run. LOANQ_FAULT_KILLS=N asks for N per
// dialect (the long variant); killTarget's maxRounds bounds the rounds in case
// the machine is so slow that most callers finish before their signal.
const killsPerDialect = 34

func killTarget(t *testing.T) (kills, maxRounds int) {
	kills = killsPerDialect
	if v := os.Getenv("LOANQ_FAULT_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("LOANQ_FAULT_KILLS=%q: want a positive number of kills per dialect", v)
		}
		kills = n
	}
	return kills, 4 * kills
}

// Random SIGKILL rounds. In each round several `loanq work get` processes
// start at random moments; one to three of them are killed with SIGKILL at a
// random delay of 0-300 ms after their start — before the lock, inside the
// 100 ms criteria query, while assigning, or after the commit — while the
// others keep requesting and must be served. After every round, on the
// final database state: the audit is clean, a recheck leaves no request
// pending, the task lock is free (or the dead holder's lease expired), and
// every committed assignment shows in its user's pipeline. Then the same
// rounds on a text-keyed and a UUID-keyed task (killKeyRounds).
//
// The random choices come from a seeded math/rand; the seed is logged, and
// LOANQ_FAULT_SEED=N replays the same choices (the timing of the processes
// themselves cannot be replayed).
func TestFaultRandomKill(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("LOANQ_FAULT_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("LOANQ_FAULT_SEED=%q: %v", v, err)
		}
		seed = n
	}
	t.Logf("seed %d (replay the random choices with LOANQ_FAULT_SEED=%d)", seed, seed)
	testdb.EachPooled(t, func(t *testing.T, dsn string) { // parallel: each dialect's own database
		d, e := prepare(t, dsn, 300)
		dialectIdx := uint64(slices.Index(testdb.Dialects, d.Name()))
		rng := rand.New(rand.NewPCG(seed, dialectIdx))
		// Every strategy of the dialect in turn (skip, nowait, wait and lease
		// on the servers, lease alone on SQLite), round after round, until
		// the dialect's kills are done.
		strategies := d.Capabilities().Strategies
		ids := map[drivers.Strategy]int64{}
		for _, s := range strategies {
			// The lease outlives the 100 ms query by far, but a dead holder's
			// lease still expires quickly, so survivors take over within 1.5 s.
			mustOK(t, dsn, "admin", "task", "create", "kill-"+string(s), "--where", "eligible = 1", "--order", "priority",
				"--lock", string(s), "--query-delay", "100ms", "--lease-ttl", "1500ms")
			ids[s] = taskID(t, e, "kill-"+string(s))
		}
		want, maxRounds := killTarget(t)
		seen := map[string]int{}
		kills, rounds := 0, 0
		byStrategy := map[drivers.Strategy]int{}
		for ; kills < want && rounds < maxRounds; rounds++ {
			s := strategies[rounds%len(strategies)]
			n := killRound(t, dsn, d, e, rng, "kill-"+string(s), ids[s], s, rounds, seen)
			kills += n
			byStrategy[s] += n
			if t.Failed() {
				return
			}
		}
		t.Logf("%s: %d rounds, %d processes killed (%v by strategy); by phase at the moment of the signal: %v", d.Name(), rounds, kills, byStrategy, seen)
		if kills < want {
			t.Fatalf("%s: only %d kills landed in %d rounds, want %d: most callers finished before their signal", d.Name(), kills, rounds, want)
		}
		killKeyRounds(t, dsn, d, e, rng, strategies)
	})
}

// killKeyRounds are the same rounds on a task keyed by text (VARCHAR) and
// one keyed by UUID (a native uuid column on PostgreSQL and MariaDB, text
// on SQLite), the strategies in turn, until two kills landed on each (at
// most six rounds), with the same checks on the final database state.
func killKeyRounds(t *testing.T, dsn string, d drivers.Driver, e *engine, rng *rand.Rand, strategies []drivers.Strategy) {
	t.Helper()
	const loans = 300
	turn := 0
	began := time.Now()
	defer func() {
		t.Logf("%s: the text and UUID key rounds took %s", d.Name(), time.Since(began).Round(time.Millisecond))
	}()
	for k, kind := range []struct{ name, col string }{{"text", "VARCHAR(60)"}, {"uuid", "UUID"}} {
		table := "kill_" + kind.name
		testdb.Exec(t, d, e.DB, "CREATE TABLE "+table+" (ref "+kind.col+" NOT NULL PRIMARY KEY, priority INTEGER NOT NULL, eligible INTEGER NOT NULL)")
		var values []string
		var args []any
		for i := 1; i <= loans; i++ {
			k := fmt.Sprintf("LN-%d-<%06d> é", i%7, i)
			if kind.name == "uuid" {
				k = fmt.Sprintf("%08x-5c1d-4f2a-9e7b-%012x", 0xb0000000+i, i)
			}
			values = append(values, "(?, ?, 1)")
			args = append(args, k, rng.IntN(1000))
		}
		testdb.Exec(t, d, e.DB, "INSERT INTO "+table+" (ref, priority, eligible) VALUES "+strings.Join(values, ", "), args...)
		// The index that serves the tasks' order: without it a rows claim
		// on MariaDB locks every row it sorts, and task create refuses the
		// rows task (a wide-lock verdict) when the rotation reaches it.
		testdb.Exec(t, d, e.DB, "CREATE INDEX "+table+"_ix ON "+table+" (eligible, priority, ref)")
		kills, rounds := 0, 0
		seen := map[string]int{}
		for ; kills < 2 && rounds < 6; rounds++ {
			s := strategies[turn%len(strategies)]
			turn++
			task := fmt.Sprintf("kill-%s-%s", kind.name, s)
			if _, err := e.Task(context.Background(), task); err != nil {
				r := mustOK(t, dsn, "admin", "--output", "json", "task", "create", task, "--source", table, "--key", "ref",
					"--where", "eligible = 1", "--order", "priority", "--lock", string(s), "--query-delay", "100ms", "--lease-ttl", "1500ms")
				if !strings.Contains(r.stdout, `"key_kind": "`+kind.name+`"`) {
					t.Fatalf("%s: task create printed %s; want key_kind %s", task, r.stdout, kind.name)
				}
			}
			// Round numbers of their own: the users they name are new.
			kills += killRound(t, dsn, d, e, rng, task, taskID(t, e, task), s, 100*(k+1)+rounds, seen)
			if t.Failed() {
				return
			}
		}
		t.Logf("%s, %s keys: %d rounds, %d processes killed; by phase: %v", d.Name(), kind.name, rounds, kills, seen)
		if kills == 0 {
			t.Errorf("%s, %s keys: no kill landed in %d rounds", d.Name(), kind.name, rounds)
		}
	}
}

func killRound(t *testing.T, dsn string, d drivers.Driver, e *engine, rng *rand.Rand,
	task string, taskID int64, s drivers.Strategy, round int, seen map[string]int) (kills int) {
	t.Helper()
	const procs = 6
	killers := 1 + rng.IntN(3)
	order := rng.Perm(procs)
	type plan struct {
		user   string
		count  int
		start  time.Duration
		killer bool
		// afterLog: the kill delay counts from the moment the process's
		// request is logged, not from its start, to land more kills inside
		// the lock; the others count from the start (mostly before the lock).
		afterLog bool
		kill     time.Duration
		killed   bool
		phase    string
		pid      int
	}
	plans := make([]*plan, procs)
	for i := range plans {
		p := &plan{count: 1 + rng.IntN(4), start: time.Duration(rng.IntN(150)) * time.Millisecond}
		if rng.IntN(3) == 0 {
			p.count = 20 // a longer assignment phase, between assignment and commit
		}
		if slices.Index(order, i) < killers {
			p.killer, p.afterLog = true, rng.IntN(2) == 0
			p.kill = time.Duration(rng.IntN(301)) * time.Millisecond
			p.user = fmt.Sprintf("%s-r%d-k%d", s, round, i)
		} else {
			p.user = fmt.Sprintf("%s-r%d-p%d", s, round, i)
		}
		plans[i] = p
	}

	tk, err := e.Task(context.Background(), task)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	results := make([]result, procs)
	for i, p := range plans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(p.start)
			pdsn := dsn
			if d.Name() == "postgres" {
				// A session name per process, to see from pg_stat_activity
				// where the process was when it was killed.
				pdsn += "&application_name=" + p.user
			}
			pr := startProc(t, pdsn, p.user, 3*time.Minute,
				append([]string{"--output", "json", "work", "get", task, "--count", strconv.Itoa(p.count)}, fastRecheck...)...)
			p.pid = pr.cmd.Process.Pid
			if p.killer {
				if p.afterLog {
					waitLogged(t, d, e, p.user, pr, s)
				}
				time.Sleep(p.kill)
				if pr.running() {
					p.phase = killPhase(t, d, e, tk, p.user, p.pid, s)
					if err := pr.cmd.Process.Signal(syscall.SIGKILL); err == nil {
						p.killed = true
					}
				}
			}
			results[i] = pr.wait()
			if pr.hung {
				t.Errorf("%s hung: no answer within 3 minutes", p.user)
			}
		}()
	}
	wg.Wait()

	for i, p := range plans {
		r := results[i]
		if p.killed {
			if p.phase == "" {
				p.phase = "unknown"
			}
			if r.code == 0 { // it finished just before the signal
				p.phase = "finished before the signal"
			} else {
				kills++
			}
			seen[p.phase]++
			continue
		}
		if p.killer {
			seen["finished before the signal"]++
		}
		if r.code != 0 {
			t.Fatalf("round %d: surviving caller %s: exit %d\n%s", round, p.user, r.code, r.stderr)
		}
		got := decodeKeys(t, r)
		if got.Status == "pending" || got.User != p.user || got.Assigned != len(got.Loans) || got.Requested != p.count {
			t.Fatalf("round %d: surviving caller %s: %+v", round, p.user, got)
		}
	}

	// A killed caller's server session may still be finishing (its COMMIT
	// sent before the signal, through PgBouncer a moment later; a full run
	// read no loans of rows-r14-k0, then its pipeline showed 4): wait until
	// no transaction is open before reading what was committed.
	settled(t, d, e.DB)
	// A recheck serves whatever the dead callers left pending.
	recheckAll(t, dsn, d, e, taskID)
	audit(t, e)
	lockFree(t, d, e, taskID, s)
	// Every committed assignment is in its user's pipeline, and only those.
	for i, p := range plans {
		want := activeLoans(t, d, e, taskID, p.user)
		got := pipelineKeys(t, dsn, p.user, task)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: pipeline of %s shows %q, the database holds %q", round, p.user, got, want)
		}
		if results[i].code == 0 {
			for _, loan := range decodeKeys(t, results[i]).Loans {
				if !slices.Contains(got, loan.Text) {
					t.Fatalf("round %d: loan %q handed to %s is not in its pipeline %q", round, loan.Text, p.user, got)
				}
			}
		}
	}
	// The next round starts from an empty queue: every assignment is completed.
	testdb.Exec(t, d, e.DB, "UPDATE loanq_work SET disposition = 'complete', disposed_at = assigned_at WHERE task_id = ? AND disposition IS NULL", taskID)
	return kills
}

// activeLoans is the text of the loan keys the database holds as the user's
// active work in the task, sorted.
func activeLoans(t *testing.T, d drivers.Driver, e *engine, taskID int64, user string) []string {
	t.Helper()
	rows, err := e.DB.Query(testdb.Rebind(d, "SELECT loan_id FROM loanq_work WHERE task_id = ? AND user_name = ? AND disposition IS NULL"), taskID, user)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// keyedRequest is a request's JSON whatever the task's key kind: its loans
// numbers (integer keys) or strings (text, UUID).
type keyedRequest struct {
	User      string        `json:"user"`
	Requested int           `json:"requested"`
	Assigned  int           `json:"assigned"`
	Status    string        `json:"status"`
	Loans     []loankey.Key `json:"loans"`
}

func decodeKeys(t *testing.T, r result) keyedRequest {
	t.Helper()
	var req keyedRequest
	if err := json.Unmarshal([]byte(r.stdout), &req); err != nil {
		t.Fatalf("output is not the JSON of docs/json.md: %v\n%s\n%s", err, r.stdout, r.stderr)
	}
	return req
}

// pipelineKeys is the text of the loan keys `loanq pipeline --task TASK`
// shows the user, sorted.
func pipelineKeys(t *testing.T, dsn, user, task string) []string {
	t.Helper()
	r := mustOK(t, dsn, user, "--output", "json", "pipeline", "--task", task)
	var p struct {
		Work []struct {
			Task   string      `json:"task"`
			LoanID loankey.Key `json:"loan_id"`
		} `json:"work"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &p); err != nil {
		t.Fatalf("pipeline output is not the JSON of docs/json.md: %v\n%s", err, r.stdout)
	}
	out := []string{}
	for _, w := range p.Work {
		if w.Task != task {
			t.Fatalf("pipeline --task %s shows work of task %s", task, w.Task)
		}
		out = append(out, w.LoanID.Text)
	}
	sort.Strings(out)
	return out
}

// killPhase says where the process is, as far as the database shows it, just
// before it is killed. On PostgreSQL that is the statement its session runs or
// ran last, recognised among the driver's own statements and the task's
// criteria query.
func killPhase(t *testing.T, d drivers.Driver, e *engine, task *dispatch.Task, user string, pid int, s drivers.Strategy) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n int64
	if err := e.DB.QueryRowContext(ctx, testdb.Rebind(d, "SELECT COUNT(*) FROM loanq_work_request WHERE user_name = ?"), user).Scan(&n); err != nil {
		t.Errorf("sampling %s: %v", user, err)
		return ""
	}
	if n == 0 && s == drivers.Rows && d.Name() == "postgres" {
		// A rows claim logs its request in its own transaction: invisible
		// until it commits. Its session shows the claim under way.
		var open int64
		if err := e.DB.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = $1 AND backend_xid IS NOT NULL`, user).Scan(&open); err == nil && open > 0 {
			return "claiming: request logged in the claim, not committed"
		}
	}
	if n == 0 {
		return "before its request was logged"
	}
	if d.Name() == "postgres" {
		var state, query string
		err := e.DB.QueryRowContext(ctx, `SELECT COALESCE(state, ''), COALESCE(query, '') FROM pg_stat_activity
WHERE application_name = $1 AND xact_start IS NOT NULL ORDER BY xact_start LIMIT 1`, user).Scan(&state, &query)
		if err == nil {
			st := d.Statements()
			src := drivers.CriteriaSource{Source: task.Source, Key: task.Key, Where: task.Where, Order: task.Order}
			criteria := []string{st.Now.Text(), st.RequestsPending.Text(), drivers.CriteriaQuery(d.Dialect(), src).Text(),
				drivers.CriteriaRecheck(d.Dialect(), src).Text()}
			if rl, ok := d.(drivers.RowLocker); ok {
				criteria = append(criteria, rl.RowsClaimSQL(src))
			}
			switch {
			case sentOneOf(query, st.WorkInsertMany.Text(), st.WorkInsertRows.Text(), drivers.CriteriaClaim(d.Dialect(), src).Text(), st.RequestFinish.Text(), st.RequestFinishMany.Text(), st.QueryRunInsert.Text(),
				st.LeaseFenceRelease.Text(), st.LeaseRelease.Text(), st.ActiveCountForUser.Text()):
				return "holding the lock: assigning, not committed"
			case s != drivers.Lease && (sentOneOf(query, criteria...) ||
				// granted and idle: the query delay, inside the locked section
				(sentOneOf(query, st.LockSkip.Text(), st.LockNoWait.Text(), st.LockWait.Text()) && state != "active")):
				return "holding the lock: criteria query"
			}
		}
	}
	if s == drivers.Lease {
		var owner int64
		_ = e.DB.QueryRowContext(ctx, testdb.Rebind(d, "SELECT COUNT(*) FROM loanq_task WHERE lease_owner LIKE ?"), fmt.Sprintf("%%:%d:%%", pid)).Scan(&owner)
		if owner > 0 {
			return "holding the lease: criteria query"
		}
		return "request logged, lease held by another or not yet taken"
	}
	if d.Name() == "postgres" {
		return "request logged, lock held by another or not yet taken"
	}
	return "request logged (waiting, in the query or assigning: not visible on " + d.Name() + ")"
}

// sentOneOf says whether query, as pg_stat_activity shows it, is one of
// statements. The view keeps the first track_activity_query_size bytes
// (1024 by default) of a query: a text that long only has to begin one.
func sentOneOf(query string, statements ...string) bool {
	norm := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	q := norm(query)
	for _, st := range statements {
		if st == "" {
			continue
		}
		if n := norm(st); n == q || (len(query) >= 1023 && strings.HasPrefix(n, q)) {
			return true
		}
	}
	return false
}

// waitLogged returns once the process's request is in the database (or the
// process has ended). A rows claim logs its request inside its own
// transaction, visible only at its commit: on PostgreSQL, the claim's
// transaction holding row locks (backend_xid, its session named after the
// user) counts as logged, to land kills inside the claim.
func waitLogged(t *testing.T, d drivers.Driver, e *engine, user string, pr *proc, s drivers.Strategy) {
	deadline := time.Now().Add(time.Minute)
	logged := "SELECT COUNT(*) FROM loanq_work_request WHERE user_name = ?"
	if s == drivers.Rows && d.Name() == "postgres" {
		logged = `SELECT (SELECT COUNT(*) FROM loanq_work_request WHERE user_name = ?)
  + (SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = ? AND backend_xid IS NOT NULL)`
	}
	for pr.running() && time.Now().Before(deadline) {
		var n int64
		args := []any{user}
		if strings.Count(logged, "?") == 2 {
			args = append(args, user)
		}
		if err := e.DB.QueryRow(testdb.Rebind(d, logged), args...).Scan(&n); err != nil {
			t.Errorf("waiting for the request of %s: %v", user, err)
			return
		}
		if n > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
