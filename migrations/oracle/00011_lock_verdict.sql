-- The rows strategy's lock probe (docs/algorithm.md, "The rows strategy";
-- `loanq explain`): `task create|update --lock rows` measures how many
-- rows one claim locks and keeps its verdict here, for `task show`
-- ("ok: a claim of 5 locks 5 rows", or the warning a DBA accepted with
-- --allow-wide-locks). NULL: never probed. Same statement rules as
-- 00001_schema.sql.

-- +goose Up
-- +goose StatementBegin
ALTER TABLE loanq_task ADD (lock_verdict VARCHAR2(1000 CHAR))
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
ALTER TABLE loanq_task DROP (lock_verdict)
-- +goose StatementEnd
