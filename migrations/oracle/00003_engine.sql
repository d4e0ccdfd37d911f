-- The engine under contention (docs/algorithm.md): the rows strategy with its
-- PL/SQL cursor procedure, the per-user cap lock it needs, and the index the
-- arrival rate is read from. Same rules as 00001_schema.sql: every statement
-- is wrapped in StatementBegin/End without a trailing ';', the PL/SQL block
-- keeps its END; (testdata/oracle/migrate_up.sql is the exact text sent).

-- +goose Up
-- +goose StatementBegin
ALTER TABLE loanq_task DROP CONSTRAINT loanq_task_lock_ck
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_task ADD CONSTRAINT loanq_task_lock_ck
    CHECK (lock_strategy IN ('skip', 'nowait', 'wait', 'lease', 'rows'))
-- +goose StatementEnd

-- One row per (task, user) that ever claimed with the rows strategy on a
-- capped task. Locking it is the first statement of that user's claim: it
-- serialises the per-user cap check of one user of one task, and nothing else.
-- +goose StatementBegin
CREATE TABLE loanq_task_user (
    task_id   NUMBER(19)         NOT NULL,
    user_name VARCHAR2(100 CHAR) NOT NULL,
    CONSTRAINT loanq_task_user_pk PRIMARY KEY (task_id, user_name)
)
-- +goose StatementEnd

-- +goose StatementBegin
CREATE INDEX loanq_work_request_rate_ix ON loanq_work_request (task_id, created_at)
-- +goose StatementEnd

-- The keys loanq_lock_rows locked, in fetch order, private to the
-- transaction and gone at its commit or rollback.
-- +goose StatementBegin
CREATE GLOBAL TEMPORARY TABLE loanq_rows_locked (
    seq     NUMBER(10) NOT NULL,
    loan_id NUMBER(19) NOT NULL
) ON COMMIT DELETE ROWS
-- +goose StatementEnd

-- loanq_lock_rows locks up to p_max rows of a task's source for the caller's
-- transaction and records their keys in loanq_rows_locked. p_query is the
-- task's criteria query ending FOR UPDATE OF src.<key> SKIP LOCKED, with one
-- bind, :1, the task id (drivers/oracle/sql.go builds it). Call it inside a
-- transaction (autocommit off), or the locks end with the call.
--
-- Why a cursor: Oracle applies ROWNUM after it has locked every row the query
-- returns, and rejects FETCH FIRST together with FOR UPDATE (ORA-02014). A
-- FOR UPDATE SKIP LOCKED cursor has no row limit but locks a row only when it
-- is fetched, skipping rows other sessions hold, so fetching p_max rows locks
-- exactly p_max rows. A second call in the same transaction starts afresh.
-- +goose StatementBegin
CREATE OR REPLACE PROCEDURE loanq_lock_rows (p_task IN NUMBER, p_max IN NUMBER, p_query IN VARCHAR2) IS
    c    SYS_REFCURSOR;
    l_id NUMBER(19);
    l_n  PLS_INTEGER := 0;
BEGIN
    DELETE FROM loanq_rows_locked;
    OPEN c FOR p_query USING p_task;
    WHILE l_n < p_max LOOP
        FETCH c INTO l_id;
        EXIT WHEN c%NOTFOUND;
        l_n := l_n + 1;
        INSERT INTO loanq_rows_locked (seq, loan_id) VALUES (l_n, l_id);
    END LOOP;
    CLOSE c;
END loanq_lock_rows;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP PROCEDURE loanq_lock_rows
-- +goose StatementEnd

-- +goose StatementBegin
DROP TABLE loanq_rows_locked PURGE
-- +goose StatementEnd

-- +goose StatementBegin
DROP INDEX loanq_work_request_rate_ix
-- +goose StatementEnd

-- +goose StatementBegin
DROP TABLE loanq_task_user PURGE
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_task DROP CONSTRAINT loanq_task_lock_ck
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_task ADD CONSTRAINT loanq_task_lock_ck
    CHECK (lock_strategy IN ('skip', 'nowait', 'wait', 'lease'))
-- +goose StatementEnd
