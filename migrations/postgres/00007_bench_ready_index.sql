-- The bench's claims read "WHERE status = 'ready' ORDER BY id LIMIT k"
-- (the raw claim, and the engine benchmark's task criteria). Once items are
-- done, the planner walked the primary key in id order and filtered every
-- done row it passed, one heap visit each, on every claim: its statistics
-- (half the table ready, spread evenly) did not say that done rows pile up
-- at the low ids. Measured: 900 raw claims/s after 10,000 items instead of
-- 5,000 and more, and the engine's rows claim slowed the same way, so
-- ratios between the two depended on how far each run had got. A partial
-- index of the ready rows gives the claim order with nothing to filter; a
-- done row leaves it at its update (its old entry is dead and skipped).
--
-- docs/postgres.md, "Index the criteria like a queue", says the same for a
-- task's own source table.

-- +goose Up
CREATE INDEX loanq_bench_item_ready_ix ON loanq_bench_item (id) WHERE status = 'ready';

-- +goose Down
-- IF EXISTS: 00014 dropped it with its table.
DROP INDEX IF EXISTS loanq_bench_item_ready_ix;
