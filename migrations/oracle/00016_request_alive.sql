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
-- past the bound. The literal 60 seconds is drivers.RequestAlive
-- (TestRequestAliveLiteral). Same statement rules as 00001_schema.sql.

-- +goose Up
-- +goose StatementBegin
ALTER TABLE loanq_work_request ADD (alive_at TIMESTAMP(6))
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_work_request DROP CONSTRAINT loanq_work_request_status_ck
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_work_request ADD CONSTRAINT loanq_work_request_status_ck
    CHECK (status IN ('pending', 'assigned', 'partial', 'empty', 'cancelled', 'expired'))
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE TRIGGER loanq_work_request_finish
BEFORE UPDATE ON loanq_work_request FOR EACH ROW
BEGIN
    IF loanq_trusted() = 1 THEN
        RETURN;
    END IF;
    IF :NEW.user_name <> :OLD.user_name OR :NEW.task_id <> :OLD.task_id OR :NEW.requested <> :OLD.requested
       OR NOT ((:NEW.status = 'cancelled' AND loanq_may_act_as(:OLD.user_name) = 1)
               OR (:OLD.status = 'pending' AND :NEW.status IN ('assigned', 'partial', 'empty'))
               OR (:OLD.status = 'pending' AND :NEW.status = 'pending' AND loanq_may_act_as(:OLD.user_name) = 1
                   AND :NEW.alive_at <= SYS_EXTRACT_UTC(SYSTIMESTAMP))
               OR (:OLD.status = 'pending' AND :NEW.status = 'expired'
                   AND (:OLD.alive_at IS NULL OR :OLD.alive_at <= SYS_EXTRACT_UTC(SYSTIMESTAMP) - NUMTODSINTERVAL(60, 'SECOND')))) THEN
        RAISE_APPLICATION_ERROR(-20401, 'loanq: this database account may not change that request (docs/security.md)');
    END IF;
END;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE TRIGGER loanq_work_request_finish
BEFORE UPDATE ON loanq_work_request FOR EACH ROW
BEGIN
    IF loanq_trusted() = 1 THEN
        RETURN;
    END IF;
    IF :NEW.user_name <> :OLD.user_name OR :NEW.task_id <> :OLD.task_id OR :NEW.requested <> :OLD.requested
       OR NOT ((:NEW.status = 'cancelled' AND loanq_may_act_as(:OLD.user_name) = 1)
               OR (:OLD.status = 'pending' AND :NEW.status IN ('assigned', 'partial', 'empty'))) THEN
        RAISE_APPLICATION_ERROR(-20401, 'loanq: this database account may not change that request (docs/security.md)');
    END IF;
END;
-- +goose StatementEnd

-- +goose StatementBegin
UPDATE loanq_work_request SET status = 'cancelled' WHERE status = 'expired'
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_work_request DROP CONSTRAINT loanq_work_request_status_ck
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_work_request ADD CONSTRAINT loanq_work_request_status_ck
    CHECK (status IN ('pending', 'assigned', 'partial', 'empty', 'cancelled'))
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_work_request DROP COLUMN alive_at
-- +goose StatementEnd
