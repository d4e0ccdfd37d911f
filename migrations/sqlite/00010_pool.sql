-- The candidate pool of a task (docs/algorithm.md, "The candidate pool"):
-- see migrations/postgres/00010_pool.sql for what each column means. SQLite
-- has one writer at a time: a claim takes the write lock (BEGIN IMMEDIATE)
-- and the first pool rows in order.

-- +goose Up
ALTER TABLE loanq_task ADD COLUMN prefetch INTEGER CHECK (prefetch IS NULL OR prefetch > 0);
ALTER TABLE loanq_task ADD COLUMN prefetch_ttl_ms INTEGER CHECK (prefetch_ttl_ms IS NULL OR prefetch_ttl_ms > 0);
ALTER TABLE loanq_task ADD COLUMN prefetch_low INTEGER CHECK (prefetch_low IS NULL OR prefetch_low >= 0);
ALTER TABLE loanq_work_request ADD COLUMN pooled INTEGER;
ALTER TABLE loanq_query_run ADD COLUMN pooled INTEGER;

CREATE TABLE loanq_pool (
    task_id   INTEGER NOT NULL REFERENCES loanq_task (id),
    loan_id   INTEGER NOT NULL,
    pos       INTEGER NOT NULL,
    filled_at TEXT    NOT NULL,
    PRIMARY KEY (task_id, loan_id)
);
CREATE INDEX loanq_pool_order_ix ON loanq_pool (task_id, pos);

-- +goose Down
DROP TABLE loanq_pool;
ALTER TABLE loanq_query_run DROP COLUMN pooled;
ALTER TABLE loanq_work_request DROP COLUMN pooled;
ALTER TABLE loanq_task DROP COLUMN prefetch_low;
ALTER TABLE loanq_task DROP COLUMN prefetch_ttl_ms;
ALTER TABLE loanq_task DROP COLUMN prefetch;
