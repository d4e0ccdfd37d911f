-- The raw single-row claim of `loanq bench` (bench/sql.go: ClaimSkip + Done):
-- one transaction that locks the first ready item and finishes it.
BEGIN;
SELECT id FROM loanq_bench_item WHERE status = 'ready' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED \gset
UPDATE loanq_bench_item SET status = 'done', owner = 'w' || :client_id, processed = processed + 1, processed_at = clock_timestamp() WHERE id = :id;
COMMIT;
