-- Loan keys of any type: see migrations/postgres/00013_loan_keys.sql. Oracle
-- changes a NUMBER column to VARCHAR2 only while it is empty: loanq_work's
-- loan_id is replaced by a VARCHAR2(200 CHAR) column holding TO_CHAR of the
-- old ids, its indexes rebuilt (the identity triggers of migration 00008
-- name the column, and recompile on their next use). The pool is a cache of
-- candidates, emptied and refilled by the next serving round; the cursor
-- procedure's temporary table and the procedure itself now carry text keys.
-- Same statement rules as 00001_schema.sql. Only the exact text is tested:
-- no Oracle server runs loanq's tests.

-- +goose Up
-- +goose StatementBegin
ALTER TABLE loanq_task ADD (key_kind VARCHAR2(10) DEFAULT 'integer' NOT NULL,
    CONSTRAINT loanq_task_key_kind_ck CHECK (key_kind IN ('integer', 'text', 'uuid')))
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_work ADD (loan_key VARCHAR2(200 CHAR))
-- +goose StatementEnd

-- +goose StatementBegin
UPDATE loanq_work SET loan_key = TO_CHAR(loan_id)
-- +goose StatementEnd

-- +goose StatementBegin
DROP INDEX loanq_work_one_active_uq
-- +goose StatementEnd

-- +goose StatementBegin
DROP INDEX loanq_work_task_loan_ix
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_work DROP COLUMN loan_id
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_work RENAME COLUMN loan_key TO loan_id
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_work MODIFY (loan_id NOT NULL)
-- +goose StatementEnd

-- +goose StatementBegin
CREATE UNIQUE INDEX loanq_work_one_active_uq ON loanq_work (
    CASE WHEN disposition IS NULL THEN task_id END,
    CASE WHEN disposition IS NULL THEN loan_id END)
-- +goose StatementEnd

-- +goose StatementBegin
CREATE INDEX loanq_work_task_loan_ix ON loanq_work (task_id, loan_id, disposition, return_at)
-- +goose StatementEnd

-- +goose StatementBegin
DELETE FROM loanq_pool
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_pool MODIFY (loan_id VARCHAR2(200 CHAR))
-- +goose StatementEnd

-- +goose StatementBegin
DROP TABLE loanq_rows_locked PURGE
-- +goose StatementEnd

-- +goose StatementBegin
CREATE GLOBAL TEMPORARY TABLE loanq_rows_locked (
    seq     NUMBER(10)         NOT NULL,
    loan_id VARCHAR2(200 CHAR) NOT NULL
) ON COMMIT DELETE ROWS
-- +goose StatementEnd

-- loanq_lock_rows as in migration 00003, fetching the key as text (the
-- cursor selects TO_CHAR of the source key: drivers/oracle/sql.go).
-- +goose StatementBegin
CREATE OR REPLACE PROCEDURE loanq_lock_rows (p_task IN NUMBER, p_max IN NUMBER, p_query IN VARCHAR2) IS
    c    SYS_REFCURSOR;
    l_id VARCHAR2(200 CHAR);
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

-- +goose StatementBegin
DROP TABLE loanq_rows_locked PURGE
-- +goose StatementEnd

-- +goose StatementBegin
CREATE GLOBAL TEMPORARY TABLE loanq_rows_locked (
    seq     NUMBER(10) NOT NULL,
    loan_id NUMBER(19) NOT NULL
) ON COMMIT DELETE ROWS
-- +goose StatementEnd

-- +goose StatementBegin
DELETE FROM loanq_pool
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_pool MODIFY (loan_id NUMBER(19))
-- +goose StatementEnd

-- +goose StatementBegin
DROP INDEX loanq_work_one_active_uq
-- +goose StatementEnd

-- +goose StatementBegin
DROP INDEX loanq_work_task_loan_ix
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_work ADD (loan_num NUMBER(19))
-- +goose StatementEnd

-- +goose StatementBegin
UPDATE loanq_work SET loan_num = TO_NUMBER(loan_id)
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_work DROP COLUMN loan_id
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_work RENAME COLUMN loan_num TO loan_id
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_work MODIFY (loan_id NOT NULL)
-- +goose StatementEnd

-- +goose StatementBegin
CREATE UNIQUE INDEX loanq_work_one_active_uq ON loanq_work (
    CASE WHEN disposition IS NULL THEN task_id END,
    CASE WHEN disposition IS NULL THEN loan_id END)
-- +goose StatementEnd

-- +goose StatementBegin
CREATE INDEX loanq_work_task_loan_ix ON loanq_work (task_id, loan_id, disposition, return_at)
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_task DROP (key_kind)
-- +goose StatementEnd
