-- Reasons and notes on dispositions (docs/reasons.md): the same columns and
-- rule as PostgreSQL's 00019, for every account (a code is data, not a
-- privilege). A row trigger reading loanq_task (another table: no mutating
-- table). Same statement rules as 00001_schema.sql.

-- +goose Up
-- +goose StatementBegin
ALTER TABLE loanq_task ADD (reasons VARCHAR2(1000 CHAR), require_reason VARCHAR2(40 CHAR))
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_work ADD (reason VARCHAR2(40 CHAR), note VARCHAR2(1000 CHAR))
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE TRIGGER loanq_work_reason_check
BEFORE UPDATE OF disposition ON loanq_work FOR EACH ROW
WHEN (OLD.disposition IS NULL AND NEW.disposition IS NOT NULL)
DECLARE
    codes   VARCHAR2(1000 CHAR);
    req     VARCHAR2(40 CHAR);
    allowed VARCHAR2(1000 CHAR);
    p       PLS_INTEGER;
BEGIN
    SELECT t.reasons, t.require_reason INTO codes, req FROM loanq_task t WHERE t.id = :NEW.task_id;
    p := INSTR(';' || codes || ';', ';' || :NEW.disposition || '=');
    IF :NEW.reason IS NOT NULL AND p > 0 THEN
        allowed := SUBSTR(';' || codes || ';', p + LENGTH(:NEW.disposition) + 2);
        allowed := SUBSTR(allowed, 1, INSTR(allowed, ';') - 1);
        IF INSTR(',' || allowed || ',', ',' || :NEW.reason || ',') = 0
           OR INSTR(:NEW.reason, ',') > 0 OR INSTR(:NEW.reason, ';') > 0 THEN
            RAISE_APPLICATION_ERROR(-20514, 'loanq: the reason is not one of the task''s codes for this action (docs/reasons.md)');
        END IF;
    END IF;
    IF :NEW.reason IS NULL AND INSTR(',' || req || ',', ',' || :NEW.disposition || ',') > 0 THEN
        RAISE_APPLICATION_ERROR(-20514, 'loanq: the task requires a reason for this action (docs/reasons.md)');
    END IF;
END;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TRIGGER loanq_work_reason_check
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_work DROP (reason, note)
-- +goose StatementEnd

-- +goose StatementBegin
ALTER TABLE loanq_task DROP (reasons, require_reason)
-- +goose StatementEnd
