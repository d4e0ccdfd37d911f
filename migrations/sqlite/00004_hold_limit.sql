-- The hold limit of a task (docs/reliability.md). SQLite has no row locks and
-- no sessions to end: its only strategy is the lease, whose TTL bounds a
-- holder. The column is kept so every dialect stores the same task.

-- +goose Up
ALTER TABLE loanq_task ADD COLUMN hold_limit_ms INTEGER CHECK (hold_limit_ms IS NULL OR hold_limit_ms > 0);

-- +goose Down
ALTER TABLE loanq_task DROP COLUMN hold_limit_ms;
