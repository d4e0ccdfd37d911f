-- Who may act as whom (docs/security.md). The database, not loanq's code,
-- decides which user names an account may write rows for, so that SQL sent
-- by hand through a processor's account is refused the same way.
--
-- loanq_account lists the accounts an admin has set up (`loanq grants`
-- prints the rows; Oracle account names are upper case unless quoted): an
-- account acts as its own name, as the user_name an admin mapped to it, or,
-- when trusted (admins, supervisors, `loanq serve`), as anyone. The account
-- that runs this migration is trusted.
--
-- Row-level security on Oracle (Virtual Private Database, DBMS_RLS) needs
-- Enterprise Edition and filters rows rather than refusing them: triggers
-- refuse instead, as on MySQL. loanq_may_act_as and the triggers run with
-- the owner's rights (definer rights, the default), so they read
-- loanq_account whatever the caller may read; SESSION_USER is the caller.
-- The rules are MySQL's (migrations/mysql/00008_identity.sql). A row trigger
-- cannot read its own table (ORA-04091), and none of these does.
--
-- Same statement rules as 00001_schema.sql; PL/SQL blocks keep their END;.
-- Only the exact text is tested: no Oracle server runs loanq's tests.

-- +goose Up
-- +goose StatementBegin
CREATE TABLE loanq_account (
    account    VARCHAR2(128 CHAR) NOT NULL,
    user_name  VARCHAR2(100 CHAR),
    trusted    NUMBER(1)          DEFAULT 0 NOT NULL,
    granted_by VARCHAR2(128 CHAR) NOT NULL,
    granted_at TIMESTAMP(6)       NOT NULL,
    CONSTRAINT loanq_account_pk PRIMARY KEY (account),
    CONSTRAINT loanq_account_trusted_ck CHECK (trusted IN (0, 1))
)
-- +goose StatementEnd

-- +goose StatementBegin
INSERT INTO loanq_account (account, trusted, granted_by, granted_at)
VALUES (SYS_CONTEXT('USERENV', 'SESSION_USER'), 1, SYS_CONTEXT('USERENV', 'SESSION_USER'), SYS_EXTRACT_UTC(SYSTIMESTAMP))
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_task ADD (updated_by VARCHAR2(100 CHAR), updated_at TIMESTAMP(6))
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION loanq_may_act_as(acting IN VARCHAR2) RETURN NUMBER
AUTHID DEFINER IS
    n NUMBER;
BEGIN
    IF acting = SYS_CONTEXT('USERENV', 'SESSION_USER') THEN
        RETURN 1;
    END IF;
    SELECT COUNT(*) INTO n FROM loanq_account a
    WHERE a.account = SYS_CONTEXT('USERENV', 'SESSION_USER') AND (a.trusted = 1 OR a.user_name = acting);
    RETURN CASE WHEN n > 0 THEN 1 ELSE 0 END;
END;
-- +goose StatementEnd

-- Trusted accounts (the owner, admins, supervisors, serve) are not checked by
-- the triggers, as the owner of PostgreSQL's tables is not by its policies.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION loanq_trusted RETURN NUMBER
AUTHID DEFINER IS
    n NUMBER;
BEGIN
    SELECT COUNT(*) INTO n FROM loanq_account a
    WHERE a.account = SYS_CONTEXT('USERENV', 'SESSION_USER') AND a.trusted = 1;
    RETURN CASE WHEN n > 0 THEN 1 ELSE 0 END;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE TRIGGER loanq_work_request_log
BEFORE INSERT ON loanq_work_request FOR EACH ROW
BEGIN
    IF loanq_trusted() = 1 THEN
        RETURN;
    END IF;
    IF :NEW.status <> 'pending' OR :NEW.assigned <> 0 OR loanq_may_act_as(:NEW.user_name) = 0 THEN
        RAISE_APPLICATION_ERROR(-20401, 'loanq: this database account may not log a request for that user (docs/security.md)');
    END IF;
END;
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
               OR (:OLD.status = 'pending' AND :NEW.status IN ('assigned', 'partial', 'empty'))) THEN
        RAISE_APPLICATION_ERROR(-20401, 'loanq: this database account may not change that request (docs/security.md)');
    END IF;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE TRIGGER loanq_work_assign
BEFORE INSERT ON loanq_work FOR EACH ROW
DECLARE
    n NUMBER;
BEGIN
    IF loanq_trusted() = 1 THEN
        RETURN;
    END IF;
    SELECT COUNT(*) INTO n FROM loanq_work_request r
    WHERE r.id = :NEW.request_id AND r.task_id = :NEW.task_id AND r.user_name = :NEW.user_name;
    IF :NEW.disposition IS NOT NULL OR n = 0 THEN
        RAISE_APPLICATION_ERROR(-20401, 'loanq: a work row must serve a request of its user in its task (docs/security.md)');
    END IF;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE TRIGGER loanq_work_dispose
BEFORE UPDATE ON loanq_work FOR EACH ROW
DECLARE
    n NUMBER := 0;
BEGIN
    IF loanq_trusted() = 1 THEN
        RETURN;
    END IF;
    IF :NEW.user_name <> :OLD.user_name OR :NEW.task_id <> :OLD.task_id
       OR :NEW.loan_id <> :OLD.loan_id OR :NEW.request_id <> :OLD.request_id THEN
        RAISE_APPLICATION_ERROR(-20401, 'loanq: this database account may not end that assignment (docs/security.md)');
    END IF;
    IF loanq_may_act_as(:OLD.user_name) = 1 AND (:NEW.disposed_by IS NULL OR loanq_may_act_as(:NEW.disposed_by) = 1) THEN
        RETURN;
    END IF;
    IF :NEW.disposition = 'expired' AND :NEW.disposed_by IS NULL THEN
        SELECT COUNT(*) INTO n FROM loanq_task t
        WHERE t.id = :OLD.task_id AND t.max_hold_ms IS NOT NULL
          AND :OLD.assigned_at <= SYS_EXTRACT_UTC(SYSTIMESTAMP) - NUMTODSINTERVAL(t.max_hold_ms / 1000, 'SECOND');
    END IF;
    IF n = 0 THEN
        RAISE_APPLICATION_ERROR(-20401, 'loanq: this database account may not end that assignment (docs/security.md)');
    END IF;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE TRIGGER loanq_task_user_own
BEFORE INSERT ON loanq_task_user FOR EACH ROW
BEGIN
    IF loanq_trusted() = 1 THEN
        RETURN;
    END IF;
    IF loanq_may_act_as(:NEW.user_name) = 0 THEN
        RAISE_APPLICATION_ERROR(-20401, 'loanq: this database account may not act as that user (docs/security.md)');
    END IF;
END;
-- +goose StatementEnd

-- Nobody changes a cap lock row (the UPDATE privilege on it is only what a
-- locking read may need).
-- +goose StatementBegin
CREATE OR REPLACE TRIGGER loanq_task_user_fixed
BEFORE UPDATE ON loanq_task_user FOR EACH ROW
BEGIN
    IF loanq_trusted() = 1 THEN
        RETURN;
    END IF;
    RAISE_APPLICATION_ERROR(-20401, 'loanq: cap lock rows are not changed (docs/security.md)');
END;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TRIGGER loanq_task_user_fixed
-- +goose StatementEnd

-- +goose StatementBegin
DROP TRIGGER loanq_task_user_own
-- +goose StatementEnd

-- +goose StatementBegin
DROP TRIGGER loanq_work_dispose
-- +goose StatementEnd

-- +goose StatementBegin
DROP TRIGGER loanq_work_assign
-- +goose StatementEnd

-- +goose StatementBegin
DROP TRIGGER loanq_work_request_finish
-- +goose StatementEnd

-- +goose StatementBegin
DROP TRIGGER loanq_work_request_log
-- +goose StatementEnd

-- +goose StatementBegin
DROP FUNCTION loanq_trusted
-- +goose StatementEnd

-- +goose StatementBegin
DROP FUNCTION loanq_may_act_as
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_task DROP (updated_by, updated_at)
-- +goose StatementEnd

-- +goose StatementBegin
DROP TABLE loanq_account PURGE
-- +goose StatementEnd
