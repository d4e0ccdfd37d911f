-- Entitlements and four eyes: the tables and rules of PostgreSQL's and
-- MySQL's 00018 (docs/governance.md). Oracle: same statement rules as
-- 00001_schema.sql. Only the exact text is tested: no Oracle server runs
-- loanq's tests.
--
-- The work row check is a COMPOUND trigger for the reason 00017's is: a
-- row trigger that queries loanq_work during a multi-row INSERT ... SELECT
-- fails with ORA-04091 (mutating table). The row section checks the
-- entitlement (other tables) and notes the (task, loan, user); the AFTER
-- STATEMENT section looks for the user's rows of the loan in the tasks the
-- task names with --not-worked-in.

-- +goose Up
-- +goose StatementBegin
CREATE TABLE loanq_group (
    group_name VARCHAR2(100 CHAR) NOT NULL,
    user_name  VARCHAR2(100 CHAR) NOT NULL,
    source     VARCHAR2(10 CHAR)  DEFAULT 'admin' NOT NULL,
    added_by   VARCHAR2(128 CHAR) NOT NULL,
    added_at   TIMESTAMP(6)       NOT NULL,
    CONSTRAINT loanq_group_pk PRIMARY KEY (group_name, user_name),
    CONSTRAINT loanq_group_source_ck CHECK (source IN ('admin', 'proxy'))
)
-- +goose StatementEnd
-- +goose StatementBegin
CREATE INDEX loanq_group_user_ix ON loanq_group (user_name, group_name)
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TABLE loanq_task_allow (
    task_id   NUMBER(19)         NOT NULL,
    is_group  NUMBER(1)          NOT NULL,
    principal VARCHAR2(100 CHAR) NOT NULL,
    CONSTRAINT loanq_task_allow_pk PRIMARY KEY (task_id, is_group, principal),
    CONSTRAINT loanq_task_allow_kind_ck CHECK (is_group IN (0, 1)),
    CONSTRAINT loanq_task_allow_task_fk FOREIGN KEY (task_id) REFERENCES loanq_task (id)
)
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TABLE loanq_task_not_worked_in (
    task_id       NUMBER(19) NOT NULL,
    other_task_id NUMBER(19) NOT NULL,
    CONSTRAINT loanq_task_not_worked_in_pk PRIMARY KEY (task_id, other_task_id),
    CONSTRAINT loanq_task_not_worked_in_ck CHECK (task_id <> other_task_id),
    CONSTRAINT loanq_task_nwi_task_fk FOREIGN KEY (task_id) REFERENCES loanq_task (id),
    CONSTRAINT loanq_task_nwi_other_fk FOREIGN KEY (other_task_id) REFERENCES loanq_task (id)
)
-- +goose StatementEnd
-- +goose StatementBegin
CREATE INDEX loanq_task_not_worked_in_ix ON loanq_task_not_worked_in (other_task_id)
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION loanq_may_work(t IN NUMBER, u IN VARCHAR2) RETURN NUMBER
AUTHID DEFINER IS
    n NUMBER;
BEGIN
    SELECT COUNT(*) INTO n FROM loanq_task_allow a WHERE a.task_id = t;
    IF n = 0 THEN
        RETURN 1;
    END IF;
    SELECT COUNT(*) INTO n FROM loanq_task_allow a
     WHERE a.task_id = t AND ((a.is_group = 0 AND a.principal = u)
        OR (a.is_group = 1 AND EXISTS (SELECT 1 FROM loanq_group g WHERE g.group_name = a.principal AND g.user_name = u)));
    IF n > 0 THEN
        RETURN 1;
    END IF;
    RETURN 0;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE TRIGGER loanq_work_request_governance
BEFORE INSERT ON loanq_work_request FOR EACH ROW
BEGIN
    IF loanq_trusted() = 1 THEN
        RETURN;
    END IF;
    IF loanq_may_work(:NEW.task_id, :NEW.user_name) = 0 THEN
        RAISE_APPLICATION_ERROR(-20401, 'loanq: user ' || :NEW.user_name || ' is not allowed to work that task (docs/governance.md)');
    END IF;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE TRIGGER loanq_work_governance
FOR INSERT ON loanq_work
COMPOUND TRIGGER
    TYPE row_note IS RECORD (task_id NUMBER(19), loan_id VARCHAR2(200 CHAR), user_name VARCHAR2(100 CHAR));
    TYPE row_notes IS TABLE OF row_note INDEX BY PLS_INTEGER;
    untrusted BOOLEAN := FALSE;
    notes     row_notes;
    note      row_note;
    n         NUMBER;

BEFORE STATEMENT IS
BEGIN
    untrusted := loanq_trusted() = 0;
END BEFORE STATEMENT;

BEFORE EACH ROW IS
BEGIN
    IF untrusted THEN
        IF loanq_may_work(:NEW.task_id, :NEW.user_name) = 0 THEN
            RAISE_APPLICATION_ERROR(-20401, 'loanq: user ' || :NEW.user_name || ' is not allowed to work that task (docs/governance.md)');
        END IF;
        note.task_id := :NEW.task_id;
        note.loan_id := :NEW.loan_id;
        note.user_name := :NEW.user_name;
        notes(notes.COUNT + 1) := note;
    END IF;
END BEFORE EACH ROW;

AFTER STATEMENT IS
BEGIN
    IF untrusted THEN
        FOR i IN 1 .. notes.COUNT LOOP
            note := notes(i);
            SELECT COUNT(*) INTO n FROM loanq_task_not_worked_in f JOIN loanq_work w ON w.task_id = f.other_task_id
             WHERE f.task_id = note.task_id AND w.loan_id = note.loan_id AND w.user_name = note.user_name;
            IF n > 0 THEN
                RAISE_APPLICATION_ERROR(-20401, 'loanq: four eyes: user ' || note.user_name || ' worked loan ' || note.loan_id
                    || ' in a task that this task names with --not-worked-in (docs/governance.md)');
            END IF;
        END LOOP;
    END IF;
END AFTER STATEMENT;
END loanq_work_governance;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TRIGGER loanq_work_governance
-- +goose StatementEnd
-- +goose StatementBegin
DROP TRIGGER loanq_work_request_governance
-- +goose StatementEnd
-- +goose StatementBegin
DROP FUNCTION loanq_may_work
-- +goose StatementEnd
-- +goose StatementBegin
DROP TABLE loanq_task_not_worked_in PURGE
-- +goose StatementEnd
-- +goose StatementBegin
DROP TABLE loanq_task_allow PURGE
-- +goose StatementEnd
-- +goose StatementBegin
DROP TABLE loanq_group PURGE
-- +goose StatementEnd
