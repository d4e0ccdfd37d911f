-- The raw claim with an acknowledgement: what a queue that does not hold
-- its row lock while the work is done needs at least. One transaction
-- locks the first ready item and marks it claimed by this client; after
-- the work, a second statement (its own commit) marks it done if this
-- client still holds it. Two durable commits per item, as loanq's claim +
-- disposition, and no other record.
BEGIN;
SELECT id FROM loanq_bench_item WHERE status = 'ready' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED \gset
UPDATE loanq_bench_item SET status = 'claimed', owner = 'w' || :client_id, claimed_at = clock_timestamp() WHERE id = :id;
COMMIT;
UPDATE loanq_bench_item SET status = 'done', processed = processed + 1, processed_at = clock_timestamp() WHERE id = :id AND owner = 'w' || :client_id AND status = 'claimed';
