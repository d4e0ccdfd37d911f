-- Reasons and notes on dispositions (docs/reasons.md): the same columns and
-- rule as PostgreSQL's 00019. The rule is a trigger of its own beside
-- 00017's loanq_work_dispose (MySQL 5.7 and MariaDB 10.2 allow several
-- BEFORE UPDATE triggers), for every account: a code is data, not a
-- privilege. FIND_IN_SET reads the comma lists; a reason holding a comma
-- or a semicolon is refused outright.

-- +goose Up
ALTER TABLE loanq_task ADD COLUMN reasons VARCHAR(1000) NULL, ADD COLUMN require_reason VARCHAR(40) NULL;
ALTER TABLE loanq_work ADD COLUMN reason VARCHAR(40) NULL, ADD COLUMN note VARCHAR(1000) NULL;

-- +goose StatementBegin
CREATE TRIGGER loanq_work_reason_check BEFORE UPDATE ON loanq_work FOR EACH ROW
BEGIN
    DECLARE codes VARCHAR(1000);
    DECLARE req VARCHAR(40);
    DECLARE seg VARCHAR(1000);
    IF OLD.disposition IS NULL AND NEW.disposition IS NOT NULL THEN
        SELECT t.reasons, t.require_reason INTO codes, req FROM loanq_task t WHERE t.id = NEW.task_id;
        IF NEW.reason IS NOT NULL AND LOCATE(CONCAT(';', NEW.disposition, '='), CONCAT(';', codes)) > 0 THEN
            SET seg = SUBSTRING_INDEX(SUBSTRING(CONCAT(';', codes), LOCATE(CONCAT(';', NEW.disposition, '='), CONCAT(';', codes)) + CHAR_LENGTH(NEW.disposition) + 2), ';', 1);
            IF FIND_IN_SET(NEW.reason, seg) = 0 OR LOCATE(',', NEW.reason) > 0 OR LOCATE(';', NEW.reason) > 0 THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'loanq: the reason is not one of the task''s codes for this action (docs/reasons.md)';
            END IF;
        END IF;
        IF NEW.reason IS NULL AND FIND_IN_SET(NEW.disposition, COALESCE(req, '')) > 0 THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'loanq: the task requires a reason for this action (docs/reasons.md)';
        END IF;
    END IF;
END
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER loanq_work_reason_check;
ALTER TABLE loanq_work DROP COLUMN note, DROP COLUMN reason;
ALTER TABLE loanq_task DROP COLUMN require_reason, DROP COLUMN reasons;
