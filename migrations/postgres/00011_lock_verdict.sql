-- The rows strategy's lock probe (docs/algorithm.md, "The rows strategy";
-- `loanq explain`): `task create|update --lock rows` measures how many
-- rows one claim locks and keeps its verdict here, for `task show`
-- ("ok: a claim of 5 locks 5 rows", or the warning a DBA accepted with
-- --allow-wide-locks). NULL: never probed (other strategies, or tasks
-- created before this migration).

-- +goose Up
ALTER TABLE loanq_task ADD COLUMN lock_verdict VARCHAR(1000);

-- +goose Down
ALTER TABLE loanq_task DROP COLUMN lock_verdict;
