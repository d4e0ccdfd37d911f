-- Abandoned requests (docs/algorithm.md, "Abandoned requests"): a pending
-- request nobody waits for any more (a killed process, a client gone) is
-- never served. alive_at is its last sign of life, from the database clock
-- (UTC): set when it is logged, renewed by the caller that waits for it and
-- by each recheck of its requester. A request without one for longer than
-- 60 s (drivers.RequestAlive) is not read as pending by a round, not
-- finished by one, and ends as 'expired'. NULL (requests logged before this
-- migration, or by a previous version still running) is no sign of life:
-- such a request is left to the previous version's own rounds, which ignore
-- the column.
--
-- The trigger of 00008 gains the two new updates: the requester's sign of
-- life (status stays pending; not in the future), and the expiry, which any
-- account may write, but only of a request that the database's clock says is
-- past the bound. The literal 60 SECOND is drivers.RequestAlive
-- (TestRequestAliveLiteral). MySQL 8 has no CREATE OR REPLACE TRIGGER: the
-- trigger is dropped and created again (DDL: no row is changed meanwhile
-- without a check, the table's metadata lock covers both).

-- +goose Up
ALTER TABLE loanq_work_request ADD COLUMN alive_at DATETIME(6) NULL;
ALTER TABLE loanq_work_request DROP CONSTRAINT loanq_work_request_status_ck;
ALTER TABLE loanq_work_request ADD CONSTRAINT loanq_work_request_status_ck
    CHECK (status IN ('pending', 'assigned', 'partial', 'empty', 'cancelled', 'expired'));
DROP TRIGGER loanq_work_request_finish;
-- +goose StatementBegin
CREATE TRIGGER loanq_work_request_finish BEFORE UPDATE ON loanq_work_request FOR EACH ROW
BEGIN
    IF NOT loanq_trusted() AND (NOT (NEW.user_name <=> OLD.user_name AND NEW.task_id <=> OLD.task_id AND NEW.requested <=> OLD.requested)
       OR NOT ((NEW.status = 'cancelled' AND loanq_may_act_as(OLD.user_name))
               OR (OLD.status = 'pending' AND NEW.status IN ('assigned', 'partial', 'empty'))
               OR (OLD.status = 'pending' AND NEW.status = 'pending' AND loanq_may_act_as(OLD.user_name)
                   AND NEW.alive_at <= UTC_TIMESTAMP(6))
               OR (OLD.status = 'pending' AND NEW.status = 'expired'
                   AND (OLD.alive_at IS NULL OR OLD.alive_at <= UTC_TIMESTAMP(6) - INTERVAL 60 SECOND)))) THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'loanq: this database account may not change that request (docs/security.md)';
    END IF;
END
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER loanq_work_request_finish;
-- +goose StatementBegin
CREATE TRIGGER loanq_work_request_finish BEFORE UPDATE ON loanq_work_request FOR EACH ROW
BEGIN
    IF NOT loanq_trusted() AND (NOT (NEW.user_name <=> OLD.user_name AND NEW.task_id <=> OLD.task_id AND NEW.requested <=> OLD.requested)
       OR NOT ((NEW.status = 'cancelled' AND loanq_may_act_as(OLD.user_name))
               OR (OLD.status = 'pending' AND NEW.status IN ('assigned', 'partial', 'empty')))) THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'loanq: this database account may not change that request (docs/security.md)';
    END IF;
END
-- +goose StatementEnd
UPDATE loanq_work_request SET status = 'cancelled' WHERE status = 'expired';
ALTER TABLE loanq_work_request DROP CONSTRAINT loanq_work_request_status_ck;
ALTER TABLE loanq_work_request ADD CONSTRAINT loanq_work_request_status_ck
    CHECK (status IN ('pending', 'assigned', 'partial', 'empty', 'cancelled'));
ALTER TABLE loanq_work_request DROP COLUMN alive_at;
