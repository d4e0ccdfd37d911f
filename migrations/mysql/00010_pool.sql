-- The candidate pool of a task (docs/algorithm.md, "The candidate pool"):
-- see migrations/postgres/00010_pool.sql for what each column means. The
-- claim reads the pool through (task_id, pos) in order with LIMIT … FOR
-- UPDATE SKIP LOCKED at READ COMMITTED, so InnoDB locks the rows it returns
-- and no others.

-- +goose Up
ALTER TABLE loanq_task ADD COLUMN prefetch INT, ADD COLUMN prefetch_ttl_ms BIGINT, ADD COLUMN prefetch_low INT,
    ADD CONSTRAINT loanq_task_prefetch_ck
    CHECK ((prefetch IS NULL OR prefetch > 0) AND (prefetch_ttl_ms IS NULL OR prefetch_ttl_ms > 0) AND (prefetch_low IS NULL OR prefetch_low >= 0));
ALTER TABLE loanq_work_request ADD COLUMN pooled SMALLINT;
ALTER TABLE loanq_query_run ADD COLUMN pooled INT;

CREATE TABLE loanq_pool (
    task_id   BIGINT      NOT NULL,
    loan_id   BIGINT      NOT NULL,
    pos       INT         NOT NULL,
    filled_at DATETIME(6) NOT NULL,
    PRIMARY KEY (task_id, loan_id),
    INDEX loanq_pool_order_ix (task_id, pos),
    CONSTRAINT loanq_pool_task_fk FOREIGN KEY (task_id) REFERENCES loanq_task (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE loanq_pool;
ALTER TABLE loanq_query_run DROP COLUMN pooled;
ALTER TABLE loanq_work_request DROP COLUMN pooled;
ALTER TABLE loanq_task DROP CONSTRAINT loanq_task_prefetch_ck, DROP COLUMN prefetch_low, DROP COLUMN prefetch_ttl_ms, DROP COLUMN prefetch;
