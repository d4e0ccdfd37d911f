-- Reasons and notes on dispositions (docs/reasons.md). A task may declare
-- reason codes per action (reasons: 'never=duplicate,fraud;return=waiting-docs',
-- as dispatch.Reasons writes it) and require one for some actions
-- (require_reason: 'never,return'); a disposition carries a reason code and
-- a note (at most 1000 characters).
--
-- The codes are the database's rule, for every account (the owner too: a
-- code is data, not a privilege): a disposition of an action with declared
-- codes names one of them, or none; an action the task requires a reason
-- for names one. Checked when a disposition is written (the trigger's WHEN:
-- no function call for any other update). The function reads loanq_task by
-- its key, with the caller's rights (every account reads loanq_task).

-- +goose Up
ALTER TABLE loanq_task ADD COLUMN reasons VARCHAR(1000);
ALTER TABLE loanq_task ADD COLUMN require_reason VARCHAR(40);
ALTER TABLE loanq_work ADD COLUMN reason VARCHAR(40);
ALTER TABLE loanq_work ADD COLUMN note VARCHAR(1000);

-- +goose StatementBegin
DO $do$
BEGIN
    EXECUTE format($f$
CREATE FUNCTION loanq_work_reason_check() RETURNS trigger
LANGUAGE plpgsql
AS $body$
DECLARE
    codes   VARCHAR;
    req     VARCHAR;
    allowed VARCHAR;
BEGIN
    SELECT t.reasons, t.require_reason INTO codes, req FROM %1$I.loanq_task t WHERE t.id = NEW.task_id;
    allowed := substring(';' || codes || ';' from ';' || NEW.disposition || '=([^;]*);');
    IF NEW.reason IS NOT NULL AND allowed IS NOT NULL
       AND (position(',' || NEW.reason || ',' in ',' || allowed || ',') = 0 OR NEW.reason ~ '[,;]') THEN
        RAISE EXCEPTION 'loanq: reason %% is not one of task''s codes for %%: %% (docs/reasons.md)', NEW.reason, NEW.disposition, allowed
            USING ERRCODE = '23514';
    END IF;
    IF NEW.reason IS NULL AND position(',' || NEW.disposition || ',' in ',' || coalesce(req, '') || ',') > 0 THEN
        RAISE EXCEPTION 'loanq: the task requires a reason for %% (docs/reasons.md)', NEW.disposition
            USING ERRCODE = '23514';
    END IF;
    RETURN NEW;
END
$body$
$f$, current_schema());
END
$do$;
-- +goose StatementEnd
CREATE TRIGGER loanq_work_reason_check BEFORE UPDATE ON loanq_work
    FOR EACH ROW WHEN (OLD.disposition IS NULL AND NEW.disposition IS NOT NULL)
    EXECUTE FUNCTION loanq_work_reason_check();

-- +goose Down
DROP TRIGGER loanq_work_reason_check ON loanq_work;
DROP FUNCTION loanq_work_reason_check();
ALTER TABLE loanq_work DROP COLUMN note;
ALTER TABLE loanq_work DROP COLUMN reason;
ALTER TABLE loanq_task DROP COLUMN require_reason;
ALTER TABLE loanq_task DROP COLUMN reasons;
