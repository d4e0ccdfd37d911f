package main

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/loanq/loanq/schema"
)

// pgMeter reads PostgreSQL's counters of the run's database: one
// connection, held for the run, which also holds the temporary replication
// slot that keeps the WAL until pg_waldump has read it.
type pgMeter struct {
	db         *sql.DB
	conn       *sql.Conn
	version    string
	walDir     string
	dbOID      string
	checkpoint bool

	startLSN string
	tables   map[string]TableFigures
	scans    map[string]int64
	commits  int64
}

// WALFigures is the WAL of a phase that touched the run's database.
type WALFigures struct {
	StartLSN     string           `json:"start_lsn"`
	EndLSN       string           `json:"end_lsn"`
	ClusterBytes int64            `json:"cluster_bytes"` // every database's, for comparison
	Records      int64            `json:"records"`
	Bytes        int64            `json:"bytes"`
	FPIBytes     int64            `json:"fpi_bytes"` // full-page images in those bytes
	Commits      int64            `json:"commits"`   // commit records
	CommitBytes  int64            `json:"commit_bytes"`
	ByKind       map[string]int64 `json:"records_by_kind"` // "rmgr KIND table": records
	BytesByTable map[string]int64 `json:"bytes_by_table"`  // a table with its indexes
}

func newPGMeter(ctx context.Context, dsnOf, walDir string, checkpoint bool) (*pgMeter, error) {
	opened, err := schema.Open(ctx, dsnOf, schema.Options{Conns: 1})
	if err != nil {
		return nil, err
	}
	m := &pgMeter{db: opened.DB, checkpoint: checkpoint}
	if m.conn, err = m.db.Conn(ctx); err != nil {
		m.db.Close()
		return nil, err
	}
	var dataDir string
	err = m.conn.QueryRowContext(ctx, `SELECT current_setting('server_version'), current_setting('data_directory'),
  (SELECT oid::text FROM pg_database WHERE datname = current_database())`).Scan(&m.version, &dataDir, &m.dbOID)
	if err != nil {
		m.close()
		return nil, fmt.Errorf("reading the server's settings (a superuser is needed): %w", err)
	}
	m.walDir = walDir
	if m.walDir == "" {
		m.walDir = filepath.Join(dataDir, "pg_wal")
	}
	// Temporary: dropped when this session ends, whatever becomes of
	// this process.
	if _, err := m.conn.ExecContext(ctx, `SELECT pg_create_physical_replication_slot('wamp_'||pg_backend_pid(), true, true)`); err != nil {
		m.close()
		return nil, fmt.Errorf("creating a temporary replication slot to keep the WAL: %w", err)
	}
	return m, nil
}

func (m *pgMeter) server() string { return "PostgreSQL " + m.version }

func (m *pgMeter) close() {
	if m.conn != nil {
		m.conn.Close()
	}
	m.db.Close()
}

func (m *pgMeter) before(ctx context.Context) error {
	if m.checkpoint {
		if _, err := m.conn.ExecContext(ctx, `CHECKPOINT`); err != nil {
			return err
		}
	}
	var err error
	if m.tables, m.scans, m.commits, err = m.stats(ctx); err != nil {
		return err
	}
	return m.conn.QueryRowContext(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&m.startLSN)
}

// stats reads the database's table and index counters (after a fresh
// snapshot: the statistics read in a transaction are cached for it).
func (m *pgMeter) stats(ctx context.Context) (map[string]TableFigures, map[string]int64, int64, error) {
	if _, err := m.conn.ExecContext(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
		return nil, nil, 0, err
	}
	tables := map[string]TableFigures{}
	rows, err := m.conn.QueryContext(ctx, `SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del FROM pg_stat_user_tables`)
	if err != nil {
		return nil, nil, 0, err
	}
	for rows.Next() {
		var name string
		var f TableFigures
		if err := rows.Scan(&name, &f.Inserted, &f.Updated, &f.HOT, &f.Deleted); err != nil {
			rows.Close()
			return nil, nil, 0, err
		}
		tables[name] = f
	}
	rows.Close()
	scans := map[string]int64{}
	rows, err = m.conn.QueryContext(ctx, `SELECT indexrelname, idx_scan FROM pg_stat_user_indexes`)
	if err != nil {
		return nil, nil, 0, err
	}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			rows.Close()
			return nil, nil, 0, err
		}
		scans[name] = n
	}
	rows.Close()
	var commits int64
	err = m.conn.QueryRowContext(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&commits)
	return tables, scans, commits, err
}

func (m *pgMeter) after(ctx context.Context, p *Phase) error {
	// The phase's backends flush their counters when they exit: wait for
	// them to be gone.
	for i := 0; ; i++ {
		var n int
		if err := m.conn.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			break
		}
		if i > 100 {
			return fmt.Errorf("%d sessions of the phase still connected after 10 s", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var endLSN string
	var cluster int64
	if err := m.conn.QueryRowContext(ctx, `SELECT pg_current_wal_flush_lsn()::text, pg_wal_lsn_diff(pg_current_wal_flush_lsn(), $1::pg_lsn)::bigint`, m.startLSN).Scan(&endLSN, &cluster); err != nil {
		return err
	}
	tables, scans, commits, err := m.stats(ctx)
	if err != nil {
		return err
	}
	for name, f := range tables {
		b := m.tables[name]
		d := TableFigures{Inserted: f.Inserted - b.Inserted, Updated: f.Updated - b.Updated, HOT: f.HOT - b.HOT, Deleted: f.Deleted - b.Deleted}
		if d != (TableFigures{}) {
			p.Tables[name] = &d
		}
	}
	_ = commits - m.commits
	rels, err := m.relations(ctx)
	if err != nil {
		return err
	}
	p.Indexes = map[string]*IndexFigures{}
	for name, n := range scans {
		if rel, ok := rels.byName[name]; ok {
			p.Indexes[name] = &IndexFigures{Table: rel.table, Scans: n - m.scans[name]}
		}
	}
	w, err := m.wal(ctx, m.startLSN, endLSN, rels, p.Indexes)
	if err != nil {
		return err
	}
	w.ClusterBytes = cluster
	p.WAL = w
	// Indexes the phase neither read nor wrote say nothing.
	for name, ix := range p.Indexes {
		if ix.Scans == 0 && ix.Entries == 0 && ix.Bytes == 0 {
			delete(p.Indexes, name)
		}
	}
	return nil
}

type relation struct {
	name  string
	table string // the table, for an index; itself for a table
	index bool
}

type relations struct {
	byFile map[string]relation // relfilenode → relation
	byName map[string]relation // indexes by name
}

func (m *pgMeter) relations(ctx context.Context) (relations, error) {
	r := relations{byFile: map[string]relation{}, byName: map[string]relation{}}
	rows, err := m.conn.QueryContext(ctx, `SELECT c.relfilenode::text, c.relname, COALESCE(t.relname, c.relname), c.relkind = 'i'
FROM pg_class c LEFT JOIN pg_index i ON i.indexrelid = c.oid LEFT JOIN pg_class t ON t.oid = i.indrelid
WHERE c.relfilenode <> 0 AND c.relnamespace = 'public'::regnamespace`)
	if err != nil {
		return r, err
	}
	defer rows.Close()
	for rows.Next() {
		var file string
		var rel relation
		if err := rows.Scan(&file, &rel.name, &rel.table, &rel.index); err != nil {
			return r, err
		}
		r.byFile[file] = rel
		if rel.index {
			r.byName[rel.name] = rel
		}
	}
	return r, rows.Err()
}

var (
	walLine = regexp.MustCompile(`^rmgr: (\S+)\s+len \(rec/tot\):\s*(\d+)/\s*(\d+), tx:\s*(\d+), lsn: \S+, prev \S+, desc: (\S+)(.*)$`)
	blkRef  = regexp.MustCompile(`rel (\d+)/(\d+)/(\d+)`)
)

// wal reads the records between two LSNs with pg_waldump and keeps this
// database's: those that name one of its relations, and every record of a
// transaction that wrote one (its commit).
func (m *pgMeter) wal(ctx context.Context, start, end string, rels relations, ix map[string]*IndexFigures) (*WALFigures, error) {
	cmd := exec.CommandContext(ctx, waldump(), "-p", m.walDir, "-s", start, "-e", end)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("pg_waldump: %w", err)
	}
	type rec struct {
		rmgr, kind, rest string
		recLen, totLen   int64
		tx               string
		rel              *relation
		mine             bool
	}
	var recs []rec
	txs := map[string]bool{}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		g := walLine.FindStringSubmatch(sc.Text())
		if g == nil {
			continue
		}
		r := rec{rmgr: g[1], kind: g[5], rest: g[6], tx: g[4]}
		r.recLen, _ = strconv.ParseInt(g[2], 10, 64)
		r.totLen, _ = strconv.ParseInt(g[3], 10, 64)
		if b := blkRef.FindStringSubmatch(g[6]); b != nil && b[2] == m.dbOID {
			r.mine = true
			if rel, ok := rels.byFile[b[3]]; ok {
				r.rel = &rel
			}
			if r.tx != "0" {
				txs[r.tx] = true
			}
		}
		recs = append(recs, r)
	}
	if err := cmd.Wait(); err != nil && len(recs) == 0 {
		return nil, fmt.Errorf("pg_waldump -p %s -s %s -e %s: %v: %s", m.walDir, start, end, err, stderr.String())
	}
	w := &WALFigures{StartLSN: start, EndLSN: end, ByKind: map[string]int64{}, BytesByTable: map[string]int64{}}
	for _, r := range recs {
		if !r.mine && (r.tx == "0" || !txs[r.tx]) {
			continue
		}
		w.Records++
		w.Bytes += r.totLen
		w.FPIBytes += r.totLen - r.recLen
		where := "-"
		if r.rel != nil {
			where = r.rel.table
			w.BytesByTable[r.rel.table] += r.totLen
		} else if r.mine {
			where = "other relation"
			w.BytesByTable[where] += r.totLen
		}
		if r.rmgr == "Transaction" && strings.HasPrefix(r.kind, "COMMIT") {
			w.Commits++
			w.CommitBytes += r.totLen
		}
		if r.rel != nil && r.rel.index {
			where = r.rel.name
			f := ix[r.rel.name]
			if f == nil {
				f = &IndexFigures{Table: r.rel.table}
				ix[r.rel.name] = f
			}
			f.Bytes += r.totLen
			if r.rmgr == "Btree" && leafInsert(r.kind, r.rest) {
				f.Entries++
			}
		}
		w.ByKind[r.rmgr+" "+r.kind+" "+where]++
	}
	return w, nil
}

// leafInsert says whether a btree record adds an entry to a leaf page: an
// insert (INSERT_LEAF, INSERT_POST: into a posting list) or a split of a
// leaf page, whose record carries the new entry.
func leafInsert(kind, rest string) bool {
	switch kind {
	case "INSERT_LEAF", "INSERT_POST":
		return true
	case "SPLIT_L", "SPLIT_R":
		return strings.Contains(rest, "level: 0") || strings.Contains(rest, "level 0")
	}
	return false
}

// waldump is the pg_waldump of the newest installed server, else the PATH's.
func waldump() string {
	if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_waldump"); len(m) > 0 {
		return m[len(m)-1]
	}
	return "pg_waldump"
}
