-- Superseded by 00014: the bench creates its own table now (bench/dialects.go);
-- this stays for the history of databases migrated before.
-- The item table of `loanq bench` (figures in BENCHMARKS.md) and the PL/SQL
-- procedure that claims items from it. Nothing in the work queue reads them.
-- Same rules as 00001_schema.sql: every statement is wrapped in
-- StatementBegin/End without a trailing ';', the PL/SQL block keeps its END;
-- (testdata/oracle/migrate_up.sql is the exact text sent).
--
-- status: ready -> done for the row-lock strategies (claimed and finished in
-- one transaction, the row lock is the claim); ready -> claimed -> done for
-- lease, where the claim is committed with an expiry and no lock is held
-- while the item is worked on. processed counts how often an item was
-- finished: more than 1 is a duplicate, which the bench reports.

-- +goose Up
-- +goose StatementBegin
CREATE TABLE loanq_bench_item (
    id               NUMBER(19)         NOT NULL,
    status           VARCHAR2(10)       DEFAULT 'ready' NOT NULL,
    owner            VARCHAR2(100 CHAR),
    claimed_at       TIMESTAMP(6),
    lease_expires_at TIMESTAMP(6),
    processed_at     TIMESTAMP(6),
    processed        NUMBER(10)         DEFAULT 0 NOT NULL,
    CONSTRAINT loanq_bench_item_pk PRIMARY KEY (id),
    CONSTRAINT loanq_bench_item_status_ck CHECK (status IN ('ready', 'claimed', 'done'))
)
-- +goose StatementEnd

-- The claim cursor reads "WHERE status = 'ready' ORDER BY id": this index
-- hands the rows over in that order, so the cursor locks as it fetches.
-- +goose StatementBegin
CREATE INDEX loanq_bench_item_status_ix ON loanq_bench_item (status, id)
-- +goose StatementEnd

-- loanq_bench_claim locks up to p_max ready items for the caller's
-- transaction and marks them 'claimed' (owner left NULL); the caller then
-- reads its items with
--   SELECT id FROM loanq_bench_item WHERE status = 'claimed' AND owner IS NULL
-- which only its own transaction can see: the row-lock strategies never
-- commit 'claimed' (they commit 'done' or roll back), and lease claims carry
-- an owner. Call it inside a transaction (autocommit off), or the locks end
-- with the call.
--
-- Why a cursor and not one SELECT: Oracle rejects FETCH FIRST together with
-- FOR UPDATE (ORA-02014), and applies ROWNUM before it locks (COUNT STOPKEY
-- sits under FOR UPDATE in the plan): "ROWNUM <= k FOR UPDATE SKIP LOCKED"
-- picks k candidate rows first and then skips the held ones, so it returns
-- fewer than k rows (none when all k are held) although free rows remain. A
-- FOR UPDATE SKIP LOCKED cursor has no row limit but locks a row only when it
-- is fetched, skipping rows other sessions hold, so fetching stops after
-- p_max rows locked.
--
-- The skip cursor's rows were 'ready' when it was OPENed; a row that another
-- session finished and committed before this FETCH reached it is no longer
-- held, so FETCH locks and returns it, and whether Oracle re-checks the
-- cursor's predicate then is not settled by its manuals. The UPDATE therefore
-- re-checks status = 'ready' on the current row, and only a row it changed
-- (SQL%ROWCOUNT = 1) counts towards p_max.
--
-- nowait and wait exist for the comparison with skip (BENCHMARKS.md). A
-- cursor without SKIP LOCKED locks every row of its result when it is OPENed,
-- before the first fetch: wait therefore queues behind whoever holds any
-- ready row and then holds them all until commit (fully serialised), and
-- nowait fails with ORA-00054 whenever any ready row is held. The lock clause
-- of a static cursor cannot be a parameter, hence three cursors.
-- +goose StatementBegin
CREATE OR REPLACE PROCEDURE loanq_bench_claim (p_max IN NUMBER, p_mode IN VARCHAR2) IS
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
END loanq_bench_claim;
-- +goose StatementEnd

-- +goose Down
-- Each drop ignores "does not exist": 00014 dropped both already.
-- +goose StatementBegin
BEGIN
    EXECUTE IMMEDIATE 'DROP PROCEDURE loanq_bench_claim';
EXCEPTION WHEN OTHERS THEN
    IF SQLCODE != -4043 THEN RAISE; END IF;
END;
-- +goose StatementEnd

-- +goose StatementBegin
BEGIN
    EXECUTE IMMEDIATE 'DROP TABLE loanq_bench_item PURGE';
EXCEPTION WHEN OTHERS THEN
    IF SQLCODE != -942 THEN RAISE; END IF;
END;
-- +goose StatementEnd
