// Command write-amp measures what one loan served writes to the database:
// rows per table, index entries, WAL (PostgreSQL) or redo (MariaDB/MySQL)
// bytes and records, against a raw single-row SKIP LOCKED claim on the
// same server as the baseline. docs/write-amplification.md has the method
// and the figures.
//
// On a fresh database of its own (created on the server --server names,
// dropped at the end) it migrates loanq's schema, fills two item tables of
// --loans rows each (the bench's item table's shape and indexes), then runs
// two phases, each alone, with the counters read before and after:
//
//   - raw: --workers callers, each looping BEGIN; SELECT id … WHERE status =
//     'ready' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED; UPDATE … SET status
//     = 'done'; COMMIT until no item is left (the bench's raw claim);
//   - engine: a task over the other table (criteria status = 'ready'), and
//     --workers callers, each looping dispatch's Get (--count, --strategy),
//     then for each loan the item's UPDATE to 'done' and Dispose complete
//     (--dispose batch: one UPDATE of the get's items and one DisposeMany),
//     until an empty answer (what `loanq bench --target engine` runs).
//
// PostgreSQL: rows from pg_stat_user_tables (inserted, updated, of them HOT,
// deleted), index reads from pg_stat_user_indexes (idx_scan), and the WAL
// from pg_waldump between the phase's LSNs, keeping the records that touch
// a relation of this database and the records of their transactions
// (commits): bytes, full-page images apart, and per relation the heap
// records by kind and the index entries written (one btree leaf insert
// record each: INSERT_LEAF, INSERT_POST, or a level-0 split carrying the
// new entry). A temporary replication slot keeps the WAL until it is read.
// pg_waldump must read the server's pg_wal (a local server; run as root or
// the postgres user): --pg-wal names it, default data_directory/pg_wal.
//
// MariaDB/MySQL: the redo written (Innodb_lsn_current) and, when the server
// runs with userstat=1 (MariaDB), information_schema.TABLE_STATISTICS's
// rows changed per table. Both are the whole server's: measure on a server
// of its own (the doc shows one).
//
//	go run ./scripts/write-amp --server 'postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable' --loans 20000 --workers 4 --count 1
//	go run ./scripts/write-amp --server 'mysql://root@127.0.0.1:53406/test' --loans 20000
//
// It prints one JSON document: per phase the totals and the figures per
// loan served (per item claimed for raw).
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/loanq/loanq/dispatch"
	"github.com/loanq/loanq/drivers"
	_ "github.com/loanq/loanq/drivers/all" // the database drivers
	"github.com/loanq/loanq/loankey"
	"github.com/loanq/loanq/problem"
	"github.com/loanq/loanq/schema"
)

type config struct {
	server     string
	loans      int
	workers    int
	count      int
	dispose    string
	strategy   string
	noRaw      bool
	pgWAL      string
	checkpoint bool
	keep       bool
	label      string
}

func main() {
	var c config
	flag.StringVar(&c.server, "server", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "DSN of the server (its database is only used to create and drop the run's own)")
	flag.IntVar(&c.loans, "loans", 20000, "loans on the task (and items on the raw table)")
	flag.IntVar(&c.workers, "workers", 4, "concurrent callers")
	flag.IntVar(&c.count, "count", 1, "loans per work get")
	flag.StringVar(&c.dispose, "dispose", "each", "each: per loan, the item's UPDATE and Dispose; batch: one UPDATE of a get's items and one DisposeMany")
	flag.StringVar(&c.strategy, "strategy", "skip", "lock strategy of the task")
	flag.BoolVar(&c.noRaw, "no-raw", false, "skip the raw claim phase")
	flag.StringVar(&c.pgWAL, "pg-wal", "", "the server's pg_wal directory (default: data_directory/pg_wal)")
	flag.BoolVar(&c.checkpoint, "checkpoint", false, "CHECKPOINT before each phase (no full-page images from an earlier checkpoint; do not use on a server others measure on)")
	flag.BoolVar(&c.keep, "keep", false, "keep the run's database")
	flag.StringVar(&c.label, "label", "", "a label copied to the output (e.g. the build)")
	flag.Parse()
	out, err := run(context.Background(), c)
	if out != nil {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "write-amp:", err)
		os.Exit(1)
	}
}

// Output is the JSON document printed.
type Output struct {
	Label    string   `json:"label,omitempty"`
	Server   string   `json:"server"`
	Loans    int      `json:"loans"`
	Workers  int      `json:"workers"`
	Count    int      `json:"count"`
	Dispose  string   `json:"dispose"`
	Strategy string   `json:"strategy"`
	Phases   []*Phase `json:"phases"`
}

// Phase is what one phase wrote, in total and per loan (item) served.
type Phase struct {
	Name    string  `json:"name"`
	Served  int64   `json:"served"` // loans (items) served
	Seconds float64 `json:"seconds"`
	PerS    float64 `json:"per_s"`

	// Per loan served.
	PerLoan PerLoan `json:"per_loan"`

	Tables  map[string]*TableFigures `json:"tables"`
	Indexes map[string]*IndexFigures `json:"indexes,omitempty"`
	WAL     *WALFigures              `json:"wal,omitempty"`
	Redo    *RedoFigures             `json:"redo,omitempty"`
}

// PerLoan is a phase's figures divided by the loans it served.
type PerLoan struct {
	RowsInserted   float64            `json:"rows_inserted"`
	RowsUpdated    float64            `json:"rows_updated"`
	RowsHOT        float64            `json:"rows_hot_updated,omitempty"`
	IndexEntries   float64            `json:"index_entries,omitempty"` // PostgreSQL: from the WAL
	WALBytes       float64            `json:"wal_bytes,omitempty"`
	WALBytesNoFPI  float64            `json:"wal_bytes_without_fpi,omitempty"`
	WALRecords     float64            `json:"wal_records,omitempty"`
	Commits        float64            `json:"commits,omitempty"`
	RedoBytes      float64            `json:"redo_bytes,omitempty"`
	ByTable        map[string]float64 `json:"index_entries_by_table,omitempty"`
	WALBytesByRel  map[string]float64 `json:"wal_bytes_by_table,omitempty"` // a table with its indexes
	RowsByTable    map[string]string  `json:"rows_by_table,omitempty"`      // "ins/upd(hot)/del"
	EntriesByIndex map[string]float64 `json:"index_entries_by_index,omitempty"`
}

// TableFigures are a table's row counts over a phase.
type TableFigures struct {
	Inserted int64 `json:"inserted"`
	Updated  int64 `json:"updated"`
	HOT      int64 `json:"hot_updated"`
	Deleted  int64 `json:"deleted"`
	Changed  int64 `json:"changed,omitempty"`           // MariaDB userstat: rows changed
	ChangedX int64 `json:"changed_x_indexes,omitempty"` // MariaDB userstat: rows changed × the table's indexes
}

// IndexFigures are an index's reads (idx_scan) and entries written (WAL).
type IndexFigures struct {
	Table   string `json:"table"`
	Scans   int64  `json:"scans"`
	Entries int64  `json:"entries"`
	Bytes   int64  `json:"wal_bytes"`
}

func run(ctx context.Context, c config) (*Output, error) {
	if c.loans < 1 || c.workers < 1 || c.count < 1 {
		return nil, errors.New("--loans, --workers and --count must be positive")
	}
	if c.dispose != "each" && c.dispose != "batch" {
		return nil, errors.New("--dispose is each or batch")
	}
	admin, err := schema.Open(ctx, c.server, schema.Options{})
	if err != nil {
		return nil, fmt.Errorf("opening --server: %w", err)
	}
	defer admin.Close()
	kind := admin.Driver.Name()
	if kind != "postgres" && kind != "mysql" {
		return nil, fmt.Errorf("--server: %s is not measured (PostgreSQL, MariaDB/MySQL)", kind)
	}
	name := fmt.Sprintf("wamp_%d", os.Getpid())
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return nil, fmt.Errorf("creating database %s: %w", name, err)
	}
	dsnOf, err := withDatabase(c.server, name)
	if err != nil {
		return nil, err
	}
	defer func() {
		if c.keep {
			fmt.Fprintf(os.Stderr, "write-amp: kept database %s\n", name)
			return
		}
		drop := "DROP DATABASE " + name
		if kind == "postgres" {
			drop += " WITH (FORCE)"
		}
		if _, err := admin.ExecContext(context.Background(), drop); err != nil {
			fmt.Fprintf(os.Stderr, "write-amp: dropping %s: %v\n", name, err)
		}
	}()

	// The schema, then the item tables, through a pool of its own.
	setup, err := schema.Open(ctx, dsnOf, schema.Options{Migrate: schema.Always})
	if err != nil {
		return nil, fmt.Errorf("migrating %s: %w", name, err)
	}
	d := setup.Driver
	for _, t := range []string{"wamp_raw", "wamp_loan"} {
		if err := fillItems(ctx, setup.DB, kind, t, c.loans); err != nil {
			setup.Close()
			return nil, err
		}
	}
	setup.Close()

	var m meter
	if kind == "postgres" {
		m, err = newPGMeter(ctx, dsnOf, c.pgWAL, c.checkpoint)
	} else {
		m, err = newMyMeter(ctx, dsnOf, name)
	}
	if err != nil {
		return nil, err
	}
	defer m.close()

	out := &Output{Label: c.label, Server: m.server(), Loans: c.loans, Workers: c.workers, Count: c.count, Dispose: c.dispose, Strategy: c.strategy}
	if !c.noRaw {
		p, err := measure(ctx, m, "raw", func() (int64, error) { return runRaw(ctx, dsnOf, d, c.workers) })
		if err != nil {
			return out, fmt.Errorf("raw phase: %w", err)
		}
		out.Phases = append(out.Phases, p)
	}
	// The task, created before the phase's first reading.
	{
		db, err := schema.Open(ctx, dsnOf, schema.Options{Check: true})
		if err != nil {
			return out, err
		}
		_, _, err = dispatch.NewAdmin(db.DB, db.Driver).CreateTask(ctx, dispatch.TaskSpec{Name: "wamp", Source: "wamp_loan", Key: "id",
			Where: "status = 'ready'", Order: "id", Lock: drivers.Strategy(c.strategy), CreatedBy: "write-amp"})
		db.Close()
		if err != nil {
			return out, fmt.Errorf("creating the task: %w", err)
		}
	}
	p, err := measure(ctx, m, "engine", func() (int64, error) { return runEngine(ctx, dsnOf, c) })
	if err != nil {
		return out, fmt.Errorf("engine phase: %w", err)
	}
	out.Phases = append(out.Phases, p)
	return out, nil
}

// withDatabase is the server DSN naming database name instead.
func withDatabase(server, name string) (string, error) {
	u, err := url.Parse(server)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("--server: give a URL DSN (postgres://…, mysql://…)")
	}
	u.Path = "/" + name
	return u.String(), nil
}

// fillItems creates an item table (the bench's loanq_bench_item: its
// columns and indexes) with n ready items.
func fillItems(ctx context.Context, pool *sql.DB, kind, table string, n int) error {
	// One connection: the session setting below applies to it.
	db, err := pool.Conn(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	var stmts []string
	if kind == "postgres" {
		stmts = []string{
			`CREATE TABLE ` + table + ` (id BIGINT NOT NULL PRIMARY KEY, status VARCHAR(10) NOT NULL DEFAULT 'ready',
  owner VARCHAR(100), claimed_at TIMESTAMPTZ, lease_expires_at TIMESTAMPTZ, processed_at TIMESTAMPTZ, processed INTEGER NOT NULL DEFAULT 0)`,
			`CREATE INDEX ` + table + `_status_ix ON ` + table + ` (status, id)`,
			`CREATE INDEX ` + table + `_ready_ix ON ` + table + ` (id) WHERE status = 'ready'`,
			fmt.Sprintf(`INSERT INTO %s (id, status, processed) SELECT g, 'ready', 0 FROM generate_series(1, %d) AS g`, table, n),
			`ANALYZE ` + table,
		}
	} else {
		stmts = []string{
			`CREATE TABLE ` + table + ` (id BIGINT NOT NULL PRIMARY KEY, status VARCHAR(10) NOT NULL DEFAULT 'ready',
  owner VARCHAR(100), claimed_at DATETIME(6), lease_expires_at DATETIME(6), processed_at DATETIME(6), processed INT NOT NULL DEFAULT 0)
  ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin`,
			`CREATE INDEX ` + table + `_status_ix ON ` + table + ` (status, id)`,
			fmt.Sprintf(`INSERT INTO %s (id, status, processed) WITH RECURSIVE seq (k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM seq WHERE k < %d) SELECT k, 'ready', 0 FROM seq`, table, n),
			`ANALYZE TABLE ` + table,
		}
	}
	if kind == "mysql" {
		if _, err := db.ExecContext(ctx, `SET SESSION cte_max_recursion_depth = 100000000`); err != nil {
			// MariaDB names it max_recursive_iterations.
			if _, err := db.ExecContext(ctx, `SET SESSION max_recursive_iterations = 100000000`); err != nil {
				return err
			}
		}
	}
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("filling %s: %w", table, err)
		}
	}
	return nil
}

// meter reads a server's counters around a phase.
type meter interface {
	server() string
	before(ctx context.Context) error
	// after reads the counters again once the phase's connections are
	// gone, and fills p.
	after(ctx context.Context, p *Phase) error
	close()
}

func measure(ctx context.Context, m meter, name string, phase func() (int64, error)) (*Phase, error) {
	if err := m.before(ctx); err != nil {
		return nil, err
	}
	t0 := time.Now()
	n, err := phase()
	took := time.Since(t0)
	if err != nil {
		return nil, err
	}
	p := &Phase{Name: name, Served: n, Seconds: round(took.Seconds(), 3), Tables: map[string]*TableFigures{}}
	if took > 0 {
		p.PerS = round(float64(n)/took.Seconds(), 1)
	}
	if err := m.after(ctx, p); err != nil {
		return nil, err
	}
	perLoan(p)
	return p, nil
}

// perLoan divides the phase's totals by the loans it served.
func perLoan(p *Phase) {
	if p.Served == 0 {
		return
	}
	n := float64(p.Served)
	pl := &p.PerLoan
	pl.RowsByTable = map[string]string{}
	for t, f := range p.Tables {
		pl.RowsInserted += float64(f.Inserted) / n
		pl.RowsUpdated += float64(f.Updated) / n
		pl.RowsHOT += float64(f.HOT) / n
		if f.Inserted+f.Updated+f.Deleted+f.Changed > 0 {
			if f.Changed > 0 && f.Inserted+f.Updated == 0 {
				pl.RowsByTable[t] = fmt.Sprintf("changed %.2f", float64(f.Changed)/n)
			} else {
				pl.RowsByTable[t] = fmt.Sprintf("%.2f/%.2f(%.2f)/%.2f", float64(f.Inserted)/n, float64(f.Updated)/n, float64(f.HOT)/n, float64(f.Deleted)/n)
			}
		}
	}
	pl.RowsInserted, pl.RowsUpdated, pl.RowsHOT = round(pl.RowsInserted, 2), round(pl.RowsUpdated, 2), round(pl.RowsHOT, 2)
	if len(p.Indexes) > 0 {
		pl.ByTable, pl.EntriesByIndex = map[string]float64{}, map[string]float64{}
		for name, ix := range p.Indexes {
			pl.IndexEntries += float64(ix.Entries) / n
			pl.ByTable[ix.Table] = round(pl.ByTable[ix.Table]+float64(ix.Entries)/n, 3)
			if ix.Entries > 0 {
				pl.EntriesByIndex[name] = round(float64(ix.Entries)/n, 3)
			}
		}
		pl.IndexEntries = round(pl.IndexEntries, 2)
	}
	if w := p.WAL; w != nil {
		pl.WALBytes = round(float64(w.Bytes)/n, 1)
		pl.WALBytesNoFPI = round(float64(w.Bytes-w.FPIBytes)/n, 1)
		pl.WALRecords = round(float64(w.Records)/n, 2)
		pl.Commits = round(float64(w.Commits)/n, 2)
		pl.WALBytesByRel = map[string]float64{}
		for t, b := range w.BytesByTable {
			pl.WALBytesByRel[t] = round(float64(b)/n, 1)
		}
	}
	if r := p.Redo; r != nil {
		pl.RedoBytes = round(float64(r.Bytes)/n, 1)
	}
}

func round(x float64, places int) float64 {
	p := 1.0
	for range places {
		p *= 10
	}
	if x < 0 {
		return -float64(int64(-x*p+0.5)) / p
	}
	return float64(int64(x*p+0.5)) / p
}

// runRaw is the raw claim: each worker claims one ready item at a time
// under a row lock, skipping held ones, and marks it done in the same
// transaction, until none is left.
func runRaw(ctx context.Context, dsnOf string, d drivers.Driver, workers int) (int64, error) {
	db, err := schema.Open(ctx, dsnOf, schema.Options{Conns: workers + 1})
	if err != nil {
		return 0, err
	}
	defer db.Close()
	now := "clock_timestamp()"
	if d.Name() == "mysql" {
		now = "UTC_TIMESTAMP(6)"
	}
	// MySQL: READ COMMITTED, as the bench's claim (bench/dialects.go):
	// finishing an item never waits for another claimer's gap lock.
	var txOpts *sql.TxOptions
	if d.Name() == "mysql" {
		txOpts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	claim := `SELECT id FROM wamp_raw WHERE status = 'ready' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED`
	done := drivers.Rebind(d.Dialect(), `UPDATE wamp_raw SET status = 'done', owner = ?, processed = processed + 1, processed_at = `+now+` WHERE id = ?`)
	var total int64
	var mu sync.Mutex
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("raw-%03d", w)
			for {
				var id int64
				err := drivers.RetryDeadlock(ctx, d, 6, func() error {
					tx, err := db.BeginTx(ctx, txOpts)
					if err != nil {
						return err
					}
					defer tx.Rollback()
					if err := tx.QueryRowContext(ctx, claim).Scan(&id); err != nil {
						return err
					}
					if _, err := tx.ExecContext(ctx, done, owner, id); err != nil {
						return err
					}
					return tx.Commit()
				})
				if errors.Is(err, sql.ErrNoRows) {
					return
				}
				if err != nil {
					errs[w] = err
					return
				}
				mu.Lock()
				total++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return total, errors.Join(errs...)
}

// runEngine is the engine bench's loop: work get, then for each loan the
// item marked done and the loan completed, until an empty answer.
func runEngine(ctx context.Context, dsnOf string, c config) (int64, error) {
	db, err := schema.Open(ctx, dsnOf, schema.Options{Conns: 2*c.workers + 2, Check: true})
	if err != nil {
		return 0, err
	}
	defer db.Close()
	d := db.Driver
	now := "clock_timestamp()"
	if d.Name() == "mysql" {
		now = "UTC_TIMESTAMP(6)"
	}
	done := drivers.Rebind(d.Dialect(), `UPDATE wamp_loan SET status = 'done', owner = ?, processed = processed + 1, processed_at = `+now+` WHERE id = ?`)
	var total int64
	var mu sync.Mutex
	errs := make([]error, c.workers)
	var wg sync.WaitGroup
	for w := range c.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := dispatch.New(db.DB, d)
			user := fmt.Sprintf("wamp-%03d", w)
			opt := dispatch.GetOptions{Lock: drivers.Strategy(c.strategy), Timeout: time.Minute}
			for {
				req, err := e.Get(ctx, "wamp", user, c.count, opt)
				for tries := 0; err != nil && problem.KindOf(err) == problem.Busy && req != nil && tries < 3; tries++ {
					req, err = e.Status(ctx, req.ID, true, opt)
				}
				if err != nil {
					errs[w] = fmt.Errorf("caller %d: work get: %w", w, err)
					return
				}
				if len(req.Loans) == 0 {
					return
				}
				if c.dispose == "batch" {
					if err := doneMany(ctx, d, db.DB, now, user, req.Loans); err == nil {
						keys := loankey.Texts(req.Loans)
						_, err = e.DisposeMany(ctx, "wamp", keys, user, dispatch.Complete, 0, false, dispatch.DispositionNote{})
					}
					if err != nil {
						errs[w] = fmt.Errorf("caller %d: %d loans: %w", w, len(req.Loans), err)
						return
					}
					mu.Lock()
					total += int64(len(req.Loans))
					mu.Unlock()
					continue
				}
				for _, loan := range req.Loans {
					err := drivers.RetryDeadlock(ctx, d, 6, func() error {
						_, err := db.ExecContext(ctx, done, user, loan.Int64())
						return err
					})
					if err == nil {
						_, err = e.Dispose(ctx, "wamp", loan.String(), user, dispatch.Complete, 0, false)
					}
					if err != nil {
						errs[w] = fmt.Errorf("caller %d: loan %s: %w", w, loan, err)
						return
					}
				}
				mu.Lock()
				total += int64(len(req.Loans))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return total, errors.Join(errs...)
}

// doneMany marks a get's items done with one UPDATE (--dispose batch), run
// again if it is a deadlock victim, as the item's UPDATE per loan is.
func doneMany(ctx context.Context, d drivers.Driver, db *sql.DB, now, user string, loans []loankey.Key) error {
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(loans)), ", ")
	q := drivers.Rebind(d.Dialect(), `UPDATE wamp_loan SET status = 'done', owner = ?, processed = processed + 1, processed_at = `+now+` WHERE id IN (`+marks+`)`)
	args := []any{user}
	for _, l := range loans {
		args = append(args, l.Int64())
	}
	return drivers.RetryDeadlock(ctx, d, 6, func() error {
		_, err := db.ExecContext(ctx, q, args...)
		return err
	})
}
