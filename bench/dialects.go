package bench

// What each database says its own way for the bench: statement overrides and
// the item table's DDL. The table is the bench's own: created by `loanq
// bench` before a run and dropped after it (tables.go), never by `loanq
// migrate` (migration 00014 removed the copy that 00002 used to create).
//
// status: ready -> done for the row-lock strategies (claimed and finished in
// one transaction, the row lock is the claim); ready -> claimed -> done for
// lease, where the claim is committed with an expiry and no lock is held
// while the item is worked on. processed counts how often an item was
// finished: more than 1 is a duplicate, which the bench reports.

type dialect struct {
	statements   func(*Statements)
	create, drop []string
}

var dialects = map[string]dialect{
	"postgres": {statements: postgresStatements, create: postgresCreate, drop: dropIfExists},
	"mysql":    {statements: mysqlStatements, create: mysqlCreate, drop: dropIfExists},
	"sqlite":   {statements: sqliteStatements, create: sqliteCreate, drop: dropIfExists},
	"oracle":   {statements: oracleStatements, create: oracleCreate, drop: oracleDrop},
}

// dropIfExists drops the table with its indexes, and nothing when it is gone.
var dropIfExists = []string{`DROP TABLE IF EXISTS loanq_bench_item`}

// --- PostgreSQL ---

var postgresCreate = []string{`CREATE TABLE loanq_bench_item (
    id               BIGINT       NOT NULL PRIMARY KEY,
    status           VARCHAR(10)  NOT NULL DEFAULT 'ready',
    owner            VARCHAR(100),
    claimed_at       TIMESTAMPTZ,
    lease_expires_at TIMESTAMPTZ,
    processed_at     TIMESTAMPTZ,
    processed        INTEGER      NOT NULL DEFAULT 0,
    CONSTRAINT loanq_bench_item_status_ck CHECK (status IN ('ready', 'claimed', 'done'))
)`,
	// The claim reads "WHERE status = 'ready' ORDER BY id LIMIT k": this
	// index gives the rows in claim order, so the locking read stops after k.
	`CREATE INDEX loanq_bench_item_status_ix ON loanq_bench_item (status, id)`,
	// Once items are done, the planner walked the primary key in id order
	// and filtered every done row it passed, one heap visit each, on every
	// claim: its statistics (half the table ready, spread evenly) did not say
	// that done rows pile up at the low ids. Measured: 900 raw claims/s after
	// 10,000 items instead of 5,000 and more, and the engine's rows claim
	// slowed the same way. A partial index of the ready rows gives the claim
	// order with nothing to filter (docs/postgres.md, "Index the criteria
	// like a queue", says the same for a task's own source table).
	`CREATE INDEX loanq_bench_item_ready_ix ON loanq_bench_item (id) WHERE status = 'ready'`,
}

func postgresStatements(s *Statements) {
	s.Fill.SQL = `INSERT INTO loanq_bench_item (id, status, processed)
SELECT g, 'ready', 0 FROM generate_series(:first::bigint, :first::bigint + :count::bigint - 1) AS g`
	// The subselect's SKIP LOCKED only lasts for the claim's own short
	// transaction: it keeps concurrent claimers from picking the same ids.
	// Without it they all pick the first ready ids, all but one wait for the
	// winner's commit and then find the rows no longer ready (PostgreSQL
	// re-checks status = 'ready' on the new row version, so nothing is leased
	// twice), and come back empty: measured at 32 workers × 20,000 items,
	// under 100 items/s. The lease, not this lock, covers the work.
	// The pick is a MATERIALIZED CTE, run exactly once. As an IN (subquery)
	// the planner may re-run it for every row it scans (a SubPlan in a nested
	// loop); with SKIP LOCKED each run skips the rows the previous one locked
	// and returns the next ones, so one claim took every ready item
	// (bench_test's max_claim check caught it on a 40-row table).
	s.LeaseClaim.SQL = `WITH picked AS MATERIALIZED (
  SELECT id FROM loanq_bench_item WHERE status = 'ready' ORDER BY id LIMIT :limit
  FOR UPDATE SKIP LOCKED)
UPDATE loanq_bench_item b
SET status = 'claimed', owner = :owner, claimed_at = clock_timestamp(),
    lease_expires_at = clock_timestamp() + :ttl_ms::bigint * INTERVAL '1 millisecond'
FROM picked
WHERE b.id = picked.id
RETURNING b.id`
	// MATERIALIZED for the same reason as LeaseClaim: the pick runs once.
	s.ClaimDone.SQL = `WITH picked AS MATERIALIZED (
  SELECT id FROM loanq_bench_item WHERE status = 'ready' ORDER BY id LIMIT :limit
  FOR UPDATE SKIP LOCKED)
UPDATE loanq_bench_item b
SET status = 'done', owner = :owner, processed = b.processed + 1, processed_at = clock_timestamp()
FROM picked
WHERE b.id = picked.id`
	s.ServerVersion.SQL = `SELECT 'PostgreSQL ' || current_setting('server_version') AS version`
}

// --- MySQL and MariaDB ---

var mysqlCreate = []string{`CREATE TABLE loanq_bench_item (
    id               BIGINT       NOT NULL PRIMARY KEY,
    status           VARCHAR(10)  NOT NULL DEFAULT 'ready',
    owner            VARCHAR(100),
    claimed_at       DATETIME(6),
    lease_expires_at DATETIME(6),
    processed_at     DATETIME(6),
    processed        INT          NOT NULL DEFAULT 0,
    CONSTRAINT loanq_bench_item_status_ck CHECK (status IN ('ready', 'claimed', 'done'))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin`,
	// InnoDB locks every index record a locking read scans, not only the
	// rows it returns. Without this index "WHERE status = 'ready' ORDER BY id
	// LIMIT k FOR UPDATE" would scan (and lock, or with SKIP LOCKED test) the
	// primary key from the start, done rows included; with it the read walks
	// the ready rows in id order and stops after k.
	`CREATE INDEX loanq_bench_item_status_ix ON loanq_bench_item (status, id)`,
}

// mysqlItemIDs is a batch's item ids as a table j(id).
const mysqlItemIDs = `JSON_TABLE(:ids, '$[*]' COLUMNS (id BIGINT PATH '$')) AS j`

func mysqlStatements(s *Statements) {
	s.Analyze.SQL = `ANALYZE TABLE loanq_bench_item`
	s.Fill.SQL = `INSERT INTO loanq_bench_item (id, status, processed)
WITH RECURSIVE seq (n, k) AS (
  SELECT CAST(:first AS SIGNED), CAST(:count AS SIGNED)
  UNION ALL SELECT n + 1, k - 1 FROM seq WHERE k > 1)
SELECT n, 'ready', 0 FROM seq`
	// SET TRANSACTION without SESSION applies to the next transaction only.
	// READ COMMITTED locks index records without the gaps between them, so
	// finishing an item (a new (done, id) entry in the status index) never
	// waits for another claimer's gap lock: no deadlocks, even with wait.
	s.Begin.SQL = `SET TRANSACTION ISOLATION LEVEL READ COMMITTED`
	// MySQL rejects a subselect on the table being updated (error 1093) and
	// has no RETURNING: the lease is an UPDATE … ORDER BY … LIMIT, and the ids
	// are read back by owner in the same transaction.
	s.LeaseClaim.SQL = `UPDATE loanq_bench_item
SET status = 'claimed', owner = :owner, claimed_at = UTC_TIMESTAMP(6),
    lease_expires_at = UTC_TIMESTAMP(6) + INTERVAL (:ttl_ms * 1000) MICROSECOND
WHERE status = 'ready'
ORDER BY id LIMIT :limit`
	s.LeaseRead.SQL = `SELECT id FROM loanq_bench_item WHERE owner = :owner AND status = 'claimed' ORDER BY id`
	// The batch finishes as joins from the id list, each item looked up by
	// its primary key: MariaDB runs UPDATE … WHERE id IN (SELECT … FROM
	// JSON_TABLE …) as a dependent subquery over every row of the table,
	// and InnoDB locks each row it scans, so concurrent finishes waited on
	// one another's items until the lock-wait timeout
	// (TestBatchFinishLocksOnlyItsItems). loanq's own DisposeLoans is a join
	// for the same reason (drivers/mysql/sql.go).
	s.DoneMany.SQL = `UPDATE ` + mysqlItemIDs + `
STRAIGHT_JOIN loanq_bench_item i ON i.id = j.id
SET i.status = 'done', i.owner = :owner, i.processed = i.processed + 1, i.processed_at = {{now}}`
	s.LeaseDoneMany.SQL = `UPDATE ` + mysqlItemIDs + `
STRAIGHT_JOIN loanq_bench_item i ON i.id = j.id
SET i.status = 'done', i.processed = i.processed + 1, i.processed_at = {{now}}
WHERE i.owner = :owner AND i.status = 'claimed' AND i.lease_expires_at > {{now}}`
	// VERSION() alone reads "10.11.6-MariaDB-…" or "8.0.36": name the product.
	s.ServerVersion.SQL = `SELECT CASE WHEN LOCATE('MariaDB', VERSION()) > 0 THEN CONCAT('MariaDB ', VERSION()) ELSE CONCAT('MySQL ', VERSION()) END AS version`
}

// --- SQLite ---

var sqliteCreate = []string{`CREATE TABLE loanq_bench_item (
    id               INTEGER NOT NULL PRIMARY KEY,
    status           TEXT    NOT NULL DEFAULT 'ready',
    owner            TEXT,
    claimed_at       TEXT,
    lease_expires_at TEXT,
    processed_at     TEXT,
    processed        INTEGER NOT NULL DEFAULT 0,
    CONSTRAINT loanq_bench_item_status_ck CHECK (status IN ('ready', 'claimed', 'done'))
)`,
	`CREATE INDEX loanq_bench_item_status_ix ON loanq_bench_item (status, id)`,
}

// SQLite has no row locks: only lease runs. The claim runs in an immediate
// transaction (the write lock is taken at BEGIN), so two claimers never read
// the same ready rows; it is committed at once and nobody holds a lock while
// the items are worked on.
func sqliteStatements(s *Statements) {
	s.ClaimSkip.SQL, s.ClaimNoWait.SQL, s.ClaimWait.SQL = "", "", ""
	s.Fill.SQL = `WITH RECURSIVE seq (n, k) AS (
  SELECT CAST(:first AS INTEGER), CAST(:count AS INTEGER)
  UNION ALL SELECT n + 1, k - 1 FROM seq WHERE k > 1)
INSERT INTO loanq_bench_item (id, status, processed)
SELECT n, 'ready', 0 FROM seq`
	s.LeaseClaim.SQL = `UPDATE loanq_bench_item
SET status = 'claimed', owner = :owner, claimed_at = {{now}},
    lease_expires_at = {{nowPlusMs ":ttl_ms"}}
WHERE status = 'ready'
  AND id IN (SELECT id FROM loanq_bench_item WHERE status = 'ready' ORDER BY id LIMIT :limit)
RETURNING id`
	s.ServerVersion.SQL = `SELECT 'SQLite ' || sqlite_version() AS version`
}

// --- Oracle ---
//
// Every statement is sent as is, without a trailing ';' (Oracle rejects one
// after plain SQL); the PL/SQL blocks keep their END; (testdata/oracle/
// bench.sql is the exact text, `go test ./bench -run Golden -update`).

var oracleCreate = []string{`CREATE TABLE loanq_bench_item (
    id               NUMBER(19)         NOT NULL,
    status           VARCHAR2(10)       DEFAULT 'ready' NOT NULL,
    owner            VARCHAR2(100 CHAR),
    claimed_at       TIMESTAMP(6),
    lease_expires_at TIMESTAMP(6),
    processed_at     TIMESTAMP(6),
    processed        NUMBER(10)         DEFAULT 0 NOT NULL,
    CONSTRAINT loanq_bench_item_pk PRIMARY KEY (id),
    CONSTRAINT loanq_bench_item_status_ck CHECK (status IN ('ready', 'claimed', 'done'))
)`,
	// The claim cursor reads "WHERE status = 'ready' ORDER BY id": this index
	// hands the rows over in that order, so the cursor locks as it fetches.
	`CREATE INDEX loanq_bench_item_status_ix ON loanq_bench_item (status, id)`,
	// loanq_bench_claim locks up to p_max ready items for the caller's
	// transaction and marks them 'claimed' (owner left NULL); the caller then
	// reads its items with ClaimRead, which only its own transaction can
	// see: the row-lock strategies never commit 'claimed' (they commit 'done'
	// or roll back), and lease claims carry an owner. Call it inside a
	// transaction (autocommit off), or the locks end with the call.
	//
	// Why a cursor and not one SELECT: Oracle rejects FETCH FIRST together
	// with FOR UPDATE (ORA-02014), and applies ROWNUM before it locks (COUNT
	// STOPKEY sits under FOR UPDATE in the plan): "ROWNUM <= k FOR UPDATE
	// SKIP LOCKED" picks k candidate rows first and then skips the held ones,
	// so it returns fewer than k rows (none when all k are held) although
	// free rows remain. A FOR UPDATE SKIP LOCKED cursor has no row limit but
	// locks a row only when it is fetched, skipping rows other sessions hold,
	// so fetching stops after p_max rows locked.
	//
	// The skip cursor's rows were 'ready' when it was OPENed; a row that
	// another session finished and committed before this FETCH reached it is
	// no longer held, so FETCH locks and returns it, and whether Oracle
	// re-checks the cursor's predicate then is not settled by its manuals.
	// The UPDATE therefore re-checks status = 'ready' on the current row, and
	// only a row it changed (SQL%ROWCOUNT = 1) counts towards p_max.
	//
	// nowait and wait exist for the comparison with skip (BENCHMARKS.md). A
	// cursor without SKIP LOCKED locks every row of its result when it is
	// OPENed, before the first fetch: wait therefore queues behind whoever
	// holds any ready row and then holds them all until commit (fully
	// serialised), and nowait fails with ORA-00054 whenever any ready row is
	// held. The lock clause of a static cursor cannot be a parameter, hence
	// three cursors.
	`CREATE OR REPLACE PROCEDURE loanq_bench_claim (p_max IN NUMBER, p_mode IN VARCHAR2) IS
    CURSOR c_skip IS
        SELECT id FROM loanq_bench_item WHERE status = 'ready' ORDER BY id
        FOR UPDATE SKIP LOCKED;
    CURSOR c_nowait IS
        SELECT id FROM loanq_bench_item WHERE status = 'ready' ORDER BY id
        FOR UPDATE NOWAIT;
    CURSOR c_wait IS
        SELECT id FROM loanq_bench_item WHERE status = 'ready' ORDER BY id
        FOR UPDATE;
    l_id loanq_bench_item.id%TYPE;
    l_claimed PLS_INTEGER := 0;
BEGIN
    IF p_mode = 'skip' THEN
        OPEN c_skip;
        WHILE l_claimed < p_max LOOP
            FETCH c_skip INTO l_id;
            EXIT WHEN c_skip%NOTFOUND;
            UPDATE loanq_bench_item SET status = 'claimed' WHERE id = l_id AND status = 'ready';
            l_claimed := l_claimed + SQL%ROWCOUNT;
        END LOOP;
        CLOSE c_skip;
    ELSIF p_mode = 'nowait' THEN
        OPEN c_nowait;
        FOR i IN 1 .. p_max LOOP
            FETCH c_nowait INTO l_id;
            EXIT WHEN c_nowait%NOTFOUND;
            UPDATE loanq_bench_item SET status = 'claimed' WHERE CURRENT OF c_nowait;
        END LOOP;
        CLOSE c_nowait;
    ELSIF p_mode = 'wait' THEN
        OPEN c_wait;
        FOR i IN 1 .. p_max LOOP
            FETCH c_wait INTO l_id;
            EXIT WHEN c_wait%NOTFOUND;
            UPDATE loanq_bench_item SET status = 'claimed' WHERE CURRENT OF c_wait;
        END LOOP;
        CLOSE c_wait;
    ELSE
        RAISE_APPLICATION_ERROR(-20001, 'loanq_bench_claim: unknown mode ' || p_mode || ' (use skip, nowait or wait)');
    END IF;
END loanq_bench_claim;`,
}

// Oracle has no DROP … IF EXISTS before 23ai: each drop ignores only "does
// not exist" (ORA-04043 for the procedure, ORA-00942 for the table).
var oracleDrop = []string{`BEGIN
    EXECUTE IMMEDIATE 'DROP PROCEDURE loanq_bench_claim';
EXCEPTION WHEN OTHERS THEN
    IF SQLCODE != -4043 THEN RAISE; END IF;
END;`, `BEGIN
    EXECUTE IMMEDIATE 'DROP TABLE loanq_bench_item PURGE';
EXCEPTION WHEN OTHERS THEN
    IF SQLCODE != -942 THEN RAISE; END IF;
END;`}

// A locking claim cannot be one SELECT: Oracle applies ROWNUM before locking
// (COUNT STOPKEY under FOR UPDATE), so "ROWNUM <= K … FOR UPDATE SKIP LOCKED"
// picks K rows and then skips the held ones, returning fewer than K; and it
// rejects FETCH FIRST with FOR UPDATE (ORA-02014). The claims call the PL/SQL
// cursor procedure loanq_bench_claim (oracleCreate), which locks exactly the
// rows it fetches and marks them 'claimed' inside the caller's transaction;
// ClaimRead then reads them back — only this transaction sees its own
// uncommitted 'claimed' rows with no owner.
func oracleStatements(s *Statements) {
	s.Analyze.SQL = `BEGIN DBMS_STATS.GATHER_TABLE_STATS(USER, 'LOANQ_BENCH_ITEM'); END;`
	s.Fill.SQL = `INSERT INTO loanq_bench_item (id, status, processed)
SELECT :first + LEVEL - 1, 'ready', 0 FROM DUAL CONNECT BY LEVEL <= :count`
	s.ClaimSkip.SQL = `BEGIN loanq_bench_claim(:limit, 'skip'); END;`
	s.ClaimNoWait.SQL = `BEGIN loanq_bench_claim(:limit, 'nowait'); END;`
	s.ClaimWait.SQL = `BEGIN loanq_bench_claim(:limit, 'wait'); END;`
	s.ClaimRead.SQL = `SELECT id FROM loanq_bench_item WHERE status = 'claimed' AND owner IS NULL ORDER BY id`
	// The subselect takes no lock, so FETCH FIRST is allowed in it; the outer
	// status = 'ready' makes a second claimer of the same row update nothing
	// (Oracle restarts an UPDATE whose rows changed under it).
	s.LeaseClaim.SQL = `UPDATE loanq_bench_item
SET status = 'claimed', owner = :owner, claimed_at = {{now}},
    lease_expires_at = {{nowPlusMs ":ttl_ms"}}
WHERE status = 'ready'
  AND id IN (SELECT id FROM loanq_bench_item WHERE status = 'ready' ORDER BY id
             FETCH FIRST :limit ROWS ONLY)`
	s.LeaseRead.SQL = `SELECT id FROM loanq_bench_item WHERE owner = :owner AND status = 'claimed' ORDER BY id`
	// v$version is readable by every user (a public synonym).
	s.ServerVersion.SQL = `SELECT banner AS version FROM v$version WHERE ROWNUM = 1`
}
