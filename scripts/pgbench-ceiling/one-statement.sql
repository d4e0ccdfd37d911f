-- What no change of round trips can beat: the same records as engine-rows.sql
-- (a request, a work row, a run, the item's work, the disposition) with the
-- request written in the same statement as the claim's other writes. loanq
-- does NOT do this: the work rows' insert policy (row-level security,
-- migration 00008) looks the request up, and the parts of one WITH share a
-- snapshot, so under a processor's account the work rows would be refused;
-- loanq inserts the request one statement earlier (engine-rows.sql). Run as
-- the owner here, the policy is not applied.
SELECT id, name, source_table, key_column, criteria, order_by, max_active, lock_strategy FROM loanq_task WHERE name = 'ceiling';
BEGIN;
SELECT coalesce(max(id), 0) AS id FROM (SELECT src.id FROM loanq_bench_item src WHERE (status = 'ready') AND NOT EXISTS (SELECT 1 FROM loanq_work w WHERE w.task_id = :task AND w.loan_id = (src.id)::text AND (w.disposition IS NULL OR w.disposition = 'never' OR (w.disposition = 'return' AND w.return_at > clock_timestamp()))) ORDER BY src.id LIMIT 1 FOR NO KEY UPDATE OF src SKIP LOCKED) c \gset
WITH req AS (INSERT INTO loanq_work_request (task_id, user_name, requested, assigned, status, created_at, served_at) VALUES (:task, 'u' || :client_id, 1, 1, 'assigned', clock_timestamp(), clock_timestamp()) RETURNING id),
     ins AS (INSERT INTO loanq_work (task_id, loan_id, user_name, request_id, assigned_at) SELECT :task, (src.id)::text, 'u' || :client_id, (SELECT id FROM req), clock_timestamp() FROM loanq_bench_item src WHERE (status = 'ready') AND NOT EXISTS (SELECT 1 FROM loanq_work w WHERE w.task_id = :task AND w.loan_id = (src.id)::text AND (w.disposition IS NULL OR w.disposition = 'never' OR (w.disposition = 'return' AND w.return_at > clock_timestamp()))) AND src.id = ANY (ARRAY[:id]::bigint[]) ON CONFLICT (task_id, loan_id) WHERE disposition IS NULL DO NOTHING RETURNING loan_id),
     run AS (INSERT INTO loanq_query_run (task_id, strategy, holder, started_at, duration_ms, rows_found, requests_served, loans_assigned) VALUES (:task, 'rows', 'h' || :client_id, clock_timestamp(), 0, 1, 1, 1))
SELECT (SELECT id FROM req) AS rid, array(SELECT loan_id FROM ins) AS loans \gset
COMMIT;
UPDATE loanq_bench_item SET status = 'done', owner = 'u' || :client_id, processed = processed + 1, processed_at = clock_timestamp() WHERE id = :id AND EXISTS (SELECT 1 FROM loanq_work WHERE task_id = :task AND loan_id = (:id)::text AND request_id = :rid AND disposition IS NULL);
UPDATE loanq_work SET disposition = 'complete', disposed_at = clock_timestamp(), disposed_by = 'u' || :client_id WHERE task_id = :task AND loan_id = (:id)::text AND user_name = 'u' || :client_id AND disposition IS NULL;
