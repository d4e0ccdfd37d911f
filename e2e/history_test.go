package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loanq/loanq/drivers"
	"github.com/loanq/loanq/internal/testkit/history"
	"github.com/loanq/loanq/internal/testkit/historyrun"
	"github.com/loanq/loanq/internal/testkit/testdb"
	"github.com/loanq/loanq/internal/testkit/throwaway"
)

// The history checks (docs/reliability.md): many callers — worker processes (this
// test binary re-executed, each running its callers through dispatch) and
// callers of the loanq binary — loop get → work → disposition on one task
// whose criteria is slow, while faults strike; every operation is recorded
// with its times, and internal/testkit/history checks the history against the
// database's final state: no loan active or held twice, no stale hand-out,
// no request served twice or left pending, every disposition recorded
// once, no empty answer while a loan was free.
//
// Seeded: LOANQ_HISTORY_SEED (or -history.seed) replays a run's choices;
// the seed is in every failure. scripts/scale-check runs the same with
// more callers, longer (TestHistoryScale).

// A worker process is this test binary with historyrun.EnvWorker set: it
// runs its callers and exits before any test (or TestMain's build) starts.
func init() {
	if path := os.Getenv(historyrun.EnvWorker); path != "" {
		os.Exit(historyrun.WorkerMain(path))
	}
}

var historySeed = flag.Uint64("history.seed", 0, "seed of the history checks (0: from LOANQ_HISTORY_SEED, else the time)")

func historySeedValue(t *testing.T) uint64 {
	if *historySeed != 0 {
		return *historySeed
	}
	if s := os.Getenv("LOANQ_HISTORY_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("LOANQ_HISTORY_SEED=%q: %v", s, err)
		}
		return v
	}
	return uint64(time.Now().UnixNano())
}

// historyServers serialises the runs on each server: a run of 128 callers
// is all a 2-core machine gives one server at a time beside the rest of
// the suite, and a run holds about 45 of the test PostgreSQL's 100
// connections (ciShape.conns per worker process, the CLI callers'
// processes, the harness's own), which the suite's other tests share:
// PgBouncer's runs, on the same server, take turns with PostgreSQL's.
var historyServers = map[string]chan struct{}{"sqlite": make(chan struct{}, 1), "postgres": make(chan struct{}, 1), "mysql": make(chan struct{}, 1)}

func historyServerOf(dialect string) string {
	if dialect == testdb.PgBouncer {
		return "postgres"
	}
	return dialect
}

// historySlack is how far two times may disagree before the checker calls
// it an anomaly. Not 1 ms: MariaDB stamps assigned_at with NOW(), the start
// of the insert statement, which may then wait (AUTO-INC lock, the
// one-active-row index) past another transaction's commit; a clean-clone
// run saw a loan completed 7 ms after its next assignment's stamp, though
// the index allowed no overlap (docs/reliability.md). The double hand-out the
// round's recheck fixed (dispatch/recheck.go) showed as gaps of hundreds of
// milliseconds.
const historySlack = 50 * time.Millisecond

// historyCase is one cell of the matrix.
type historyCase struct {
	strategy drivers.Strategy
	prefetch int
	faults   string // "", "kill-worker", "kill-sessions"
}

// historyShape is the load of one run.
type historyShape struct {
	processes, perProcess, cli, conns int
	// inFlight bounds the calls into loanq one worker process makes at
	// once, as an application node bounds them by its pool (see
	// historyrun.Plan.InFlight).
	inFlight int
	duration time.Duration
	loans    int
}

// The CI shape: 128 callers (4 processes of 31, 4 through the binary),
// each process with 8 connections and at most 6 gets in loanq at once,
// 3 s. SQLite has no server to run out of connections: a connection per
// caller and no bound (with fewer connections than callers, a lease round
// holding SQLite's one write lock waits for a second connection that
// dispositions hold while they wait for that lock, until their busy
// timeout).
var (
	ciShape       = historyShape{processes: 4, perProcess: 31, cli: 4, conns: 8, inFlight: 6, duration: 3 * time.Second, loans: 3000}
	ciShapeSQLite = historyShape{processes: 4, perProcess: 31, cli: 4, conns: 33, duration: 3 * time.Second, loans: 3000}
)

// TestHistoryMatrix: every strategy × pool on/off on every database
// (SQLite: lease only), a worker SIGKILLed in half of the runs, database
// sessions killed in the other half (where there are sessions).
func TestHistoryMatrix(t *testing.T) {
	t.Parallel()
	seed := historySeedValue(t)
	t.Logf("seed %d (LOANQ_HISTORY_SEED=%d replays the choices)", seed, seed)
	testdb.EachPooled(t, func(t *testing.T, dsn string) {
		dialect := t.Name()[strings.LastIndex(t.Name(), "/")+1:]
		d, _ := testdb.Migrated(t, dsn)
		var cases []historyCase
		for i, s := range d.Capabilities().Strategies {
			for j, pool := range []int{0, historyPrefetch()} {
				f := "kill-worker"
				if (i+j)%2 == 1 && d.Name() != "sqlite" {
					f = "kill-sessions"
				}
				cases = append(cases, historyCase{strategy: s, prefetch: pool, faults: f})
			}
		}
		for _, c := range cases {
			name := fmt.Sprintf("%s-pool%d-%s", c.strategy, c.prefetch, c.faults)
			t.Run(name, func(t *testing.T) {
				shape := ciShape
				if d.Name() == "sqlite" {
					shape = ciShapeSQLite
				}
				runHistory(t, dialect, dsn, d, c, shape, seed, nil)
			})
		}
	})
}

// TestHistoryServerRestart: a run whose PostgreSQL server restarts (a crash
// restart) in the middle, on a throwaway server; MariaDB too with
// LOANQ_FAULT_LONG=1.
func TestHistoryServerRestart(t *testing.T) {
	t.Parallel()
	seed := historySeedValue(t)
	t.Logf("seed %d", seed)
	dialects := []string{"postgres"}
	if os.Getenv("LOANQ_FAULT_LONG") != "" {
		dialects = append(dialects, "mysql")
	}
	for _, dialect := range dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			var srv *throwaway.Server
			if dialect == "postgres" {
				srv = throwaway.Postgres(t)
			} else {
				srv = throwaway.MariaDB(t)
			}
			d, _ := testdb.Migrated(t, srv.DSN)
			restart := func() error { srv.Restart(true); return nil }
			runHistory(t, dialect, srv.DSN, d, historyCase{strategy: d.Capabilities().Strategies[0], prefetch: historyPrefetch(), faults: "restart"}, ciShape, seed, restart)
		})
	}
}

// TestHistoryScale is scripts/scale-check: the same run, bigger, on one
// database (LOANQ_SCALE_CHECK=1; LOANQ_SCALE_DIALECT, _CALLERS,
// _PROCESSES, _DURATION, _LOANS, _STRATEGIES, _PREFETCH).
func TestHistoryScale(t *testing.T) {
	if os.Getenv("LOANQ_SCALE_CHECK") == "" {
		t.Skip("scripts/scale-check runs it (LOANQ_SCALE_CHECK=1)")
	}
	seed := historySeedValue(t)
	t.Logf("seed %d", seed)
	env := func(name, def string) string {
		if v := os.Getenv("LOANQ_SCALE_" + name); v != "" {
			return v
		}
		return def
	}
	num := func(name, def string) int {
		n, err := strconv.Atoi(env(name, def))
		if err != nil {
			t.Fatalf("LOANQ_SCALE_%s: %v", name, err)
		}
		return n
	}
	dur, err := time.ParseDuration(env("DURATION", "60s"))
	if err != nil {
		t.Fatal(err)
	}
	procs, callers := num("PROCESSES", "8"), num("CALLERS", "512")
	cli := max(1, callers/16)
	conns := num("CONNS", "10")
	shape := historyShape{processes: procs, perProcess: max(1, (callers-cli)/procs), cli: cli, conns: conns, inFlight: num("INFLIGHT", strconv.Itoa(max(1, conns-2))),
		duration: dur, loans: num("LOANS", "50000")}
	dialect := env("DIALECT", "postgres")
	if dialect == "sqlite" && os.Getenv("LOANQ_SCALE_CONNS") == "" {
		// No server to run out of: a connection per caller, no bound
		// (see ciShapeSQLite).
		shape.conns, shape.inFlight = shape.perProcess+2, 0
	}
	dsn := testdb.Fresh(t, dialect)
	d, _ := testdb.Migrated(t, dsn)
	strategies := d.Capabilities().Strategies
	if s := env("STRATEGIES", ""); s != "" {
		strategies = nil
		for _, x := range strings.Split(s, ",") {
			strategies = append(strategies, drivers.Strategy(x))
		}
	}
	for _, s := range strategies {
		for _, pool := range []int{0, num("PREFETCH", "500")} {
			c := historyCase{strategy: s, prefetch: pool, faults: strings.TrimPrefix(env("FAULTS", "kill-worker"), "none")}
			t.Run(fmt.Sprintf("%s-pool%d-%s", s, pool, c.faults), func(t *testing.T) {
				runHistory(t, dialect, dsn, d, c, shape, seed, nil)
			})
		}
	}
}

var historyRunN struct {
	sync.Mutex
	n int
}

func runHistory(t *testing.T, dialect, dsn string, d drivers.Driver, c historyCase, shape historyShape, seed uint64, restart func() error) {
	shape = shapeFromEnv(t, shape)
	sem := historyServers[historyServerOf(dialect)]
	sem <- struct{}{}
	defer func() { <-sem }()
	historyRunN.Lock()
	historyRunN.n++
	task := fmt.Sprintf("hist%d-%s-%d", historyRunN.n, c.strategy, c.prefetch)
	historyRunN.Unlock()

	spec := historyrun.Spec{Strategy: string(c.strategy), Prefetch: c.prefetch, Loans: shape.loans}
	if d.Name() == "sqlite" {
		spec.QueryDelay = 100 * time.Millisecond // no per-row sleep on SQLite
	} else {
		spec.RowSleep = historyRowSleep()
		spec.QueryDelay = 20 * time.Millisecond
		// A round's query sleeps 1 ms for one row in 10 with a pool (a
		// round of ~1,500 rows: the window in which pool claims run
		// beside it), one in 40 without (rounds 4 times as short, for
		// more of them in the run).
		spec.SleepEvery = 10
		if c.prefetch == 0 {
			spec.SleepEvery = 40
		}
	}
	plan := historyrun.Plan{DSN: dsn, Task: task, Spec: spec, Seed: seed, Duration: shape.duration,
		Processes: shape.processes, PerProcess: shape.perProcess, Conns: shape.conns, InFlight: shape.inFlight, CLI: shape.cli,
		Loanq: binary, Worker: []string{os.Args[0], "-test.run=^$"}, BigShare: 0.15, Dir: t.TempDir(),
		Check: history.Options{Slack: historySlack, AbandonBound: drivers.RequestAlive}, Logf: t.Logf}
	if dialect == testdb.PgBouncer {
		plan.KillDSN = directDSN(t, dsn)
	}
	third := shape.duration / 3
	if f, ok := os.LookupEnv("LOANQ_HISTORY_FAULTS"); ok {
		c.faults = strings.TrimPrefix(f, "none") // "" or none: no faults
	}
	switch c.faults {
	case "kill-worker":
		plan.Faults = []historyrun.Fault{{At: third + shape.duration/5, KillWorker: 1 + int(seed%uint64(shape.processes))}}
	case "kill-sessions":
		plan.Faults = []historyrun.Fault{{At: third, Sessions: 3}, {At: 2 * third, Sessions: 3}}
	case "restart":
		plan.Faults = []historyrun.Fault{{At: third, Do: restart, Name: "server crash restart"}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), shape.duration+4*time.Minute)
	defer cancel()
	start := time.Now()
	out, err := historyrun.Run(ctx, plan)
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	r := out.Result
	t.Logf("%s/%s pool=%d %s: %d operations checked in %.1fs (%d get, %d dispose (%d in batches), %d change, %d cancel, %d kill; %d info), %d loans handed out, %d work rows; distance from the top: %s",
		dialect, c.strategy, c.prefetch, c.faults, r.Ops, time.Since(start).Seconds(), r.ByKind[history.Get], r.ByKind[history.Dispose], r.Batched, r.ByKind[history.Change],
		r.ByKind[history.Cancel], r.ByKind[history.Kill], r.ByType[history.Info], r.HandedOut, r.WorkRows, r.Distance)
	if os.Getenv("LOANQ_HISTORY_VERBOSE") != "" {
		t.Logf("latency: %s", historyLatency(out.Ops))
		errs := map[string]int{}
		for _, op := range out.Ops {
			if op.Err != "" {
				errs[string(op.Kind)+": "+op.Err]++
			}
		}
		for e, n := range errs {
			t.Logf("%d× %s", n, e)
		}
	}
	if r.HandedOut == 0 {
		errs := map[string]bool{}
		for _, op := range out.Ops {
			if op.Err != "" && len(errs) < 5 {
				errs[op.Err] = true
			}
		}
		t.Fatalf("seed %d: no loan was handed out; errors: %v", seed, errs)
	}
	if !r.Valid() {
		report := r.Report()
		if len(report) > 60000 {
			report = report[:60000] + "\n… (cut)"
		}
		t.Errorf("seed %d (LOANQ_HISTORY_SEED=%d go test ./e2e -run '%s'): %v\n%s", seed, seed, t.Name(), r.Count(), report)
	}
}

// directDSN is the PostgreSQL server's own DSN of a database reached
// through PgBouncer (sessions are killed on the server).
func directDSN(t *testing.T, pooled string) string {
	t.Helper()
	base := testdb.BaseDSN("postgres")
	i, j := strings.LastIndex(pooled, "/"), strings.LastIndex(base, "/")
	name := pooled[i+1:]
	if k := strings.IndexByte(name, '?'); k >= 0 {
		name = name[:k]
	}
	rest := ""
	if k := strings.IndexByte(base[j:], '?'); k >= 0 {
		rest = base[j+k:]
	}
	return base[:j+1] + name + rest
}

// historyLatency is the mean and longest time of each kind of operation.
func historyLatency(ops []history.Op) string {
	type agg struct {
		n        int
		sum, max time.Duration
	}
	by := map[string]*agg{}
	for _, op := range ops {
		if op.Complete.IsZero() {
			continue
		}
		k := string(op.Kind) + "/" + op.Via
		if by[k] == nil {
			by[k] = &agg{}
		}
		d := op.Complete.Sub(op.Invoke)
		by[k].n++
		by[k].sum += d
		by[k].max = max(by[k].max, d)
	}
	var parts []string
	for k, a := range by {
		parts = append(parts, fmt.Sprintf("%s n=%d mean=%s max=%s", k, a.n, (a.sum/time.Duration(a.n)).Round(time.Millisecond), a.max.Round(time.Millisecond)))
	}
	return strings.Join(parts, "; ")
}

// shapeFromEnv changes a shape by LOANQ_HISTORY_SHAPE, e.g.
// "processes=2,per=10,cli=2,conns=4,inflight=2,duration=5s,loans=3000".
func shapeFromEnv(t *testing.T, s historyShape) historyShape {
	v := os.Getenv("LOANQ_HISTORY_SHAPE")
	if v == "" {
		return s
	}
	for _, kv := range strings.Split(v, ",") {
		k, val, _ := strings.Cut(strings.TrimSpace(kv), "=")
		if k == "duration" {
			d, err := time.ParseDuration(val)
			if err != nil {
				t.Fatalf("LOANQ_HISTORY_SHAPE %s: %v", kv, err)
			}
			s.duration = d
			continue
		}
		n, err := strconv.Atoi(val)
		if err != nil {
			t.Fatalf("LOANQ_HISTORY_SHAPE %s: %v", kv, err)
		}
		switch k {
		case "processes":
			s.processes = n
		case "per":
			s.perProcess = n
		case "cli":
			s.cli = n
		case "conns":
			s.conns = n
		case "inflight":
			s.inFlight = n
		case "loans":
			s.loans = n
		default:
			t.Fatalf("LOANQ_HISTORY_SHAPE: unknown %q", k)
		}
	}
	return s
}

func historyRowSleep() time.Duration {
	if v := os.Getenv("LOANQ_HISTORY_ROWSLEEP"); v != "" {
		d, _ := time.ParseDuration(v)
		return d
	}
	return time.Millisecond
}

// historyPrefetch is the pool of the runs with one (LOANQ_HISTORY_PREFETCH).
func historyPrefetch() int {
	if n, err := strconv.Atoi(os.Getenv("LOANQ_HISTORY_PREFETCH")); err == nil {
		return n
	}
	return 50
}
