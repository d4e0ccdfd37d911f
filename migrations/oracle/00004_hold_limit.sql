-- The hold limit of a task (docs/reliability.md, docs/oracle.md). NULL means
-- the default derived from the task's measured criteria-query time. Oracle
-- sessions cannot bound their own idle time: docs/oracle.md says what a DBA
-- configures so that the limit is enforced.

-- +goose Up
-- +goose StatementBegin
ALTER TABLE loanq_task ADD (hold_limit_ms NUMBER(19)
    CONSTRAINT loanq_task_hold_ck CHECK (hold_limit_ms IS NULL OR hold_limit_ms > 0))
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
ALTER TABLE loanq_task DROP (hold_limit_ms)
-- +goose StatementEnd
