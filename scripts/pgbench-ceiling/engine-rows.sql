-- One loop of `bench --target engine --strategy rows --count 1`, as loanq
-- sends it (loanq sql --dialect postgres, loanq explain), with the task's
-- values written in: work get (task read, the claim transaction: the
-- locking read, the request logged inside it, then one statement that
-- assigns, finishes the request, logs the run and returns the answer —
-- rows finish one-statement), the item's work, disposition complete.
-- One difference: loanq's finishing statement finishes the request only if
-- every locked key was assigned, and otherwise rolls back and claims again
-- statement by statement (a key another caller assigned after the locking
-- read's snapshot: 7 % of the gets of `bench --target engine --workers 32`);
-- pgbench cannot branch, so here the request is finished with what was
-- assigned.
SELECT id, name, source_table, key_column, criteria, order_by, max_active, lock_strategy FROM loanq_task WHERE name = 'ceiling';
BEGIN;
SELECT coalesce(max(id), 0) AS id FROM (SELECT src.id FROM loanq_bench_item src WHERE (status = 'ready') AND NOT EXISTS (SELECT 1 FROM loanq_work w WHERE w.task_id = :task AND w.loan_id = (src.id)::text AND (w.disposition IS NULL OR w.disposition = 'never' OR (w.disposition = 'return' AND w.return_at > clock_timestamp()))) ORDER BY src.id LIMIT 1 FOR NO KEY UPDATE OF src SKIP LOCKED) c \gset
INSERT INTO loanq_work_request (task_id, user_name, requested, assigned, status, created_at) VALUES (:task, 'u' || :client_id, 1, 0, 'pending', clock_timestamp()) RETURNING id AS rid \gset
WITH claimed AS (INSERT INTO loanq_work (task_id, loan_id, user_name, request_id, assigned_at) SELECT :task, (src.id)::text, 'u' || :client_id, :rid, clock_timestamp() FROM loanq_bench_item src WHERE (status = 'ready') AND NOT EXISTS (SELECT 1 FROM loanq_work w WHERE w.task_id = :task AND w.loan_id = (src.id)::text AND (w.disposition IS NULL OR w.disposition = 'never' OR (w.disposition = 'return' AND w.return_at > clock_timestamp()))) AND src.id = ANY (ARRAY[:id]::bigint[]) ORDER BY src.id ON CONFLICT (task_id, loan_id) WHERE disposition IS NULL DO NOTHING RETURNING id, loan_id),
     finished AS (UPDATE loanq_work_request SET assigned = (SELECT count(*) FROM claimed), status = CASE WHEN (SELECT count(*) FROM claimed) = 1 THEN 'assigned' ELSE 'empty' END, served_at = clock_timestamp() WHERE id = :rid AND status = 'pending' RETURNING id, created_at),
     run AS (INSERT INTO loanq_query_run (task_id, strategy, holder, started_at, duration_ms, rows_found, requests_served, loans_assigned, pooled) SELECT :task, 'rows', 'h' || :client_id, clock_timestamp(), 0, 1, 1, 1, 0 FROM finished)
SELECT claimed.loan_id, finished.created_at FROM finished LEFT JOIN claimed ON true ORDER BY claimed.id;
COMMIT;
UPDATE loanq_bench_item SET status = 'done', owner = 'u' || :client_id, processed = processed + 1, processed_at = clock_timestamp() WHERE id = :id AND EXISTS (SELECT 1 FROM loanq_work WHERE task_id = :task AND loan_id = (:id)::text AND request_id = :rid AND disposition IS NULL);
UPDATE loanq_work SET disposition = 'complete', disposed_at = clock_timestamp(), disposed_by = 'u' || :client_id WHERE task_id = :task AND loan_id = (:id)::text AND user_name = 'u' || :client_id AND disposition IS NULL;
