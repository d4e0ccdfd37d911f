-- The bench's item table leaves the schema: `loanq bench` now creates it
-- for a run and drops it after (bench/dialects.go), so a production schema
-- holds loanq's own tables only. This drops the copy that 00002 created in
-- databases migrated before; in a new database 00002 creates it and this
-- drops it in the same `migrate up`. IF EXISTS: a bench run may have
-- dropped it already.
--
-- Down recreates nothing: the bench makes its table when it needs it.

-- +goose Up
DROP TABLE IF EXISTS loanq_bench_item;

-- +goose Down
