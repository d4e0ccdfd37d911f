-- The hold limit of a task: how long a caller may hold the task's row lock
-- before the database ends its session (docs/reliability.md). NULL means the
-- default derived from the task's measured criteria-query time.

-- +goose Up
ALTER TABLE loanq_task ADD COLUMN hold_limit_ms BIGINT;
ALTER TABLE loanq_task ADD CONSTRAINT loanq_task_hold_ck CHECK (hold_limit_ms IS NULL OR hold_limit_ms > 0);

-- +goose Down
ALTER TABLE loanq_task DROP CONSTRAINT loanq_task_hold_ck;
ALTER TABLE loanq_task DROP COLUMN hold_limit_ms;
