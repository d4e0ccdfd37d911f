-- Abandoned requests (docs/algorithm.md, "Abandoned requests"): a pending
-- request nobody waits for any more (a killed process, a client gone) is
-- never served. alive_at is its last sign of life, from the database clock:
-- set when it is logged, renewed by the caller that waits for it and by each
-- recheck of its requester. A request without one for longer than 60 s
-- (drivers.RequestAlive) is not read as pending by a round, not finished by
-- one, and ends as 'expired'. NULL (requests logged before this migration,
-- or by a previous version still running) is no sign of life: such a
-- request is left to the previous version's own rounds, which ignore the
-- column.
--
-- The row-level security policy of 00008 gains the two new updates: the
-- requester's sign of life (status stays pending; not in the future), and
-- the expiry, which anyone may write, but only of a request that the
-- database's clock says is past the bound. The literal 60 seconds is
-- drivers.RequestAlive (TestRequestAliveLiteral).

-- +goose Up
ALTER TABLE loanq_work_request ADD COLUMN alive_at TIMESTAMPTZ;
ALTER TABLE loanq_work_request DROP CONSTRAINT loanq_work_request_status_ck;
ALTER TABLE loanq_work_request ADD CONSTRAINT loanq_work_request_status_ck
    CHECK (status IN ('pending', 'assigned', 'partial', 'empty', 'cancelled', 'expired'));
DROP POLICY loanq_finish ON loanq_work_request;
CREATE POLICY loanq_finish ON loanq_work_request FOR UPDATE USING (status = 'pending')
    WITH CHECK ((status = 'cancelled' AND loanq_may_act_as(user_name))
             OR status IN ('assigned', 'partial', 'empty')
             OR (status = 'pending' AND loanq_may_act_as(user_name) AND alive_at <= clock_timestamp())
             OR (status = 'expired' AND (alive_at IS NULL OR alive_at <= clock_timestamp() - INTERVAL '60 seconds')));

-- +goose Down
DROP POLICY loanq_finish ON loanq_work_request;
CREATE POLICY loanq_finish ON loanq_work_request FOR UPDATE USING (status = 'pending')
    WITH CHECK ((status = 'cancelled' AND loanq_may_act_as(user_name))
             OR status IN ('assigned', 'partial', 'empty'));
UPDATE loanq_work_request SET status = 'cancelled' WHERE status = 'expired';
ALTER TABLE loanq_work_request DROP CONSTRAINT loanq_work_request_status_ck;
ALTER TABLE loanq_work_request ADD CONSTRAINT loanq_work_request_status_ck
    CHECK (status IN ('pending', 'assigned', 'partial', 'empty', 'cancelled'));
ALTER TABLE loanq_work_request DROP COLUMN alive_at;
