-- The engine under contention (docs/algorithm.md). SQLite has no row locks,
-- so the rows strategy is refused here and lock_strategy's CHECK stays as it
-- is. The per-user lock table exists on every database so that `task delete`
-- is one portable set of statements; here it stays empty. The index serves
-- the arrival rate coalescing reads (RequestRate).

-- +goose Up
CREATE TABLE loanq_task_user (
    task_id   INTEGER NOT NULL,
    user_name TEXT    NOT NULL,
    PRIMARY KEY (task_id, user_name)
);
CREATE INDEX loanq_work_request_rate_ix ON loanq_work_request (task_id, created_at);

-- +goose Down
DROP INDEX loanq_work_request_rate_ix;
DROP TABLE loanq_task_user;
