-- Reasons and notes on dispositions (docs/reasons.md): the columns of the
-- other dialects' 00019, and the same rule as their trigger (a disposition's
-- reason is one of its action's declared codes; a required reason is
-- given), checked for every writer of the file.

-- +goose Up
ALTER TABLE loanq_task ADD COLUMN reasons VARCHAR(1000);
ALTER TABLE loanq_task ADD COLUMN require_reason VARCHAR(40);
ALTER TABLE loanq_work ADD COLUMN reason VARCHAR(40);
ALTER TABLE loanq_work ADD COLUMN note VARCHAR(1000);

-- +goose StatementBegin
CREATE TRIGGER loanq_work_reason_check BEFORE UPDATE OF disposition ON loanq_work
FOR EACH ROW WHEN OLD.disposition IS NULL AND NEW.disposition IS NOT NULL
BEGIN
    -- allowed: the codes of the action's segment of reasons (between
    -- "ACTION=" and the next ';'); no segment, no rule.
    SELECT RAISE(ABORT, 'loanq: the reason is not one of the task''s codes for this action (docs/reasons.md)')
      FROM (SELECT substr(s, p, instr(substr(s, p), ';') - 1) AS allowed
              FROM (SELECT ';' || t.reasons || ';' AS s,
                           instr(';' || t.reasons || ';', ';' || NEW.disposition || '=') AS found,
                           instr(';' || t.reasons || ';', ';' || NEW.disposition || '=') + length(NEW.disposition) + 2 AS p
                      FROM loanq_task t WHERE t.id = NEW.task_id)
             WHERE found > 0)
     WHERE NEW.reason IS NOT NULL
       AND (instr(',' || allowed || ',', ',' || NEW.reason || ',') = 0 OR instr(NEW.reason, ',') > 0 OR instr(NEW.reason, ';') > 0);
    SELECT RAISE(ABORT, 'loanq: the task requires a reason for this action (docs/reasons.md)')
      FROM loanq_task t
     WHERE t.id = NEW.task_id AND NEW.reason IS NULL
       AND instr(',' || coalesce(t.require_reason, '') || ',', ',' || NEW.disposition || ',') > 0;
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER loanq_work_reason_check;
ALTER TABLE loanq_work DROP COLUMN note;
ALTER TABLE loanq_work DROP COLUMN reason;
ALTER TABLE loanq_task DROP COLUMN require_reason;
ALTER TABLE loanq_task DROP COLUMN reasons;
