-- The engine under contention (docs/algorithm.md): the rows strategy, the
-- per-user cap lock it needs, and the index the arrival rate is read from.
-- DROP CONSTRAINT needs MySQL >= 8.0.19 or MariaDB >= 10.2.

-- +goose Up
ALTER TABLE loanq_task DROP CONSTRAINT loanq_task_lock_ck;
ALTER TABLE loanq_task ADD CONSTRAINT loanq_task_lock_ck
    CHECK (lock_strategy IN ('skip', 'nowait', 'wait', 'lease', 'rows'));

-- One row per (task, user) that ever claimed with the rows strategy on a
-- capped task. Locking it (through the primary key: one record, no gap) is
-- the first statement of that user's claim: it serialises the per-user cap
-- check of one user of one task, and nothing else.
CREATE TABLE loanq_task_user (
    task_id   BIGINT       NOT NULL,
    user_name VARCHAR(100) NOT NULL,
    PRIMARY KEY (task_id, user_name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Coalescing sizes the criteria query's room from the requests of the last
-- seconds (RequestRate): a range of this index.
CREATE INDEX loanq_work_request_rate_ix ON loanq_work_request (task_id, created_at);

-- +goose Down
DROP INDEX loanq_work_request_rate_ix ON loanq_work_request;
DROP TABLE loanq_task_user;
ALTER TABLE loanq_task DROP CONSTRAINT loanq_task_lock_ck;
ALTER TABLE loanq_task ADD CONSTRAINT loanq_task_lock_ck
    CHECK (lock_strategy IN ('skip', 'nowait', 'wait', 'lease'));
