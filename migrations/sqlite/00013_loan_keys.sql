-- Loan keys of any type: see migrations/postgres/00013_loan_keys.sql. SQLite
-- cannot change a column's type, and a column of INTEGER affinity would turn
-- a text key that looks like a number ('00123') into the integer 123: the
-- loan_id columns are replaced by TEXT ones (SQLite 3.35's DROP COLUMN; no
-- trigger or view refers to them), their indexes rebuilt.

-- +goose Up
ALTER TABLE loanq_task ADD COLUMN key_kind TEXT NOT NULL DEFAULT 'integer'
    CHECK (key_kind IN ('integer', 'text', 'uuid'));

DROP INDEX loanq_work_one_active_uq;
DROP INDEX loanq_work_task_loan_ix;
ALTER TABLE loanq_work ADD COLUMN loan_key TEXT NOT NULL DEFAULT '';
UPDATE loanq_work SET loan_key = CAST(loan_id AS TEXT);
ALTER TABLE loanq_work DROP COLUMN loan_id;
ALTER TABLE loanq_work RENAME COLUMN loan_key TO loan_id;
CREATE UNIQUE INDEX loanq_work_one_active_uq ON loanq_work (task_id, loan_id) WHERE disposition IS NULL;
CREATE INDEX loanq_work_task_loan_ix ON loanq_work (task_id, loan_id, disposition, return_at);

CREATE TABLE loanq_pool_new (
    task_id   INTEGER NOT NULL REFERENCES loanq_task (id),
    loan_id   TEXT    NOT NULL,
    pos       INTEGER NOT NULL,
    filled_at TEXT    NOT NULL,
    PRIMARY KEY (task_id, loan_id)
);
INSERT INTO loanq_pool_new (task_id, loan_id, pos, filled_at)
SELECT task_id, CAST(loan_id AS TEXT), pos, filled_at FROM loanq_pool;
DROP TABLE loanq_pool;
ALTER TABLE loanq_pool_new RENAME TO loanq_pool;
CREATE INDEX loanq_pool_order_ix ON loanq_pool (task_id, pos);

-- +goose Down
DROP INDEX loanq_work_one_active_uq;
DROP INDEX loanq_work_task_loan_ix;
ALTER TABLE loanq_work ADD COLUMN loan_int INTEGER NOT NULL DEFAULT 0;
UPDATE loanq_work SET loan_int = CAST(loan_id AS INTEGER);
ALTER TABLE loanq_work DROP COLUMN loan_id;
ALTER TABLE loanq_work RENAME COLUMN loan_int TO loan_id;
CREATE UNIQUE INDEX loanq_work_one_active_uq ON loanq_work (task_id, loan_id) WHERE disposition IS NULL;
CREATE INDEX loanq_work_task_loan_ix ON loanq_work (task_id, loan_id, disposition, return_at);
DELETE FROM loanq_pool;
ALTER TABLE loanq_task DROP COLUMN key_kind;
